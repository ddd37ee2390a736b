package engine

// userdata_test.go: data the registry does not know, accepted on request, with its
// checksums and the registry's warnings recorded.

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"image"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/labeldistill/internal/testkit"
)

// changedMNIST is a data folder whose MNIST test labels differ from the registry's file in
// one label (written uncompressed), the other files linked from the shared copy.
func changedMNIST(t *testing.T) (dir, sum string) {
	shared, _ := filepath.Abs(filepath.Join(sharedDataDir(t), "mnist"))
	dir = t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "mnist"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz"} {
		if err := os.Symlink(filepath.Join(shared, f), filepath.Join(dir, "mnist", f)); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(filepath.Join(shared, "t10k-labels-idx1-ubyte.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	labels, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	labels[8] = (labels[8] + 1) % 10 // the first label
	if err := os.WriteFile(filepath.Join(dir, "mnist", "t10k-labels-idx1-ubyte"), labels, 0o644); err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(labels)
	return dir, hex.EncodeToString(h[:])
}

func TestAllowUnknownData(t *testing.T) {
	dir, sum := changedMNIST(t)
	cfg := config.Default()
	cfg.DataDir = dir
	cfg, err := cfg.Resolved()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadData(cfg); err == nil || !strings.Contains(err.Error(), "unknown sha256 "+sum) ||
		!strings.Contains(err.Error(), "to accept it: allow_unknown_data") || strings.Contains(err.Error(), "Options.AllowUnknown") {
		t.Fatalf("unknown file without --allow-unknown-data: got %v", err)
	}
	cfg.AllowUnknownData = true
	ds, err := LoadData(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := ds.Files["mnist/t10k-labels-idx1-ubyte"]; got != sum {
		t.Errorf("recorded checksum %q, want %s (all: %v)", got, sum, ds.Files)
	}
	if len(ds.Warnings) != 1 || !strings.Contains(ds.Warnings[0], sum) || !strings.Contains(ds.Warnings[0], "accepted: allow_unknown_data") {
		t.Errorf("warnings %q, want one naming %s as accepted", ds.Warnings, sum)
	}
}

func TestSubsetWarningRecorded(t *testing.T) {
	ds := loadForTest(t, func(c *config.Config) { c.Source = "kmnist"; c.BaseExamples = 10 })
	if !strings.Contains(strings.Join(ds.Warnings, "\n"), "7011") {
		t.Errorf("kmnist subset: warnings %q do not mention the subset", ds.Warnings)
	}
}

// mnistFolder writes perClassTrain + perClassTest MNIST digits per class as PNGs in the
// ImageFolder layout (train/<digit>/, test/<digit>/); the test images are JPEG-free PNGs of
// another size (56×56) so that resizing is exercised.
func mnistFolder(t *testing.T, perClassTrain, perClassTest int) string {
	train, test := testkit.SharedMNIST(t)
	root := t.TempDir()
	for _, part := range []struct {
		name  string
		set   *data.RawSet
		per   int
		scale int
	}{{"train", train, perClassTrain, 1}, {"test", test, perClassTest, 2}} {
		count := map[int64]int{}
		for i := 0; i < part.set.N; i++ {
			y := part.set.Labels[i]
			if count[y] >= part.per {
				continue
			}
			count[y]++
			s := 28 * part.scale
			img := image.NewGray(image.Rect(0, 0, s, s))
			for py := 0; py < s; py++ {
				for px := 0; px < s; px++ {
					img.Pix[py*s+px] = part.set.Pixels[i*784+(py/part.scale)*28+px/part.scale]
				}
			}
			dir := filepath.Join(root, part.name, "digit-"+strconv.Itoa(int(y)))
			os.MkdirAll(dir, 0o755)
			f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%05d.png", i)))
			if err != nil {
				t.Fatal(err)
			}
			if err := png.Encode(f, img); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
	}
	return root
}

func TestImageFolderDistils(t *testing.T) {
	root := mnistFolder(t, 30, 10)
	cfg := config.Default()
	cfg.Dataset = "imagefolder:" + root
	cfg.Method, cfg.BaseExamples, cfg.Epochs, cfg.EvalModels, cfg.OuterBatch = config.MethodRR, 10, 30, 2, 50
	cfg.Baselines, cfg.BaselineSteps, cfg.BaselineMaxSteps, cfg.Threads = []string{config.BaselineTrue}, []int{5, 10}, 10, 1
	r, err := cfg.Resolved()
	if err != nil {
		t.Fatal(err)
	}
	if r.NumClasses() != 10 || r.Arch != config.ArchLeNet || r.ValidationSize != 50 || r.NormMean != nil {
		t.Fatalf("resolved: %d classes, arch %s, validation %d, norm %v", r.NumClasses(), r.Arch, r.ValidationSize, r.NormMean)
	}
	res, err := testDistill(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.BaseShape != [4]int64{10, 1, 28, 28} || len(res.TestAccuracies) != 2 {
		t.Fatalf("base shape %v, %d test accuracies", res.BaseShape, len(res.TestAccuracies))
	}
	// The normalisation was computed from the 300 train PNGs: MNIST's statistics, roughly.
	m, s := res.Config.NormMean, res.Config.NormStd
	if len(m) != 1 || math.Abs(m[0]-0.13) > 0.02 || math.Abs(s[0]-0.31) > 0.02 {
		t.Errorf("computed normalisation %v / %v, want about 0.13 / 0.31", m, s)
	}
	if res.TestMean < 20 { // 150 meta-steps on 250 images: well above chance (10 %)
		t.Errorf("test accuracy %.2f%%: not above chance", res.TestMean)
	}
	for _, part := range []string{"train", "test"} {
		if sum := res.DataSHA256[cfg.Dataset+"/"+part]; len(sum) != 64 {
			t.Errorf("no tree checksum for %s: %v", part, res.DataSHA256)
		}
	}
	// The run records the normalisation it computed (report.json takes it from there).
	if !slices.Equal(res.Config.NormMean, m) || !slices.Equal(res.Config.NormStd, s) {
		t.Errorf("recorded normalisation %v / %v, computed %v / %v", res.Config.NormMean, res.Config.NormStd, m, s)
	}
	// Given normalisation is used as given.
	cfg.NormMean, cfg.NormStd = []float64{0.5}, []float64{0.5}
	r, _ = cfg.Resolved()
	ds, err := LoadData(r)
	if err != nil {
		t.Fatal(err)
	}
	if ds.NormMean[0] != 0.5 || ds.Test.Images[0] != -1 { // a black corner pixel: (0 − 0.5)/0.5
		t.Errorf("given normalisation: %v, first test value %v", ds.NormMean, ds.Test.Images[0])
	}
	// A folder without test/ is refused naming what is missing.
	bad := config.Default()
	bad.Dataset = "imagefolder:" + filepath.Join(root, "train")
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "needs train/<class>/<image>") {
		t.Errorf("bad folder: %v", err)
	}
}
