package data

import (
	"path/filepath"
	"testing"
)

// BenchmarkLoadMNIST loads all of MNIST (70000 images: read, sha256, gunzip, split,
// normalise to float32) from ../shared/datasets/mnist. Single-core figure:
// go test -run '^$' -bench LoadMNIST -cpu 1 ./labeldistill/data/
func BenchmarkLoadMNIST(b *testing.B) {
	dir := filepath.Join(sharedDatasets(b), "mnist")
	b.ReportAllocs()
	for b.Loop() {
		ds, err := Load("mnist", Options{Dir: dir, Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		if ds.TargetSet.N+ds.Validation.N+ds.Test.N != 70000 {
			b.Fatal("wrong size")
		}
	}
}
