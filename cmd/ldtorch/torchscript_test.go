package main

// torchscript_test.go: an artifact learnt through a TorchScript file, seen from the command
// line after the file has changed.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEvaluateChangedTorchScriptFile: evaluate refuses the run's own TorchScript network
// once its file holds another module (exit 2, --arch named, both digests); named with
// --arch it evaluates the file as it is, without setting the run's own test accuracy beside
// a result on another network.
func TestEvaluateChangedTorchScriptFile(t *testing.T) {
	shared := sharedDatasets(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "net.pt")
	copyFile := func(name string) {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "torchscript", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copyFile("lenet.pt")
	out := filepath.Join(dir, "run")
	arch := "torchscript:" + file
	r := ldtorch(t, nil, "distill", "--data-dir", shared, "--dataset", "mnist", "--method", "rr", "--arch", arch,
		"--base", "10", "--outer-batch", "256", "--target-set-size", "2000", "--epochs", "1", "--eval-models", "1",
		"--baselines", "none", "--quiet", "--out", out)
	if r.code != 0 {
		t.Fatalf("distill: exit %d\n%s", r.code, r.stderr)
	}
	eval := []string{"evaluate", "--distilled", out, "--models", "1", "--data-dir", shared}
	if r = ldtorch(t, nil, eval...); r.code != 0 || !strings.Contains(r.stdout, "the distill run's own test models") {
		t.Fatalf("evaluate on the unchanged file: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	copyFile("nodouble_mnist.pt")
	r = ldtorch(t, nil, eval...)
	if r.code != 2 || !strings.Contains(r.stderr, "--arch: "+arch+" has changed since the run") {
		t.Fatalf("evaluate on the changed file: exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	r = ldtorch(t, nil, append(eval, "--arch", arch)...)
	if r.code != 0 || !strings.Contains(r.stdout, "test accuracy") || strings.Contains(r.stdout, "the distill run's own") {
		t.Fatalf("evaluate on the changed file named by --arch: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}
