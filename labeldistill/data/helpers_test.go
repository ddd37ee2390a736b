package data

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// idxBytes builds an IDX file of unsigned bytes.
func idxBytes(dims []int, data []byte) []byte {
	b := []byte{0, 0, 8, byte(len(dims))}
	for _, d := range dims {
		b = binary.BigEndian.AppendUint32(b, uint32(d))
	}
	return append(b, data...)
}

// gz compresses b.
func gz(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// tinyImages returns n h×w images whose pixel k of image i is (i*7 + k) mod 256, and
// labels i mod classes (+offset).
func tinyImages(n, h, w, classes, offset int) (pixels, labels []byte) {
	pixels = make([]byte, n*h*w)
	for i := 0; i < n; i++ {
		for k := 0; k < h*w; k++ {
			pixels[i*h*w+k] = byte(i*7 + k)
		}
	}
	labels = make([]byte, n)
	for i := range labels {
		labels[i] = byte(i%classes + offset)
	}
	return
}

// writeFile writes b to dir/name and returns the path.
func writeFile(t testing.TB, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeMNISTLike writes the four IDX files (gzipped when zip) of a tiny 28×28 dataset.
func writeMNISTLike(t testing.TB, dir string, nTrain, nTest, classes, offset int, zip bool) {
	t.Helper()
	for _, s := range []struct {
		prefix string
		n      int
	}{{"train", nTrain}, {"t10k", nTest}} {
		px, lb := tinyImages(s.n, 28, 28, classes, offset)
		img, lbl := idxBytes([]int{s.n, 28, 28}, px), idxBytes([]int{s.n}, lb)
		suffix := ""
		if zip {
			img, lbl, suffix = gz(img), gz(lbl), ".gz"
		}
		writeFile(t, dir, s.prefix+"-images-idx3-ubyte"+suffix, img)
		writeFile(t, dir, s.prefix+"-labels-idx1-ubyte"+suffix, lbl)
	}
}

// cifarBytes builds n CIFAR records; fine100 adds the coarse byte.
func cifarBytes(n int, fine100 bool, label func(i int) (coarse, fine byte)) []byte {
	var b []byte
	for i := 0; i < n; i++ {
		c, f := label(i)
		if fine100 {
			b = append(b, c)
		}
		b = append(b, f)
		for k := 0; k < cifarPixels; k++ {
			b = append(b, byte(i+k/1024*50))
		}
	}
	return b
}

// solidImage returns a w×h image of one colour.
func solidImage(w, h int, c color.NRGBA) *image.NRGBA {
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			m.SetNRGBA(x, y, c)
		}
	}
	return m
}

func pngBytes(t testing.TB, m image.Image) []byte {
	var b bytes.Buffer
	if err := png.Encode(&b, m); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func jpegBytes(t testing.TB, m image.Image) []byte {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, m, &jpeg.Options{Quality: 100}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// tarBytes builds a tar (gzipped when zip) of name → content; names ending in "/"
// become directories.
func tarBytes(t testing.TB, zip bool, entries ...any) []byte {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i := 0; i < len(entries); i += 2 {
		name, data := entries[i].(string), entries[i+1].([]byte)
		h := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}
		if strings.HasSuffix(name, "/") {
			h = &tar.Header{Name: name, Mode: 0o755, Typeflag: tar.TypeDir}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		tw.Write(data)
	}
	tw.Close()
	if zip {
		return gz(buf.Bytes())
	}
	return buf.Bytes()
}

// wantFormatError checks that err is a *FormatError naming file and mentioning want.
func wantFormatError(t testing.TB, err error, file, want string) {
	t.Helper()
	var fe *FormatError
	if !errors.As(err, &fe) {
		t.Errorf("got %v (%T), want *FormatError containing %q", err, err, want)
		return
	}
	if !strings.Contains(fe.File, file) || !strings.Contains(err.Error(), want) {
		t.Errorf("got %q (file %q), want file %q and %q", err, fe.File, file, want)
	}
}
