package data

import (
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Golden values: the permutation algorithm is part of the reproducibility contract.
func TestPermutationGolden(t *testing.T) {
	if got := Permutation(10, 1, StreamSplit); !reflect.DeepEqual(got, []int{6, 9, 7, 5, 4, 3, 1, 8, 2, 0}) {
		t.Errorf("Permutation(10, 1, StreamSplit) = %v: the split algorithm changed", got)
	}
	if got := Permutation(10, 2, StreamBase); !reflect.DeepEqual(got, []int{7, 5, 8, 2, 1, 3, 4, 0, 9, 6}) {
		t.Errorf("Permutation(10, 2, StreamBase) = %v: the base algorithm changed", got)
	}
	p := Permutation(1000, 42, StreamSplit)
	s := slices.Clone(p)
	slices.Sort(s)
	for i, v := range s {
		if v != i {
			t.Fatal("not a permutation")
		}
	}
	if reflect.DeepEqual(p, Permutation(1000, 43, StreamSplit)) || reflect.DeepEqual(p, Permutation(1000, 42, StreamBase)) {
		t.Error("seed or stream has no effect")
	}
	if len(Permutation(0, 1, 1)) != 0 || !reflect.DeepEqual(Permutation(1, 1, 1), []int{0}) {
		t.Error("edge sizes")
	}
}

// Uniformity smoke test: each of the 6 permutations of 3 elements is about equally likely.
func TestPermutationUniform(t *testing.T) {
	counts := map[[3]int]int{}
	const trials = 60000
	for s := uint64(0); s < trials; s++ {
		p := Permutation(3, s, StreamBase)
		counts[[3]int{p[0], p[1], p[2]}]++
	}
	if len(counts) != 6 {
		t.Fatalf("%d distinct permutations", len(counts))
	}
	for k, c := range counts {
		if math.Abs(float64(c)-trials/6) > 500 {
			t.Errorf("%v: %d of %d", k, c, trials)
		}
	}
}

// rawFor builds a RawSet of n 1×28×28 images whose first pixel encodes the index.
func rawFor(n, classes int) *RawSet {
	r := &RawSet{N: n, C: 1, H: 28, W: 28, Pixels: make([]uint8, n*784), Labels: make([]int64, n), Classes: classes}
	for i := 0; i < n; i++ {
		r.Pixels[i*784] = uint8(i % 256)
		r.Pixels[i*784+1] = 255
		r.Labels[i] = int64(i % classes)
	}
	return r
}

func mnistSpec(t *testing.T) *Spec {
	s, err := Lookup("mnist")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewDataset(t *testing.T) {
	spec := mnistSpec(t)
	train, test := rawFor(600, 10), rawFor(100, 10)
	ds, err := NewDataset(spec, train, test, SplitOptions{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	// 600 is not the nominal 60000: validation keeps 1/6.
	if ds.TargetSet.N != 500 || ds.Validation.N != 100 || ds.Test.N != 100 {
		t.Fatalf("sizes %d/%d/%d", ds.TargetSet.N, ds.Validation.N, ds.Test.N)
	}
	if len(ds.Warnings) != 1 || !strings.Contains(ds.Warnings[0], "keeping the validation fraction") {
		t.Errorf("warnings %q", ds.Warnings)
	}
	// Target and validation are disjoint and cover the train set.
	seen := map[int]bool{}
	for _, s := range []*Split{ds.TargetSet, ds.Validation} {
		for i, j := range s.Index {
			if seen[j] {
				t.Fatalf("index %d twice", j)
			}
			seen[j] = true
			if s.Labels[i] != train.Labels[j] {
				t.Fatal("label does not follow its image")
			}
			want := float32((float64(train.Pixels[j*784])/255 - 0.1307) / 0.3081)
			if s.Image(i)[0] != want {
				t.Fatalf("pixel of example %d (source %d): %v, want %v", i, j, s.Image(i)[0], want)
			}
			if got, want := s.Image(i)[1], float32((1-0.1307)/0.3081); math.Abs(float64(got-want)) > 1e-6 {
				t.Fatalf("pixel 255 → %v, want %v", got, want)
			}
		}
	}
	if len(seen) != 600 {
		t.Errorf("cover %d", len(seen))
	}
	if !slices.Equal(ds.TargetSet.Index, Permutation(600, 7, StreamSplit)[:500]) {
		t.Error("target set is not the permutation prefix")
	}
	for i, j := range ds.Test.Index {
		if i != j {
			t.Fatal("test split reordered")
		}
	}
	// Deterministic; TargetSetSize gives nested prefixes; validation unaffected.
	ds2, _ := NewDataset(spec, train, test, SplitOptions{Seed: 7, TargetSetSize: 50})
	if ds2.TargetSet.N != 50 || !slices.Equal(ds2.TargetSet.Index, ds.TargetSet.Index[:50]) || !slices.Equal(ds2.Validation.Index, ds.Validation.Index) {
		t.Error("TargetSetSize subset is not the prefix")
	}
	ds3, _ := NewDataset(spec, train, test, SplitOptions{Seed: 8})
	if slices.Equal(ds3.TargetSet.Index, ds.TargetSet.Index) {
		t.Error("seed ignored")
	}
	// ValidationSize override.
	ds4, err := NewDataset(spec, train, test, SplitOptions{Seed: 7, ValidationSize: 60})
	if err != nil || ds4.Validation.N != 60 || ds4.TargetSet.N != 540 {
		t.Errorf("override: %v", err)
	}
	// Errors.
	if _, err := NewDataset(spec, train, test, SplitOptions{TargetSetSize: 501}); err == nil {
		t.Error("TargetSetSize beyond the target set accepted")
	}
	if _, err := NewDataset(spec, train, test, SplitOptions{ValidationSize: 600}); err == nil {
		t.Error("validation of everything accepted")
	}
	bad := rawFor(10, 10)
	bad.Labels[3] = 10
	if _, err := NewDataset(spec, bad, test, SplitOptions{}); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("bad label: %v", err)
	}
	colour := &RawSet{N: 1, C: 3, H: 32, W: 32, Pixels: make([]uint8, 3072), Labels: []int64{0}, Classes: 10}
	if _, err := NewDataset(spec, colour, test, SplitOptions{}); err == nil || !strings.Contains(err.Error(), "want 1x28x28") {
		t.Errorf("wrong image size: %v", err)
	}
}

func TestSplitSizes(t *testing.T) {
	cases := []struct {
		name           string
		n, target, val int
		note           bool
	}{
		{"mnist", 60000, 50000, 10000, false},
		{"kmnist", 7011, 5843, 1168, true},
		{"k49", 232365, 209128, 23237, false},
		{"cifar10", 50000, 45000, 5000, false},
		{"cifar100", 10000, 9000, 1000, true},
		{"emnist-letters", 124800, 114800, 10000, false},
		{"cub", 5994, 5395, 599, false},
	}
	for _, c := range cases {
		s, err := Lookup(c.name)
		if err != nil {
			t.Fatal(err)
		}
		tg, v, note := s.SplitSizes(c.n)
		if tg != c.target || v != c.val || (note != "") != c.note {
			t.Errorf("%s(%d): %d/%d %q, want %d/%d", c.name, c.n, tg, v, note, c.target, c.val)
		}
	}
}

func TestSelectBase(t *testing.T) {
	spec := mnistSpec(t)
	ds, err := NewDataset(spec, rawFor(1200, 10), rawFor(10, 10), SplitOptions{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	val := map[int]bool{}
	for _, j := range ds.Validation.Index {
		val[j] = true
	}
	b, err := ds.Base(Balanced, 100, 5)
	if err != nil {
		t.Fatal(err)
	}
	per := make([]int, 10)
	for k, i := range b.Indices {
		per[b.Labels[k]]++
		if b.Source[k] != ds.TargetSet.Index[i] || val[b.Source[k]] {
			t.Fatal("base example from validation or wrong source index")
		}
		if !slices.Equal(b.Images[k*784:(k+1)*784], ds.TargetSet.Image(i)) {
			t.Fatal("image does not match")
		}
	}
	for c, n := range per {
		if n != 10 {
			t.Errorf("class %d: %d examples, want 10", c, n)
		}
	}
	// Balanced = walk of the shuffle keeping under-quota classes.
	perm := Permutation(ds.TargetSet.N, 5, StreamBase)
	if b.Indices[0] != perm[0] {
		t.Error("first base example is not the first of the shuffle")
	}
	b2, _ := ds.Base(Balanced, 100, 5)
	if !slices.Equal(b.Indices, b2.Indices) {
		t.Error("not deterministic")
	}
	u, err := ds.Base(Unbalanced, 37, 5)
	if err != nil || !slices.Equal(u.Indices, perm[:37]) || u.N != 37 || len(u.Images) != 37*784 {
		t.Errorf("unbalanced: %v", err)
	}
	// Errors.
	errCases := []struct {
		s    *Split
		mode BaseMode
		n    int
		want string
	}{
		{ds.TargetSet, Balanced, 95, "divisible"},
		{ds.TargetSet, Balanced, 0, "positive"},
		{ds.TargetSet, Unbalanced, -1, "positive"},
		{ds.TargetSet, Unbalanced, ds.TargetSet.N + 1, "only"},
		{ds.TargetSet, Balanced, 990, "needs 99 examples of class"},
		{ds.Validation, Unbalanced, 10, "must come from the target set"},
		{ds.Test, Balanced, 10, "must come from the target set"},
		{ds.TargetSet, "random", 10, "unknown base mode"},
	}
	for _, c := range errCases {
		if _, err := SelectBase(c.s, c.mode, c.n, 1); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %d: got %v, want %q", c.mode, c.n, err, c.want)
		}
	}
}
