package data

import (
	"bytes"
	"path/filepath"
	"testing"
)

func TestReadIDX(t *testing.T) {
	dir := t.TempDir()
	px, lb := tinyImages(5, 28, 28, 10, 0)
	for _, zip := range []bool{false, true} {
		img, lbl := idxBytes([]int{5, 28, 28}, px), idxBytes([]int{5}, lb)
		name := "raw"
		if zip {
			img, lbl, name = gz(img), gz(lbl), "gz"
		}
		ip := writeFile(t, dir, name+"-images", img)
		lp := writeFile(t, dir, name+"-labels", lbl)
		x, err := ReadIDX(ip)
		if err != nil {
			t.Fatal(err)
		}
		if len(x.Dims) != 3 || x.Dims[0] != 5 || !bytes.Equal(x.Data, px) {
			t.Errorf("%s: dims %v", name, x.Dims)
		}
		r, err := ReadIDXPair(ip, lp, IDXOptions{Classes: 10, H: 28, W: 28})
		if err != nil {
			t.Fatal(err)
		}
		if r.N != 5 || r.C != 1 || r.H != 28 || !bytes.Equal(r.Pixels, px) || r.Labels[3] != 3 {
			t.Errorf("%s: got %+v", name, r.Labels)
		}
	}
}

func TestIDXLabelOffsetAndTranspose(t *testing.T) {
	dir := t.TempDir()
	px, lb := tinyImages(4, 28, 28, 26, 1) // EMNIST letters: labels 1..26
	lb[3] = 26
	ip := writeFile(t, dir, "i", idxBytes([]int{4, 28, 28}, px))
	lp := writeFile(t, dir, "l", idxBytes([]int{4}, lb))
	if _, err := ReadIDXPair(ip, lp, IDXOptions{Classes: 26}); err == nil {
		t.Error("labels 1..26 accepted without offset... label 26 must be out of range")
	}
	r, err := ReadIDXPair(ip, lp, IDXOptions{Classes: 26, LabelOffset: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Labels[0] != 0 || r.Labels[3] != 25 {
		t.Errorf("labels %v", r.Labels)
	}
	before := bytes.Clone(r.Pixels)
	if err := r.Transpose(); err != nil {
		t.Fatal(err)
	}
	// pixel (y=2, x=5) of image 1 is now at (5, 2)
	if r.Pixels[784+5*28+2] != before[784+2*28+5] || r.Pixels[784+2*28+5] != before[784+5*28+2] {
		t.Error("transpose wrong")
	}
	r.Transpose()
	if !bytes.Equal(r.Pixels, before) {
		t.Error("transpose twice is not the identity")
	}
	if err := (&RawSet{N: 1, C: 1, H: 2, W: 3, Pixels: make([]uint8, 6)}).Transpose(); err == nil {
		t.Error("non-square transpose accepted")
	}
}

func TestIDXBadInput(t *testing.T) {
	dir := t.TempDir()
	px, lb := tinyImages(3, 28, 28, 10, 0)
	good := idxBytes([]int{3, 28, 28}, px)
	goodLabels := writeFile(t, dir, "labels", idxBytes([]int{3}, lb))
	goodImages := writeFile(t, dir, "images", good)
	gzGood := gz(good)
	corrupt := bytes.Clone(gzGood)
	corrupt[len(corrupt)/2] ^= 0xff
	badCRC := bytes.Clone(gzGood)
	badCRC[len(badCRC)-6] ^= 0xff // CRC-32 in the trailer

	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "too short"},
		{"magic", append([]byte{1, 2, 8, 3}, good[4:]...), "bad IDX magic"},
		{"type", append([]byte{0, 0, 0x0d, 3}, good[4:]...), "not unsigned byte"},
		{"dims", append([]byte{0, 0, 8, 9}, good[4:]...), "9 dimensions"},
		{"short header", good[:10], "truncated IDX header"},
		{"truncated data", good[:len(good)-1], "need 2352 bytes of data, but the file holds 2351"},
		{"extra data", append(bytes.Clone(good), 0), "but the file holds 2353"},
		{"count too big", idxBytes([]int{4000000000, 28, 28}, px), "need more bytes than the file holds"},
		{"truncated gzip", gzGood[:len(gzGood)/2], "truncated gzip stream"},
		{"corrupt gzip", corrupt, "gzip"},
		{"gzip crc", badCRC, "corrupt gzip stream"},
		{"gzip garbage after", append(bytes.Clone(gzGood), "junk after the gzip stream"...), "corrupt gzip stream"},
		{"labels as images", idxBytes([]int{3}, lb), "want 3"},
	}
	for _, c := range cases {
		p := writeFile(t, dir, c.name, c.data)
		_, err := ReadIDXPair(p, goodLabels, IDXOptions{Classes: 10})
		wantFormatError(t, err, p, c.want)
	}
	// labels: count mismatch, out of range, wrong rank
	lcases := []struct {
		name string
		data []byte
		want string
	}{
		{"fewer labels", idxBytes([]int{2}, lb[:2]), "2 labels for 3 images"},
		{"label range", idxBytes([]int{3}, []byte{0, 10, 1}), "label 10 of example 1 is out of range [0, 10)"},
		{"images as labels", good, "want 1"},
	}
	for _, c := range lcases {
		p := writeFile(t, dir, c.name, c.data)
		_, err := ReadIDXPair(goodImages, p, IDXOptions{Classes: 10})
		wantFormatError(t, err, p, c.want)
	}
	// wrong image size
	_, err := ReadIDXPair(goodImages, goodLabels, IDXOptions{Classes: 10, H: 32, W: 32})
	wantFormatError(t, err, goodImages, "images are 28x28, want 32x32")
	// missing file
	if _, err := ReadIDX(filepath.Join(dir, "absent")); err == nil {
		t.Error("missing file accepted")
	}
}
