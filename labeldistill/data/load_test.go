package data

import (
	"errors"
	"image/color"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestDataDir(t *testing.T) {
	t.Setenv("LDTORCH_DATA", "/env/data")
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	t.Setenv("HOME", "/home/u")
	if d, _ := DataDir("/explicit"); d != "/explicit" {
		t.Error(d)
	}
	if d, _ := DataDir(""); d != "/env/data" {
		t.Error(d)
	}
	t.Setenv("LDTORCH_DATA", "")
	if d, _ := DataDir(""); d != "/xdg/ldtorch/data" {
		t.Error(d)
	}
	t.Setenv("XDG_CACHE_HOME", "")
	if d, _ := DataDir(""); d != "/home/u/.cache/ldtorch/data" {
		t.Error(d)
	}
}

func hasWarning(ds []string, s string) bool {
	for _, w := range ds {
		if strings.Contains(w, s) {
			return true
		}
	}
	return false
}

func TestLoadGeneratedMNIST(t *testing.T) {
	root := t.TempDir()
	writeMNISTLike(t, filepath.Join(root, "mnist"), 120, 30, 10, 0, true)
	// Unknown checksums are an error...
	_, err := Load("mnist", Options{DataDir: root})
	var ce *ChecksumError
	if !errors.As(err, &ce) || !strings.Contains(ce.File, "train-images-idx3-ubyte.gz") || ce.Content == "" {
		t.Fatalf("got %v, want a ChecksumError", err)
	}
	// ...unless the caller opts in; then they are warnings.
	ds, err := Load("mnist", Options{DataDir: root, AllowUnknown: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if ds.TargetSet.N != 100 || ds.Validation.N != 20 || ds.Test.N != 30 || ds.Layout != "official" || len(ds.Files) != 4 {
		t.Errorf("sizes %d/%d/%d layout %s files %v", ds.TargetSet.N, ds.Validation.N, ds.Test.N, ds.Layout, ds.Files)
	}
	for _, w := range []string{"unknown sha256", "train set has 120 images, the official layout has 60000", "keeping the validation fraction"} {
		if !hasWarning(ds.Warnings, w) {
			t.Errorf("no warning %q in %q", w, ds.Warnings)
		}
	}
	// The same files uncompressed, found under the raw names, give the same data.
	raw := filepath.Join(root, "raw")
	writeMNISTLike(t, raw, 120, 30, 10, 0, false)
	ds2, err := Load("mnist", Options{Dir: raw, AllowUnknown: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ds.TargetSet.Images, ds2.TargetSet.Images) || !slices.Equal(ds.Validation.Labels, ds2.Validation.Labels) {
		t.Error("raw and gz differ")
	}
	// Missing files.
	_, err = Load("mnist", Options{DataDir: t.TempDir()})
	var me *MissingError
	if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &me) || !strings.Contains(err.Error(), "train-images-idx3-ubyte") || !strings.Contains(err.Error(), "Fetch") {
		t.Errorf("missing: %v", err)
	}
	if _, err := Load("nope", Options{}); err == nil {
		t.Error("unknown dataset")
	}
}

func TestLoadWrongImageSize(t *testing.T) {
	dir := t.TempDir()
	px, lb := tinyImages(6, 32, 32, 10, 0)
	for _, p := range []string{"train", "t10k"} {
		writeFile(t, dir, p+"-images-idx3-ubyte", idxBytes([]int{6, 32, 32}, px))
		writeFile(t, dir, p+"-labels-idx1-ubyte", idxBytes([]int{6}, lb))
	}
	_, err := Load("mnist", Options{Dir: dir, AllowUnknown: true})
	wantFormatError(t, err, "train-images-idx3-ubyte", "images are 32x32, want 28x28")
}

func TestLoadEMNISTAndK49(t *testing.T) {
	dir := t.TempDir()
	px, lb := tinyImages(60, 28, 28, 26, 1)
	for _, p := range []string{"train", "test"} {
		writeFile(t, dir, "emnist-letters-"+p+"-images-idx3-ubyte.gz", gz(idxBytes([]int{60, 28, 28}, px)))
		writeFile(t, dir, "emnist-letters-"+p+"-labels-idx1-ubyte.gz", gz(idxBytes([]int{60}, lb)))
	}
	ds, err := Load("emnist-letters", Options{Dir: dir, AllowUnknown: true})
	if err != nil {
		t.Fatal(err)
	}
	if ds.Spec.Classes != 26 || ds.TargetSet.N+ds.Validation.N != 60 || ds.Test.Labels[25] != 25 {
		t.Errorf("emnist: %d %d", ds.TargetSet.N, ds.Test.Labels[25])
	}
	dsT, err := Load("emnist-letters", Options{Dir: dir, AllowUnknown: true, Transpose: true})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := ds.Test.Image(2), dsT.Test.Image(2); a[1*28+5] != b[5*28+1] || a[1*28+5] == a[5*28+1] {
		t.Error("Transpose option not applied")
	}
	kdir := t.TempDir()
	kp, kl := tinyImages(98, 28, 28, 49, 0)
	for _, p := range []string{"train", "test"} {
		writeFile(t, kdir, "k49-"+p+"-imgs.npz", npzBytes(t, arrU8("arr_0", []int{98, 28, 28}, kp)))
		writeFile(t, kdir, "k49-"+p+"-labels.npz", npzBytes(t, arrU8("arr_0", []int{98}, kl)))
	}
	ks, err := Load("k49", Options{Dir: kdir, AllowUnknown: true})
	if err != nil {
		t.Fatal(err)
	}
	if ks.Test.N != 98 || ks.TargetSet.N != 89 || ks.Validation.N != 9 {
		t.Errorf("k49 sizes %d/%d/%d", ks.TargetSet.N, ks.Validation.N, ks.Test.N)
	}
	if _, err := Load("k49", Options{Dir: kdir}); err == nil {
		t.Error("k49 without AllowUnknown (no checksums known) accepted")
	}
}

func TestLoadCIFARLayouts(t *testing.T) {
	dir := t.TempDir()
	for i := 1; i <= 5; i++ {
		writeFile(t, dir, "cifar-10-batches-bin/data_batch_"+string(rune('0'+i))+".bin", cifarBytes(4, false, func(k int) (byte, byte) { return 0, byte((k + i) % 10) }))
	}
	writeFile(t, dir, "cifar-10-batches-bin/test_batch.bin.gz", gz(cifarBytes(3, false, func(k int) (byte, byte) { return 0, byte(k) })))
	ds, err := Load("cifar10", Options{Dir: dir, AllowUnknown: true})
	if err != nil {
		t.Fatal(err)
	}
	if ds.Layout != "binary" || ds.TargetSet.N+ds.Validation.N != 20 || ds.Test.N != 3 || ds.TargetSet.C != 3 {
		t.Errorf("cifar10 binary: %s %d %d", ds.Layout, ds.TargetSet.N, ds.Test.N)
	}
	// Index follows batch order: source 4 is the first record of batch 2 (label (0+2)%10).
	for i, j := range ds.TargetSet.Index {
		if want := int64((j%4 + j/4 + 1) % 10); ds.TargetSet.Labels[i] != want {
			t.Fatalf("source %d label %d, want %d", j, ds.TargetSet.Labels[i], want)
		}
	}
	// CIFAR-10 as a JPEG tar.gz with a class list.
	tdir := t.TempDir()
	var entries []any
	for _, split := range []string{"train", "test"} {
		for ci, c := range cifar10Cls {
			entries = append(entries, "cifar-10-images/"+split+"/"+c+"/0000.jpg",
				jpegBytes(t, solidImage(32, 32, color.NRGBA{uint8(ci * 20), 0, 0, 255})))
		}
	}
	writeFile(t, tdir, "cifar-10-images-jpeg.tar.gz", tarBytes(t, true, entries...))
	writeFile(t, tdir, "batches.meta.txt", []byte(strings.Join(cifar10Cls, "\n")+"\n"))
	ds, err = Load("cifar10", Options{Dir: tdir, AllowUnknown: true})
	if err != nil {
		t.Fatal(err)
	}
	if ds.Layout != "jpeg-tar" || ds.Test.N != 10 || ds.Test.Labels[3] != 3 || !hasWarning(ds.Warnings, "JPEG") {
		t.Errorf("cifar10 jpeg: %s %d %v", ds.Layout, ds.Test.N, ds.Warnings)
	}
	// A class list that disagrees with the folders is an error.
	writeFile(t, tdir, "batches.meta.txt", []byte("a\nb\n"))
	if _, err := Load("cifar10", Options{Dir: tdir, AllowUnknown: true}); err == nil || !strings.Contains(err.Error(), "not in the class list") {
		t.Errorf("bad class list: %v", err)
	}
	// CIFAR-100 subset layout.
	cdir := t.TempDir()
	writeFile(t, cdir, "train-first100perclass.bin.gz", gz(cifarBytes(20, true, func(k int) (byte, byte) { return byte(k % 20), byte(k * 5) })))
	writeFile(t, cdir, "test.bin.gz", gz(cifarBytes(10, true, func(k int) (byte, byte) { return 0, byte(k) })))
	ds, err = Load("cifar100", Options{Dir: cdir, AllowUnknown: true})
	if err != nil {
		t.Fatal(err)
	}
	if ds.Layout != "first100perclass" || ds.TargetSet.N != 18 || ds.Validation.N != 2 || ds.Test.Classes != 100 {
		t.Errorf("cifar100: %s %d %d", ds.Layout, ds.TargetSet.N, ds.Validation.N)
	}
}

func TestLoadCUBFolders(t *testing.T) {
	dir := t.TempDir()
	for _, split := range []string{"train", "test"} {
		for c := 0; c < 200; c++ {
			name := split + "/" + string(rune('A'+c/26)) + string(rune('a'+c%26)) + ".bird/1.png"
			writeFile(t, dir, name, pngBytes(t, solidImage(50, 40, color.NRGBA{uint8(c), 9, 9, 255})))
		}
	}
	_, err := Load("cub", Options{Dir: dir})
	var ce *ChecksumError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "cannot be checksummed") {
		t.Fatalf("cub without AllowUnknown: %v", err)
	}
	ds, err := Load("cub", Options{Dir: dir, AllowUnknown: true})
	if err != nil {
		t.Fatal(err)
	}
	if ds.Test.N != 200 || ds.Test.H != 32 || ds.TargetSet.N+ds.Validation.N != 200 {
		t.Errorf("cub: %d", ds.Test.N)
	}
}

func TestListAndVerify(t *testing.T) {
	root := t.TempDir()
	writeMNISTLike(t, filepath.Join(root, "mnist"), 12, 3, 10, 0, false)
	st, err := List(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s.Present != (s.Name == "mnist") {
			t.Errorf("%s present=%v", s.Name, s.Present)
		}
		if s.Name == "kmnist" && (len(s.Missing) != 4 || s.Missing[0] != "train-images-idx3-ubyte") {
			t.Errorf("kmnist missing %v", s.Missing)
		}
	}
	checks, err := Verify(root, "mnist")
	var ce *ChecksumError
	if !errors.As(err, &ce) || len(checks) != 4 || checks[0].Known || checks[0].SHA256 == "" {
		t.Errorf("verify: %v %+v", err, checks)
	}
	if _, err := Verify(root, "kmnist"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("verify missing: %v", err)
	}
}
