package data

// Image folders with symbolic links, link loops, pipes and devices; images with alpha and
// 16-bit channels; data files that never end or are too large.

import (
	"archive/tar"
	"bytes"
	"errors"
	"image"
	"image/color"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// Links to class folders and to images are read like the folders and images themselves,
// and counted in the folder's checksum.
func TestImageFolderFollowsLinks(t *testing.T) {
	elsewhere := t.TempDir()
	writeFile(t, elsewhere, "dogs/d1.png", pngBytes(t, solidImage(32, 32, color.NRGBA{0, 0, 250, 255})))
	writeFile(t, elsewhere, "dogs/d2.png", pngBytes(t, solidImage(32, 32, color.NRGBA{0, 0, 240, 255})))
	writeFile(t, elsewhere, "red.png", pngBytes(t, solidImage(32, 32, color.NRGBA{250, 0, 0, 255})))

	root := t.TempDir()
	for _, part := range []string{"train", "test"} {
		writeFile(t, root, part+"/cat/a.png", pngBytes(t, solidImage(32, 32, color.NRGBA{0, 250, 0, 255})))
		symlink(t, filepath.Join(elsewhere, "red.png"), filepath.Join(root, part, "cat", "b.png")) // absolute link
		symlink(t, "a.png", filepath.Join(root, part, "cat", "c.png"))                             // relative link
		symlink(t, filepath.Join(elsewhere, "dogs"), filepath.Join(root, part, "dog"))             // class folder
	}
	set, err := ReadImageFolder(filepath.Join(root, "train"), ImageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"cat/a.png", "cat/b.png", "cat/c.png", "dog/d1.png", "dog/d2.png"}; !reflect.DeepEqual(set.Files, want) {
		t.Fatalf("files %v, want %v", set.Files, want)
	}
	for i, want := range [][3]int{{0, 250, 0}, {250, 0, 0}, {0, 250, 0}, {0, 0, 250}, {0, 0, 240}} {
		if got := rgbAt(set.Raw, i, 5, 5); got != want {
			t.Errorf("%s: %v, want %v", set.Files[i], got, want)
		}
	}
	info, err := InspectImageFolder(root)
	if err != nil {
		t.Fatal(err)
	}
	if info.TrainCount != 5 || info.TestCount != 5 || !reflect.DeepEqual(info.ClassNames, []string{"cat", "dog"}) {
		t.Errorf("inspected: %+v", info)
	}
	sum := func() string {
		s, err := TreeSHA256(filepath.Join(root, "train"), func(p string) (string, error) {
			b, err := os.ReadFile(p)
			return sha(b), err
		})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := sum()
	writeFile(t, elsewhere, "dogs/d2.png", pngBytes(t, solidImage(32, 32, color.NRGBA{0, 0, 230, 255})))
	if sum() == before {
		t.Error("the checksum ignores an image reached through a linked class folder")
	}
	before = sum()
	writeFile(t, elsewhere, "red.png", pngBytes(t, solidImage(32, 32, color.NRGBA{230, 0, 0, 255})))
	if sum() == before {
		t.Error("the checksum ignores a linked image")
	}
}

// Links to nothing, link loops, and image names that are pipes or devices are errors
// naming them, never skipped.
func TestImageFolderBadLinks(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, cls string) string // returns the path the error must name
		want  string
	}{
		{"image link to nothing", func(t *testing.T, cls string) string {
			p := filepath.Join(cls, "gone.png")
			symlink(t, "nowhere.png", p)
			return p
		}, "is a symbolic link to nothing (nowhere.png does not exist)"},
		{"image link loop", func(t *testing.T, cls string) string {
			p := filepath.Join(cls, "self.png")
			symlink(t, "self.png", p)
			return p
		}, "is a symbolic link loop"},
		{"class folder link loop", func(t *testing.T, cls string) string {
			p := filepath.Join(filepath.Dir(cls), "loop")
			symlink(t, "loop2", p)
			symlink(t, "loop", filepath.Join(filepath.Dir(cls), "loop2"))
			return filepath.Join(filepath.Dir(cls), "loop")
		}, "is a symbolic link loop"},
		{"named pipe", func(t *testing.T, cls string) string {
			p := filepath.Join(cls, "pipe.png")
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Skipf("no named pipes: %v", err)
			}
			return p
		}, "is not a regular file (a named pipe)"},
		{"link to a device", func(t *testing.T, cls string) string {
			p := filepath.Join(cls, "zero.png")
			symlink(t, "/dev/zero", p)
			return p
		}, "is not a regular file (a device)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			for _, part := range []string{"train", "test"} {
				writeFile(t, root, part+"/a/1.png", pngBytes(t, solidImage(8, 8, color.NRGBA{1, 2, 3, 255})))
				writeFile(t, root, part+"/b/1.png", pngBytes(t, solidImage(8, 8, color.NRGBA{1, 2, 3, 255})))
			}
			named := c.setup(t, filepath.Join(root, "train", "a"))
			start := time.Now()
			_, err := ReadImageFolder(filepath.Join(root, "train"), ImageOptions{})
			wantFormatError(t, err, named, c.want)
			_, err = InspectImageFolder(root)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("InspectImageFolder: %v, want %q", err, c.want)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("took %v", took)
			}
		})
	}
	// A class folder linked to the folder above it: the checksum's walk names the loop;
	// the readers find no image in it and say so.
	root := t.TempDir()
	writeFile(t, root, "train/a/1.png", pngBytes(t, solidImage(8, 8, color.NRGBA{1, 2, 3, 255})))
	symlink(t, "..", filepath.Join(root, "train", "up"))
	_, err := TreeSHA256(filepath.Join(root, "train"), func(string) (string, error) { return "x", nil })
	wantFormatError(t, err, filepath.Join(root, "train", "up"), "symbolic link loop (it leads back to a folder it is in)")
	_, err = ReadImageFolder(filepath.Join(root, "train"), ImageOptions{})
	wantFormatError(t, err, filepath.Join(root, "train"), `class folder "up" is empty`)
}

// An image archive's links are refused, not skipped.
func TestImageTarLinkRefused(t *testing.T) {
	dir := t.TempDir()
	img := pngBytes(t, solidImage(8, 8, color.NRGBA{1, 2, 3, 255}))
	b := tarWithLink(t, "set/a/1.png", img, "set/a/2.png", "1.png")
	p := writeFile(t, dir, "x.tar", b)
	_, err := ReadImageTar(p, []string{"set"}, ImageOptions{})
	wantFormatError(t, err, "x.tar:set/a/2.png", "is a link to 1.png; links inside image archives are not followed")
}

// An image with transparency resized reads like the same image unresized: alpha dropped,
// colour kept (it was blended towards black where transparent). 16-bit channels give
// their high byte, resized or not; a 16-bit grey folder is read as grey.
func TestImageAlphaAnd16Bit(t *testing.T) {
	half := image.NewNRGBA(image.Rect(0, 0, 64, 64)) // red, transparent on the left
	for y := 0; y < 64; y++ {
		for x := 0; x < 64; x++ {
			a := uint8(255)
			if x < 32 {
				a = 0
			}
			if x >= 16 && x < 24 {
				a = 100
			}
			half.SetNRGBA(x, y, color.NRGBA{200, 30, 10, a})
		}
	}
	deep := image.NewNRGBA64(image.Rect(0, 0, 64, 64)) // 16-bit, half transparent
	for y := 0; y < 64; y++ {
		for x := 0; x < 64; x++ {
			deep.SetNRGBA64(x, y, color.NRGBA64{0x12ff, 0xab00, 0xfe80, uint16(0xffff * (x & 1))})
		}
	}
	opaqueDeep := image.NewRGBA64(image.Rect(0, 0, 32, 32))
	for i := 0; i < len(opaqueDeep.Pix); i += 8 {
		copy(opaqueDeep.Pix[i:], []byte{0x12, 0xff, 0xab, 0x00, 0xfe, 0x80, 0xff, 0xff})
	}
	grey16 := image.NewGray16(image.Rect(0, 0, 40, 40))
	for i := 0; i < len(grey16.Pix); i += 2 {
		grey16.Pix[i], grey16.Pix[i+1] = 0x80, 0xff
	}
	root := t.TempDir()
	writeFile(t, root, "a/half.png", pngBytes(t, half))
	writeFile(t, root, "a/deep.png", pngBytes(t, deep))
	writeFile(t, root, "b/deep32.png", pngBytes(t, opaqueDeep))
	writeFile(t, root, "b/grey16.png", pngBytes(t, grey16))
	set, err := ReadImageFolder(root, ImageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][3]int{"a/half.png": {200, 30, 10}, "a/deep.png": {0x12, 0xab, 0xfe}, "b/deep32.png": {0x12, 0xab, 0xfe}, "b/grey16.png": {0x80, 0x80, 0x80}}
	for i, f := range set.Files {
		for _, xy := range [][2]int{{0, 0}, {9, 3}, {15, 31}, {16, 16}, {31, 31}} {
			if got := rgbAt(set.Raw, i, xy[0], xy[1]); !near(got, want[f], 1) {
				t.Errorf("%s at %v: %v, want %v", f, xy, got, want[f])
			}
		}
	}
	// a folder whose first image is 16-bit grey is read as one channel
	gr := t.TempDir()
	for _, part := range []string{"train", "test"} {
		for _, cls := range []string{"a", "b"} {
			writeFile(t, gr, part+"/"+cls+"/g.png", pngBytes(t, grey16))
		}
	}
	info, err := InspectImageFolder(gr)
	if err != nil || info.Colour {
		t.Fatalf("16-bit grey folder: %+v, %v", info, err)
	}
	raw, err := LoadImageFolder(gr, nil, nil)
	if err != nil || raw.Train.C != 1 || raw.Train.Pixels[0] != 0x80 {
		t.Errorf("16-bit grey folder loaded as C=%d, first pixel %d (%v), want 1 and 128", raw.Train.C, raw.Train.Pixels[0], err)
	}
}

// An image folder's path is stored absolute, whatever the working folder.
func TestImageFolderPathAbsolute(t *testing.T) {
	parent := t.TempDir()
	for _, part := range []string{"train", "test"} {
		for _, cls := range []string{"a", "b"} {
			writeFile(t, parent, "set/"+part+"/"+cls+"/1.png", pngBytes(t, solidImage(8, 8, color.NRGBA{9, 9, 9, 255})))
		}
	}
	t.Chdir(parent)
	abs := filepath.Join(parent, "set")
	if name, err := AbsImageFolderName("imagefolder:set"); err != nil || name != "imagefolder:"+abs {
		t.Errorf("AbsImageFolderName: %q, %v", name, err)
	}
	if name, _ := AbsImageFolderName("mnist"); name != "mnist" {
		t.Errorf("AbsImageFolderName(mnist) = %q", name)
	}
	info, err := InspectImageFolder("set")
	if err != nil || info.Path != abs {
		t.Fatalf("InspectImageFolder(set): %+v, %v", info, err)
	}
	raw, err := LoadImageFolder("./set", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if raw.Spec.Name != "imagefolder:"+abs || raw.Dir != abs || raw.Files[0] != filepath.Join(abs, "train") {
		t.Errorf("loaded as %q from %q (%v)", raw.Spec.Name, raw.Dir, raw.Files)
	}
}

// Data files that are pipes, devices, too large, or endless end in errors naming the
// file and the bound, at once.
func TestDataFilesBounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "train-images-idx3-ubyte")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no named pipes: %v", err)
	}
	start := time.Now()
	_, err := readFileHashed(fifo) // nothing writes to it: opening it would wait forever
	wantFormatError(t, err, fifo, "is not a regular file (a named pipe)")
	zero := filepath.Join(dir, "zero")
	symlink(t, "/dev/zero", zero)
	_, err = readFileHashed(zero)
	wantFormatError(t, err, zero, "is not a regular file (a device)")
	huge := filepath.Join(dir, "huge")
	if err := os.WriteFile(huge, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, maxDataFileBytes+1); err != nil { // sparse: takes no space
		t.Fatal(err)
	}
	_, err = readFileHashed(huge)
	wantFormatError(t, err, huge, "larger than the 1 GiB limit for data files")
	_, err = readImageFile("/dev/zero")
	wantFormatError(t, err, "/dev/zero", "more than the 64 MiB limit for image files")
	_, err = ReadClassNames("/dev/zero")
	wantFormatError(t, err, "/dev/zero", "more than the 1 MiB limit for class-name lists")
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %v", took)
	}
	var fe *FormatError
	if !errors.As(err, &fe) {
		t.Fatal("not a FormatError")
	}
}

// tarWithLink is an uncompressed tar holding name (a file of content) and link, a
// symbolic link to target.
func tarWithLink(t *testing.T, name string, content []byte, link, target string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	tw.Write(content)
	if err := tw.WriteHeader(&tar.Header{Name: link, Linkname: target, Mode: 0o777, Typeflag: tar.TypeSymlink}); err != nil {
		t.Fatal(err)
	}
	tw.Close()
	return buf.Bytes()
}
