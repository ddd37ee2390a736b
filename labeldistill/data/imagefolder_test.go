package data

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// rgbAt returns the (R, G, B) of pixel (x, y) of image i of a 3×s×s RawSet.
func rgbAt(r *RawSet, i, x, y int) [3]int {
	s := r.H
	base := i * 3 * s * s
	k := y*s + x
	return [3]int{int(r.Pixels[base+k]), int(r.Pixels[base+s*s+k]), int(r.Pixels[base+2*s*s+k])}
}

func near(a, b [3]int, tol int) bool {
	for i := range a {
		if d := a[i] - b[i]; d > tol || d < -tol {
			return false
		}
	}
	return true
}

func makeTree(t *testing.T, root string) {
	writeFile(t, root, "cat/b.jpg", jpegBytes(t, solidImage(32, 32, color.NRGBA{0, 200, 0, 255})))
	writeFile(t, root, "cat/a.png", pngBytes(t, solidImage(32, 32, color.NRGBA{255, 0, 0, 255})))
	writeFile(t, root, "dog/x.PNG", pngBytes(t, solidImage(64, 48, color.NRGBA{0, 0, 255, 255})))
	grey := image.NewGray(image.Rect(0, 0, 32, 32))
	for i := range grey.Pix {
		grey.Pix[i] = 77
	}
	writeFile(t, root, "dog/y.png", pngBytes(t, grey))
	writeFile(t, root, "dog/z.png", pngBytes(t, solidImage(32, 32, color.NRGBA{200, 100, 50, 128})))
	writeFile(t, root, "dog/notes.txt", []byte("not an image"))
	writeFile(t, root, ".hidden/q.png", []byte("ignored"))
}

func TestReadImageFolder(t *testing.T) {
	root := t.TempDir()
	makeTree(t, root)
	set, err := ReadImageFolder(root, ImageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := set.Raw
	if !reflect.DeepEqual(set.ClassNames, []string{"cat", "dog"}) || r.N != 5 || r.C != 3 || r.H != 32 || r.Classes != 2 {
		t.Fatalf("got classes %v, %d images", set.ClassNames, r.N)
	}
	if want := []string{"cat/a.png", "cat/b.jpg", "dog/x.PNG", "dog/y.png", "dog/z.png"}; !reflect.DeepEqual(set.Files, want) {
		t.Errorf("files %v, want %v", set.Files, want)
	}
	if want := []int64{0, 0, 1, 1, 1}; !slices.Equal(r.Labels, want) {
		t.Errorf("labels %v", r.Labels)
	}
	checks := []struct {
		i    int
		want [3]int
		tol  int
	}{
		{0, [3]int{255, 0, 0}, 0},
		{1, [3]int{0, 200, 0}, 3},    // JPEG
		{2, [3]int{0, 0, 255}, 0},    // resized 64×48 → 32×32
		{3, [3]int{77, 77, 77}, 0},   // greyscale replicated
		{4, [3]int{200, 100, 50}, 1}, // alpha dropped, colour kept
	}
	for _, c := range checks {
		for _, xy := range [][2]int{{0, 0}, {31, 31}, {13, 7}} {
			if got := rgbAt(r, c.i, xy[0], xy[1]); !near(got, c.want, c.tol) {
				t.Errorf("image %d at %v: %v, want %v", c.i, xy, got, c.want)
			}
		}
	}
	// Explicit class order, worker count independence, other filters.
	set2, err := ReadImageFolder(root, ImageOptions{Classes: []string{"dog", "cat"}, Workers: 1, Filter: "catmullrom"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{0, 0, 0, 1, 1}; !slices.Equal(set2.Raw.Labels, want) || set2.Files[0] != "dog/x.PNG" {
		t.Errorf("explicit classes: labels %v files %v", set2.Raw.Labels, set2.Files)
	}
	set3, _ := ReadImageFolder(root, ImageOptions{Workers: 7})
	if !bytes.Equal(set3.Raw.Pixels, r.Pixels) {
		t.Error("result depends on the worker count")
	}
	// Size option: everything resized to 8×8.
	small, err := ReadImageFolder(root, ImageOptions{Size: 8})
	if err != nil || small.Raw.H != 8 || len(small.Raw.Pixels) != 5*3*64 {
		t.Fatalf("size 8: %v", err)
	}
	if got := rgbAt(small.Raw, 0, 3, 3); got != [3]int{255, 0, 0} {
		t.Errorf("size 8 red: %v", got)
	}
	if _, err := ReadImageFolder(root, ImageOptions{Filter: "lanczos"}); err == nil {
		t.Error("unknown filter accepted")
	}
}

func TestResizeGradient(t *testing.T) {
	root := t.TempDir()
	m := image.NewNRGBA(image.Rect(0, 0, 64, 64))
	for y := 0; y < 64; y++ {
		for x := 0; x < 64; x++ {
			m.SetNRGBA(x, y, color.NRGBA{uint8(x * 4), 0, 0, 255})
		}
	}
	writeFile(t, root, "a/g.png", pngBytes(t, m))
	for _, f := range []string{"bilinear", "catmullrom", "approxbilinear", "nearest"} {
		set, err := ReadImageFolder(root, ImageOptions{Filter: f})
		if err != nil {
			t.Fatal(err)
		}
		prev := -1
		for x := 0; x < 32; x++ {
			v := rgbAt(set.Raw, 0, x, 10)[0]
			if v < prev {
				t.Errorf("%s: not monotone at x=%d", f, x)
			}
			prev = v
		}
		if mid := rgbAt(set.Raw, 0, 16, 0)[0]; mid < 120 || mid > 140 {
			t.Errorf("%s: middle value %d, want about 130", f, mid)
		}
	}
}

func TestImageFolderBadInput(t *testing.T) {
	red := pngBytes(t, solidImage(32, 32, color.NRGBA{255, 0, 0, 255}))
	// empty class folder
	root := t.TempDir()
	writeFile(t, root, "a/1.png", red)
	writeFile(t, root, "b/readme.txt", []byte("x"))
	_, err := ReadImageFolder(root, ImageOptions{})
	wantFormatError(t, err, root, `class folder "b" is empty`)
	// class in the list without a folder; folder not in the list
	root = t.TempDir()
	writeFile(t, root, "a/1.png", red)
	_, err = ReadImageFolder(root, ImageOptions{Classes: []string{"a", "zebra"}})
	wantFormatError(t, err, root, `"zebra" is empty or missing`)
	_, err = ReadImageFolder(root, ImageOptions{Classes: []string{"b"}})
	wantFormatError(t, err, root, `folder "a" is not in the class list`)
	_, err = ReadImageFolder(root, ImageOptions{Classes: []string{"a", "a"}})
	wantFormatError(t, err, root, "listed twice")
	// undecodable image, truncated PNG
	writeFile(t, root, "a/2.jpg", []byte("definitely not a jpeg"))
	_, err = ReadImageFolder(root, ImageOptions{})
	wantFormatError(t, err, filepath.Join("a", "2.jpg"), "cannot decode image")
	root = t.TempDir()
	writeFile(t, root, "a/1.png", red[:len(red)/2])
	_, err = ReadImageFolder(root, ImageOptions{})
	wantFormatError(t, err, "a/1.png", "cannot decode image")
	// missing folder
	if _, err := ReadImageFolder(filepath.Join(root, "absent"), ImageOptions{}); err == nil {
		t.Error("missing folder accepted")
	}
}

func TestReadImageTar(t *testing.T) {
	red := pngBytes(t, solidImage(32, 32, color.NRGBA{255, 0, 0, 255}))
	blue := jpegBytes(t, solidImage(40, 40, color.NRGBA{0, 0, 255, 255}))
	entries := []any{
		"root/", []byte{},
		"root/train/", []byte{},
		"root/train/cat/", []byte{},
		"root/train/cat/2.png", red,
		"./root/train/cat/1.jpg", blue,
		"root/train/dog/0.png", red,
		"root/train/dog/notes.txt", []byte("ignored"),
		"root/test/cat/0.png", blue,
		"root/test/dog/0.png", red,
		"root/test/dog/deeper/x.png", red, // nested: ignored
		"other/a/b.png", []byte("ignored"),
	}
	dir := t.TempDir()
	for _, zip := range []bool{false, true} {
		p := writeFile(t, dir, "tree.tar", tarBytes(t, zip, entries...))
		sets, err := ReadImageTar(p, []string{"root/train", "root/test/"}, ImageOptions{Classes: []string{"dog", "cat"}})
		if err != nil {
			t.Fatal(err)
		}
		tr, te := sets[0], sets[1]
		if want := []string{"dog/0.png", "cat/1.jpg", "cat/2.png"}; !reflect.DeepEqual(tr.Files, want) {
			t.Errorf("train files %v, want %v", tr.Files, want)
		}
		if want := []int64{0, 1, 1}; !slices.Equal(tr.Raw.Labels, want) {
			t.Errorf("train labels %v", tr.Raw.Labels)
		}
		if te.Raw.N != 2 || !slices.Equal(te.Raw.Labels, []int64{0, 1}) {
			t.Errorf("test: %v", te.Raw.Labels)
		}
		if got := rgbAt(tr.Raw, 1, 5, 5); !near(got, [3]int{0, 0, 255}, 3) {
			t.Errorf("resized jpeg: %v", got)
		}
	}
	// Bad archives.
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"truncated.tar.gz", tarBytes(t, true, entries...)[:300], "gzip stream"},
		{"garbage.tar", bytes.Repeat([]byte("x"), 2048), "corrupt tar archive"},
		{"undecodable.tar", tarBytes(t, false, "root/train/a/1.png", []byte("nope"), "root/test/a/1.png", red), "cannot decode image"},
		{"noclasses.tar", tarBytes(t, false, "root/test/a/1.png", red), "no class folders under root/train"},
		{"emptyclass.tar", tarBytes(t, false, "root/train/a/1.png", red, "root/train/b/", []byte{}, "root/test/a/1.png", red), `class folder "b" is empty`},
	}
	for _, c := range cases {
		p := writeFile(t, dir, c.name, c.data)
		_, err := ReadImageTar(p, []string{"root/train", "root/test"}, ImageOptions{})
		wantFormatError(t, err, p, c.want)
	}
}

func TestClassNames(t *testing.T) {
	n, err := parseClassNames("x", []byte("airplane\n automobile \n\nbird\n"))
	if err != nil || !reflect.DeepEqual(n, []string{"airplane", "automobile", "bird"}) {
		t.Errorf("%v %v", n, err)
	}
	if _, err := parseClassNames("x", []byte("a\na\n")); err == nil {
		t.Error("duplicate accepted")
	}
	if _, err := parseClassNames("x", []byte("\n\n")); err == nil {
		t.Error("empty list accepted")
	}
}

// yccToRGB agrees with the exact (rounded) JFIF conversion within 1, and with Go's
// truncating conversion within 1.
func TestYCCToRGB(t *testing.T) {
	for _, c := range [][3]int{{0, 128, 128}, {255, 128, 128}, {81, 90, 240}, {145, 54, 34}, {41, 240, 110}, {16, 0, 255}, {235, 255, 0}} {
		r, g, b := yccToRGB(uint8(c[0]), uint8(c[1]), uint8(c[2]))
		y, cb, cr := float64(c[0]), float64(c[1])-128, float64(c[2])-128
		exact := [3]int{round255(y + 1.402*cr), round255(y - 0.344136*cb - 0.714136*cr), round255(y + 1.772*cb)}
		if !near([3]int{int(r), int(g), int(b)}, exact, 1) {
			t.Errorf("%v: %d %d %d, want %v", c, r, g, b, exact)
		}
		gr, gg, gb := color.YCbCrToRGB(uint8(c[0]), uint8(c[1]), uint8(c[2]))
		if !near([3]int{int(r), int(g), int(b)}, [3]int{int(gr), int(gg), int(gb)}, 1) {
			t.Errorf("%v: far from Go's conversion", c)
		}
	}
}

func round255(v float64) int {
	v = math.Round(v)
	return int(math.Max(0, math.Min(255, v)))
}

// A context that is done (a signal) ends the reading of image folders and archives, and a
// dataset's load between its files, with the context's error.
func TestReadingEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	root := t.TempDir()
	makeTree(t, root)
	if _, err := ReadImageFolder(root, ImageOptions{Context: ctx}); !errors.Is(err, context.Canceled) {
		t.Errorf("image folder: %v, want context.Canceled", err)
	}
	red := pngBytes(t, solidImage(32, 32, color.NRGBA{255, 0, 0, 255}))
	p := writeFile(t, t.TempDir(), "tree.tar", tarBytes(t, true, "root/train/cat/0.png", red, "root/train/dog/0.png", red))
	if _, err := ReadImageTar(p, []string{"root/train"}, ImageOptions{Context: ctx}); !errors.Is(err, context.Canceled) {
		t.Errorf("image archive: %v, want context.Canceled", err)
	}
	if _, err := ReadImageTar(p, []string{"root/train"}, ImageOptions{Context: context.Background()}); err != nil {
		t.Errorf("image archive, context not done: %v", err)
	}
	data := t.TempDir()
	writeMNISTLike(t, filepath.Join(data, "mnist"), 120, 30, 10, 0, true)
	if _, err := Load("mnist", Options{DataDir: data, AllowUnknown: true, Context: ctx}); !errors.Is(err, context.Canceled) {
		t.Errorf("mnist: %v, want context.Canceled", err)
	}
	if _, err := Load("mnist", Options{DataDir: data, AllowUnknown: true, Context: context.Background()}); err != nil {
		t.Errorf("mnist, context not done: %v", err)
	}
}
