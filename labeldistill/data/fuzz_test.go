package data

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"image/color"
	"testing"

	"github.com/ldtorch/ldtorch/torch/fileio/npz"
)

// Fuzz targets for the parsers: any input must give a result that satisfies the
// RawSet invariants or a *FormatError; never a panic, a hang or a huge allocation.
// Run e.g. `go test -run '^$' -fuzz FuzzIDX -fuzztime 60s ./labeldistill/data/`.

// decompressed mirrors what Load does with a file's bytes.
func decompressed(name string, b []byte) ([]byte, error) {
	if isGzip(b) {
		return gunzip(name, b)
	}
	return b, nil
}

func checkFuzzResult(t *testing.T, r *RawSet, err error) {
	if err != nil {
		var fe *FormatError
		if !errors.As(err, &fe) {
			t.Fatalf("error is %T, not *FormatError: %v", err, err)
		}
		return
	}
	if r.N < 0 || len(r.Pixels) != r.N*r.ImageSize() || len(r.Labels) != r.N {
		t.Fatalf("inconsistent RawSet: N=%d %dx%dx%d, %d pixels, %d labels", r.N, r.C, r.H, r.W, len(r.Pixels), len(r.Labels))
	}
	for _, l := range r.Labels {
		if l < 0 || l >= int64(r.Classes) {
			t.Fatalf("label %d out of range", l)
		}
	}
}

func FuzzIDX(f *testing.F) {
	px, lb := tinyImages(3, 4, 5, 10, 0)
	img, lbl := idxBytes([]int{3, 4, 5}, px), idxBytes([]int{3}, lb)
	f.Add(img, lbl)
	f.Add(gz(img), gz(lbl))
	f.Add(img[:len(img)-1], lbl)
	f.Add(idxBytes([]int{0, 28, 28}, nil), idxBytes([]int{0}, nil))
	f.Add([]byte{0, 0, 8, 3, 255, 255, 255, 255, 0, 0, 0, 28, 0, 0, 0, 28}, lbl)
	f.Fuzz(func(t *testing.T, img, lbl []byte) {
		ic, err := decompressed("img", img)
		if err != nil {
			checkFuzzResult(t, nil, err)
			return
		}
		lc, err := decompressed("lbl", lbl)
		if err != nil {
			checkFuzzResult(t, nil, err)
			return
		}
		r, err := decodeIDXPair("img", ic, "lbl", lc, IDXOptions{Classes: 10})
		checkFuzzResult(t, r, err)
	})
}

func FuzzK49(f *testing.F) {
	px, lb := tinyImages(2, 3, 3, 49, 0)
	img := npzBytes(f, &npz.Array{Name: "arr_0", DType: "uint8", Shape: []int{2, 3, 3}, Data: px})
	lbl := npzBytes(f, &npz.Array{Name: "arr_0", DType: "uint8", Shape: []int{2}, Data: lb})
	lbl64 := npzBytes(f, &npz.Array{Name: "arr_0", DType: "int64", Shape: []int{2}, Data: []int64{0, 48}})
	var stored bytes.Buffer
	npz.Write(&stored, []*npz.Array{{Name: "arr_0", DType: "uint8", Shape: []int{2, 3, 3}, Data: px}})
	f.Add(img, lbl)
	f.Add(stored.Bytes(), lbl64)
	f.Add(img[:len(img)/2], lbl)
	f.Fuzz(func(t *testing.T, img, lbl []byte) {
		r, err := decodeK49("img", img, "lbl", lbl, 49)
		checkFuzzResult(t, r, err)
	})
}

func FuzzCIFAR(f *testing.F) {
	c10 := cifarBytes(2, false, func(i int) (byte, byte) { return 0, byte(i) })
	c100 := cifarBytes(2, true, func(i int) (byte, byte) { return byte(i), byte(50 + i) })
	f.Add(c10, false)
	f.Add(c100, true)
	f.Add(gz(c10), false)
	f.Add(gz(c100)[:40], true)
	f.Add(c10[:100], false)
	f.Fuzz(func(t *testing.T, data []byte, fine100 bool) {
		c, err := decompressed("cifar", data)
		if err != nil {
			checkFuzzResult(t, nil, err)
			return
		}
		r, err := decodeCIFAR("cifar", c, fine100)
		checkFuzzResult(t, r, err)
	})
}

func FuzzImageTar(f *testing.F) {
	red := pngBytes(f, solidImage(4, 3, color.NRGBA{255, 0, 0, 255}))
	blue := jpegBytes(f, solidImage(2, 2, color.NRGBA{0, 0, 255, 255}))
	f.Add(tarBytes(f, false, "r/a/1.png", red, "r/b/2.jpg", blue))
	f.Add(tarBytes(f, true, "r/a/1.png", red, "r/a/", []byte{}))
	f.Add(tarBytes(f, false, "r/a/1.jpg", blue[:len(blue)/2]))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := sha256.Sum256(data)
		b := &blob{path: "fuzz.tar", file: data, gzipped: isGzip(data), sha: hex.EncodeToString(s[:])}
		sets, err := decodeImageTar(b, []string{"r"}, ImageOptions{Size: 4, Workers: 1})
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error is %T, not *FormatError: %v", err, err)
			}
			return
		}
		checkFuzzResult(t, sets[0].Raw, nil)
		if len(sets[0].Files) != sets[0].Raw.N {
			t.Fatal("files and images disagree")
		}
	})
}
