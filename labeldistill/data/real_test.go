package data

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

// sharedDatasets returns ../shared/datasets relative to the repository root, skipping
// the test when it is absent.
func sharedDatasets(t testing.TB) string {
	t.Helper()
	p := filepath.Join("..", "..", "..", "shared", "datasets")
	if _, err := os.Stat(filepath.Join(p, "README.md")); err != nil {
		t.Skip("no shared datasets folder at " + p)
	}
	return p
}

// rawStats returns the per-channel mean and std of pixels/255.
func rawStats(r *RawSet) (mean, std []float64) {
	hw := r.H * r.W
	mean, std = make([]float64, r.C), make([]float64, r.C)
	for c := 0; c < r.C; c++ {
		var hist [256]int64
		for i := 0; i < r.N; i++ {
			for _, p := range r.Pixels[(i*r.C+c)*hw : (i*r.C+c+1)*hw] {
				hist[p]++
			}
		}
		var n, s, s2 float64
		for p, k := range hist {
			v := float64(p) / 255
			n += float64(k)
			s += float64(k) * v
			s2 += float64(k) * v * v
		}
		mean[c] = s / n
		std[c] = math.Sqrt(s2/n - mean[c]*mean[c])
	}
	return
}

func TestRealMNIST(t *testing.T) {
	shared := sharedDatasets(t)
	raw, err := LoadRaw("mnist", Options{Dir: filepath.Join(shared, "mnist")})
	if err != nil {
		t.Fatal(err)
	}
	if len(raw.Warnings) != 0 {
		t.Errorf("warnings for the verified shared files: %q", raw.Warnings)
	}
	if raw.Train.N != 60000 || raw.Test.N != 10000 {
		t.Fatalf("counts %d/%d", raw.Train.N, raw.Test.N)
	}
	want := []int{5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949}
	counts := make([]int, 10)
	for _, l := range raw.Train.Labels {
		counts[l]++
	}
	for c := range want {
		if counts[c] != want[c] {
			t.Errorf("train class %d: %d, want %d", c, counts[c], want[c])
		}
	}
	mean, std := rawStats(raw.Train)
	if math.Abs(mean[0]-0.1307) > 5e-5 || math.Abs(std[0]-0.3081) > 5e-5 {
		t.Errorf("train pixel mean %.5f std %.5f, want 0.1307 0.3081", mean[0], std[0])
	}

	ds, err := Load("mnist", Options{Dir: filepath.Join(shared, "mnist"), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if ds.TargetSet.N != 50000 || ds.Validation.N != 10000 || ds.Test.N != 10000 || len(ds.Warnings) != 0 {
		t.Fatalf("splits %d/%d/%d, warnings %q", ds.TargetSet.N, ds.Validation.N, ds.Test.N, ds.Warnings)
	}
	// Normalised train data has mean ≈ 0 and std ≈ 1.
	var s, s2 float64
	for _, sp := range []*Split{ds.TargetSet, ds.Validation} {
		for _, v := range sp.Images {
			s += float64(v)
			s2 += float64(v) * float64(v)
		}
	}
	n := float64(60000 * 784)
	if m, sd := s/n, math.Sqrt(s2/n-(s/n)*(s/n)); math.Abs(m) > 1e-3 || math.Abs(sd-1) > 1e-3 {
		t.Errorf("normalised mean %.5f std %.5f", m, sd)
	}
	val := map[int]bool{}
	for _, j := range ds.Validation.Index {
		val[j] = true
	}
	for _, n := range []int{10, 20, 50, 100, 500} {
		b, err := ds.Base(Balanced, n, 11)
		if err != nil {
			t.Fatal(err)
		}
		per := make([]int, 10)
		for k, src := range b.Source {
			per[b.Labels[k]]++
			if val[src] {
				t.Fatalf("N=%d: base example %d is a validation image", n, src)
			}
			if raw.Train.Labels[src] != b.Labels[k] {
				t.Fatal("source index does not point at the right image")
			}
		}
		for c := range per {
			if per[c] != n/10 {
				t.Errorf("N=%d class %d: %d", n, c, per[c])
			}
		}
	}
}

func TestRealKMNISTSubset(t *testing.T) {
	shared := sharedDatasets(t)
	ds, err := Load("kmnist", Options{Dir: filepath.Join(shared, "kmnist"), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if ds.Layout != "first7011" || ds.TargetSet.N != 5843 || ds.Validation.N != 1168 || ds.Test.N != 10000 {
		t.Fatalf("layout %s splits %d/%d/%d", ds.Layout, ds.TargetSet.N, ds.Validation.N, ds.Test.N)
	}
	if !hasWarning(ds.Warnings, "first 7011") || !hasWarning(ds.Warnings, "5843") {
		t.Errorf("warnings %q", ds.Warnings)
	}
	for c, n := range ds.Test.ClassCounts() {
		if n != 1000 {
			t.Errorf("test class %d: %d", c, n)
		}
	}
	b, err := ds.Base(Balanced, 100, 1)
	if err != nil || b.N != 100 {
		t.Fatal(err)
	}
}

func TestRealCIFAR100Subset(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	shared := sharedDatasets(t)
	raw, err := LoadRaw("cifar100", Options{Dir: filepath.Join(shared, "cifar100")})
	if err != nil {
		t.Fatal(err)
	}
	if raw.Layout != "first100perclass" || raw.Train.N != 10000 || raw.Test.N != 10000 {
		t.Fatalf("%s %d/%d", raw.Layout, raw.Train.N, raw.Test.N)
	}
	for _, r := range []*RawSet{raw.Train, raw.Test} {
		counts := make([]int, 100)
		for _, l := range r.Labels {
			counts[l]++
		}
		for c, n := range counts {
			if n != 100 {
				t.Fatalf("class %d: %d", c, n)
			}
		}
	}
	mean, _ := rawStats(raw.Test)
	if math.Abs(mean[0]-0.5088) > 5e-4 || math.Abs(mean[1]-0.4874) > 5e-4 || math.Abs(mean[2]-0.4419) > 5e-4 {
		t.Errorf("test means %.4f", mean)
	}
	ds, err := NewDataset(raw.Spec, raw.Train, raw.Test, SplitOptions{Seed: 2})
	if err != nil || ds.TargetSet.N != 9000 || ds.Validation.N != 1000 {
		t.Fatalf("split: %v", err)
	}
}

func TestRealCIFAR10JPEG(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: decodes 60000 JPEGs")
	}
	shared := sharedDatasets(t)
	raw, err := LoadRaw("cifar10", Options{Dir: filepath.Join(shared, "cifar10")})
	if err != nil {
		t.Fatal(err)
	}
	if raw.Layout != "jpeg-tar" || raw.Train.N != 50000 || raw.Test.N != 10000 {
		t.Fatalf("%s %d/%d", raw.Layout, raw.Train.N, raw.Test.N)
	}
	for _, r := range []*RawSet{raw.Train, raw.Test} {
		counts := make([]int, 10)
		for _, l := range r.Labels {
			counts[l]++
		}
		for c, n := range counts {
			if n != r.N/10 {
				t.Errorf("class %d: %d", c, n)
			}
		}
	}
	mean, _ := rawStats(raw.Train)
	for c, want := range []float64{0.4913, 0.4821, 0.4465} {
		if math.Abs(mean[c]-want) > 1e-4 {
			t.Errorf("train channel %d mean %.5f, want %.4f", c, mean[c], want)
		}
	}
	mean, _ = rawStats(raw.Test)
	for c, want := range []float64{0.4941, 0.4851, 0.4504} {
		if math.Abs(mean[c]-want) > 1e-4 {
			t.Errorf("test channel %d mean %.5f, want %.4f", c, mean[c], want)
		}
	}
	ds, err := NewDataset(raw.Spec, raw.Train, raw.Test, SplitOptions{Seed: 3})
	if err != nil || ds.TargetSet.N != 45000 || ds.Validation.N != 5000 || ds.Test.N != 10000 {
		t.Fatalf("split: %v", err)
	}
}

// The shared files verify against the registry.
func TestRealVerify(t *testing.T) {
	shared := sharedDatasets(t)
	for _, name := range []string{"mnist", "kmnist", "cifar10", "cifar100"} {
		checks, err := Verify(shared, name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		for _, c := range checks {
			if !c.Known {
				t.Errorf("%s: %s unknown", name, c.Path)
			}
		}
	}
}
