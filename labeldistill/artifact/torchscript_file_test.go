package artifact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
)

// torchscript_file_test.go: an artifact learnt through a TorchScript network records the
// file's SHA-256; evaluate, which trains on the run's network by default, refuses the file
// once it has changed, and trains on the changed file when it is named.

// copyFile copies src to dst and returns the SHA-256 of the bytes.
func copyFile(t *testing.T, src, dst string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func TestEvaluateRefusesChangedTorchScriptFile(t *testing.T) {
	testdata := filepath.Join("..", "..", "testdata", "torchscript")
	file := filepath.Join(t.TempDir(), "net.pt")
	lenet := copyFile(t, filepath.Join(testdata, "lenet.pt"), file)
	arch := config.TorchScriptPrefix + file

	res := smallResult(t, config.MethodLD)
	res.Config.Arch, res.Config.EvalArch = arch, arch
	res.NetworkSHA256 = map[string]string{arch: lenet}
	dir := t.TempDir()
	if err := Write(dir, res); err != nil {
		t.Fatal(err)
	}
	art, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := art.Report.NetworkSHA256[arch]; got != lenet {
		t.Fatalf("report.json records %q for %s, want %s", got, arch, lenet)
	}
	test := &data.Split{N: 8, C: 1, H: 28, W: 28, Classes: 10, Images: make([]float32, 8*784), Labels: make([]int64, 8)}
	ec := EvalConfig{Models: 1, Steps: 2}
	got, err := Evaluate(context.Background(), art, test, ec)
	if err != nil {
		t.Fatalf("the file the run used: %v", err)
	}
	if got.ArchSHA256 != lenet {
		t.Fatalf("evaluation records %q, want %s", got.ArchSHA256, lenet)
	}

	// another module under the same name (MNIST-shaped, meets the contract)
	other := copyFile(t, filepath.Join(testdata, "nodouble_mnist.pt"), file)
	_, err = Evaluate(context.Background(), art, test, ec)
	if err == nil || !strings.Contains(err.Error(), "has changed since the run") ||
		!strings.Contains(err.Error(), lenet) || !strings.Contains(err.Error(), other) {
		t.Fatalf("changed file taken by default: got %v", err)
	}
	ec.Arch = arch // named: the user's choice
	if got, err = Evaluate(context.Background(), art, test, ec); err != nil {
		t.Fatalf("changed file named as the arch: %v", err)
	}
	if got.ArchSHA256 != other {
		t.Fatalf("evaluation of the changed file records %q, want %s", got.ArchSHA256, other)
	}
}
