// Package testkit is what the tests of labeldistill's packages share: real MNIST from
// ../shared/datasets as a run's data, the small configuration most end-to-end tests run,
// and exact comparisons of results.
package testkit

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/torch"
)

// SharedDatasets is ../shared/datasets beside the repository: found from this source file,
// or, in a test binary built with -trimpath and run elsewhere (the GPU bundle's
// work/<pkg>/ folders, scripts/gpu/prepare.sh), in the nearest folder above the working
// directory that holds shared/datasets.
func SharedDatasets() string {
	_, here, _, _ := runtime.Caller(0)
	beside := filepath.Join(filepath.Dir(here), "..", "..", "..", "..", "shared", "datasets")
	if _, err := os.Stat(beside); err == nil || filepath.IsAbs(here) {
		return beside
	}
	dir, err := os.Getwd()
	for err == nil {
		if st, e := os.Stat(filepath.Join(dir, "shared", "datasets")); e == nil && st.IsDir() {
			return filepath.Join(dir, "shared", "datasets")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return beside
}

// SharedMNIST reads MNIST's train and test splits, skipping the test when they are absent.
func SharedMNIST(t testing.TB) (train, test *data.RawSet) {
	t.Helper()
	dir := filepath.Join(SharedDatasets(), "mnist")
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

// Normalise is the images idx of r as a split, normalised with MNIST's statistics.
func Normalise(r *data.RawSet, idx []int) data.Split {
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

// MNIST is a seeded split of real MNIST with nTarget target images, nVal validation, nTest
// test images and nBase balanced base examples from the target part.
func MNIST(t testing.TB, nTarget, nVal, nTest, nBase int) *data.Run {
	train, test := SharedMNIST(t)
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
	return &data.Run{Target: "mnist", Source: "mnist", Classes: 10, Shape: [3]int64{1, 28, 28},
		TargetSet: Normalise(train, targetIdx), Validation: Normalise(train, valIdx), Test: Normalise(test, testIdx),
		Base: Normalise(train, baseIdx), BaseIndices: bi, Files: map[string]string{}}
}

var (
	cacheMu sync.Mutex
	cache   = map[[4]int]*data.Run{}
)

// CachedMNIST is MNIST, built once per size in the test binary (the tests only read it).
func CachedMNIST(t testing.TB, nTarget, nVal, nTest, nBase int) *data.Run {
	t.Helper()
	cacheMu.Lock()
	defer cacheMu.Unlock()
	key := [4]int{nTarget, nVal, nTest, nBase}
	if d, ok := cache[key]; ok {
		return d
	}
	d := MNIST(t, nTarget, nVal, nTest, nBase)
	cache[key] = d
	return d
}

// SmallDataset: 2000 real MNIST target images, 1000 validation and test, 20 balanced base
// examples.
func SmallDataset(t testing.TB) *data.Run { return CachedMNIST(t, 2000, 1000, 1000, 20) }

// SmallConfig is a small run: 20 base, N_i 10, N_o 256 (8 steps per epoch), 3 epochs,
// validation after every epoch, G = 2 so that the model is reset several times, 1 thread,
// a checkpoint every 5 meta-steps.
func SmallConfig(method string) config.Config {
	cfg := config.Default()
	cfg.Method, cfg.BaseExamples, cfg.InnerBatch, cfg.OuterBatch = method, 20, 10, 256
	cfg.Epochs, cfg.ValidateEvery, cfg.ResetWindow, cfg.EvalModels = 3, 1, 2, 2
	cfg.Baselines = []string{}
	cfg.Threads = 1
	cfg.CheckpointEvery = 5
	return cfg
}

// RestoreThreads undoes Config.Threads' process-wide setting after the test.
func RestoreThreads(t testing.TB) {
	prev := torch.NumThreads()
	t.Cleanup(func() { _ = torch.SetNumThreads(prev) })
}

// SameBits reports whether a and b hold the same float32 bits.
func SameBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// SameFloat64Bits reports whether a and b hold the same float64 bits.
func SameFloat64Bits(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

// MaxAbsDiff32 is the largest |a_i − b_i| and its index (+Inf, −1 for other lengths).
func MaxAbsDiff32(a, b []float32) (float64, int) {
	if len(a) != len(b) {
		return math.Inf(1), -1
	}
	d, at := 0.0, -1
	for i := range a {
		if v := math.Abs(float64(a[i] - b[i])); v > d || at < 0 {
			d, at = max(d, v), i
		}
	}
	return d, at
}
