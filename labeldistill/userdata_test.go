package labeldistill

// userdata_test.go: data the registry does not know, accepted on request, with its
// checksums and the registry's warnings recorded.

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	cfg := DefaultConfig()
	cfg.DataDir = dir
	cfg, err := cfg.Resolved()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadDataset(cfg); err == nil || !strings.Contains(err.Error(), "unknown sha256 "+sum) ||
		!strings.Contains(err.Error(), "--allow-unknown-data") || strings.Contains(err.Error(), "set AllowUnknown") {
		t.Fatalf("unknown file without --allow-unknown-data: got %v", err)
	}
	cfg.AllowUnknownData = true
	ds, err := LoadDataset(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := ds.Files["mnist/t10k-labels-idx1-ubyte"]; got != sum {
		t.Errorf("recorded checksum %q, want %s (all: %v)", got, sum, ds.Files)
	}
	if len(ds.Warnings) != 1 || !strings.Contains(ds.Warnings[0], sum) || !strings.Contains(ds.Warnings[0], "accepted: --allow-unknown-data") {
		t.Errorf("warnings %q, want one naming %s as accepted", ds.Warnings, sum)
	}
}

func TestSubsetWarningRecorded(t *testing.T) {
	ds := loadForTest(t, func(c *Config) { c.Source = "kmnist"; c.BaseExamples = 10 })
	if !strings.Contains(strings.Join(ds.Warnings, "\n"), "7011") {
		t.Errorf("kmnist subset: warnings %q do not mention the subset", ds.Warnings)
	}
}
