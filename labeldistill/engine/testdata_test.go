package engine

// testdata_test.go: real MNIST from ../shared/datasets for tests, as a Dataset.

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/data"
)

func sharedMNIST(t testing.TB) (train, test *data.RawSet) {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "shared", "datasets", "mnist")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("shared MNIST not found at %s", dir)
	}
	opt := data.IDXOptions{Classes: 10, H: 28, W: 28}
	var err error
	if train, err = data.ReadIDXPair(filepath.Join(dir, "train-images-idx3-ubyte.gz"), filepath.Join(dir, "train-labels-idx1-ubyte.gz"), opt); err != nil {
		t.Fatal(err)
	}
	if test, err = data.ReadIDXPair(filepath.Join(dir, "t10k-images-idx3-ubyte.gz"), filepath.Join(dir, "t10k-labels-idx1-ubyte.gz"), opt); err != nil {
		t.Fatal(err)
	}
	return train, test
}

func normalise(r *data.RawSet, idx []int) data.Split {
	size := r.ImageSize()
	s := data.Split{Images: make([]float32, len(idx)*size), Labels: make([]int64, len(idx)), N: len(idx), C: 1, H: 28, W: 28, Classes: 10}
	for i, j := range idx {
		for p := 0; p < size; p++ {
			s.Images[i*size+p] = float32((float64(r.Pixels[j*size+p])/255 - 0.1307) / 0.3081)
		}
		s.Labels[i] = r.Labels[j]
	}
	return s
}

// testMNIST: a seeded split of real MNIST with nTarget target images, nVal validation,
// nTest test images and nBase balanced base examples from the target part.
func testMNIST(t testing.TB, nTarget, nVal, nTest, nBase int) *Data {
	train, test := sharedMNIST(t)
	rng := rand.New(rand.NewPCG(1, 2))
	perm := rng.Perm(train.N)
	targetIdx, valIdx := perm[:nTarget], perm[50000:50000+nVal]
	var baseIdx []int
	count := map[int64]int{}
	for _, j := range targetIdx {
		if count[train.Labels[j]] < nBase/10 {
			count[train.Labels[j]]++
			baseIdx = append(baseIdx, j)
		}
		if len(baseIdx) == nBase {
			break
		}
	}
	testIdx := rng.Perm(test.N)[:nTest]
	bi := make([]int64, len(baseIdx))
	for i, j := range baseIdx {
		bi[i] = int64(j)
	}
	return &Data{Target: "mnist", Source: "mnist", Classes: 10, Shape: [3]int64{1, 28, 28},
		TargetSet: normalise(train, targetIdx), Validation: normalise(train, valIdx), Test: normalise(test, testIdx),
		Base: normalise(train, baseIdx), BaseIndices: bi, Files: map[string]string{}}
}
