// Splits (target set, validation, test) as normalised float buffers, the seeded
// permutations behind them, and base-example selection.

package data

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"runtime"
	"sync"
)

// Values of Split.Role.
const (
	SplitTarget     = "target"
	SplitValidation = "validation"
	SplitTest       = "test"
)

// Split is one part of a dataset, ready to become a tensor: Images holds N images of
// C×H×W float32 values, contiguous, already normalised as (p/255 − mean[c]) / std[c].
type Split struct {
	Role       string // SplitTarget, SplitValidation or SplitTest
	Images     []float32
	Labels     []int64
	N, C, H, W int
	Classes    int
	// Index[i] is the position of example i in the source files (train or test) in
	// reading order: IDX/npz record order, CIFAR batches concatenated in order, image
	// trees in class order then file-name order.
	Index []int
}

// ImageSize returns C*H*W.
func (s *Split) ImageSize() int { return s.C * s.H * s.W }

// Image returns image i (a sub-slice of Images, not a copy).
func (s *Split) Image(i int) []float32 {
	n := s.ImageSize()
	return s.Images[i*n : (i+1)*n]
}

// ClassCounts returns the number of examples of each class (labels outside
// [0, Classes) are not counted).
func (s *Split) ClassCounts() []int {
	c := make([]int, max(s.Classes, 0))
	for _, l := range s.Labels {
		if l >= 0 && l < int64(len(c)) {
			c[l]++
		}
	}
	return c
}

// Dataset is a loaded dataset: the train file split into TargetSet and Validation by a
// seeded permutation, and the official Test split.
type Dataset struct {
	Spec                        *Spec
	Layout                      string   // the registry layout that was read
	Dir                         string   // the folder the files came from
	Files                       []string // the files read
	TargetSet, Validation, Test *Split
	// Warnings lists everything a user should know about this data: unknown checksums
	// accepted with AllowUnknown, a subset layout, adapted split sizes.
	Warnings []string
	Seed     uint64
}

// SplitOptions control NewDataset.
type SplitOptions struct {
	Seed uint64
	// TargetSetSize keeps only the first TargetSetSize examples of the (shuffled) target
	// set; 0 keeps all. Smaller sizes give nested subsets for the same seed.
	TargetSetSize int
	// ValidationSize overrides the registry's split rule when > 0 (the target set gets
	// the rest of the train images).
	ValidationSize int
}

// PCG stream constants: every random choice uses rand.NewPCG(seed, stream) with its
// own stream, so the split and the base examples are independent of each other.
const (
	StreamSplit uint64 = 0x6c64_7370_6c69_7401 // "ldsplit" 1: train → target set / validation
	StreamBase  uint64 = 0x6c64_6261_7365_0002 // "ldbase" 2: base-example shuffle
)

// Permutation returns a seeded random permutation of 0..n-1: a Fisher–Yates shuffle
// (i from n−1 down to 1, swap i with j uniform in [0, i]) driven by PCG-DXSM
// (math/rand/v2's NewPCG(seed, stream)), with j drawn by Lemire's multiply-and-reject
// method on Uint64. The algorithm is spelled out here, not taken from rand.Shuffle,
// so that the permutation stays the same across Go releases.
func Permutation(n int, seed, stream uint64) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	r := rand.NewPCG(seed, stream)
	for i := n - 1; i > 0; i-- {
		j := int(boundedUint64(r, uint64(i+1)))
		p[i], p[j] = p[j], p[i]
	}
	return p
}

// boundedUint64 returns a uniform value in [0, n), n > 0 (Lemire 2019).
func boundedUint64(r *rand.PCG, n uint64) uint64 {
	hi, lo := bits.Mul64(r.Uint64(), n)
	if lo < n {
		thresh := -n % n
		for lo < thresh {
			hi, lo = bits.Mul64(r.Uint64(), n)
		}
	}
	return hi
}

// NewDataset splits raw train data into target set and validation (by the spec's split
// rule and a seeded permutation: the first `target` entries of Permutation(N, seed,
// StreamSplit) form the target set, in that order, the next `validation` entries the
// validation split) and normalises train and test with the spec's mean/std.
func NewDataset(spec *Spec, train, test *RawSet, opt SplitOptions) (*Dataset, error) {
	for _, r := range []*RawSet{train, test} {
		if r.C != spec.C || r.H != spec.H || r.W != spec.W {
			return nil, fmt.Errorf("data: %s: images are %dx%dx%d, want %dx%dx%d", spec.Name, r.C, r.H, r.W, spec.C, spec.H, spec.W)
		}
		if r.Classes != spec.Classes {
			return nil, fmt.Errorf("data: %s: %d classes, want %d", spec.Name, r.Classes, spec.Classes)
		}
		if err := r.check(spec.Name); err != nil {
			return nil, err
		}
	}
	ds := &Dataset{Spec: spec, Seed: opt.Seed}
	nTarget, nVal, note := spec.SplitSizes(train.N)
	if opt.ValidationSize > 0 {
		nVal, nTarget, note = opt.ValidationSize, train.N-opt.ValidationSize, ""
	}
	if nVal <= 0 || nTarget <= 0 || nTarget+nVal > train.N {
		return nil, fmt.Errorf("data: %s: cannot split %d train images into a target set of %d and a validation split of %d", spec.Name, train.N, nTarget, nVal)
	}
	if note != "" {
		ds.Warnings = append(ds.Warnings, note)
	}
	if opt.TargetSetSize < 0 || opt.TargetSetSize > nTarget {
		return nil, fmt.Errorf("data: %s: target set size %d out of range [0, %d]", spec.Name, opt.TargetSetSize, nTarget)
	}
	perm := Permutation(train.N, opt.Seed, StreamSplit)
	targetIdx, valIdx := perm[:nTarget], perm[nTarget:nTarget+nVal]
	if opt.TargetSetSize > 0 {
		targetIdx = targetIdx[:opt.TargetSetSize]
	}
	lut := normLUT(spec.Mean, spec.Std)
	ds.TargetSet = gather(train, targetIdx, lut, SplitTarget)
	ds.Validation = gather(train, valIdx, lut, SplitValidation)
	all := make([]int, test.N)
	for i := range all {
		all[i] = i
	}
	ds.Test = gather(test, all, lut, SplitTest)
	return ds, nil
}

// normLUT returns, per channel, the 256 normalised values of the uint8 pixel values.
func normLUT(mean, std []float64) [][256]float32 {
	lut := make([][256]float32, len(mean))
	for c := range mean {
		for p := range 256 {
			lut[c][p] = float32((float64(p)/255 - mean[c]) / std[c])
		}
	}
	return lut
}

// gather copies the images idx of r into a new normalised Split, in parallel chunks.
func gather(r *RawSet, idx []int, lut [][256]float32, role string) *Split {
	n, chw, hw := len(idx), r.ImageSize(), r.H*r.W
	s := &Split{Role: role, Images: make([]float32, n*chw), Labels: make([]int64, n),
		N: n, C: r.C, H: r.H, W: r.W, Classes: r.Classes, Index: append([]int(nil), idx...)}
	workers := min(runtime.GOMAXPROCS(0), max(1, n/1024))
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := n*w/workers, n*(w+1)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				j := idx[i]
				s.Labels[i] = r.Labels[j]
				src := r.Pixels[j*chw : (j+1)*chw]
				dst := s.Images[i*chw : (i+1)*chw]
				for c := 0; c < r.C; c++ {
					t := &lut[c]
					sp, dp := src[c*hw:(c+1)*hw], dst[c*hw:(c+1)*hw]
					dp = dp[:len(sp)] // lets the compiler drop the bounds check below
					for k, p := range sp {
						dp[k] = t[p]
					}
				}
			}
		}()
	}
	wg.Wait()
	return s
}

// BaseMode selects how base examples are drawn (docs/ALGORITHM.md §1).
type BaseMode string

const (
	// Balanced walks a seeded shuffle of the target set and keeps an example while its
	// class has fewer than N/C kept, until N are kept (within-dataset distillation).
	Balanced BaseMode = "balanced"
	// Unbalanced takes the first N of a seeded shuffle; source classes are ignored
	// (cross-dataset distillation).
	Unbalanced BaseMode = "unbalanced"
	// Given: the examples were named by their file indices (SelectBaseAt).
	Given BaseMode = "given"
)

// Base is a set of chosen base examples.
type Base struct {
	Mode BaseMode
	Seed uint64
	// Indices are positions in the split the examples were drawn from, in selection
	// order; Source are the same examples' positions in the source file (Split.Index).
	Indices, Source []int
	// Images (N×C×H×W, normalised) and their labels in the source dataset. In
	// Unbalanced (cross-dataset) mode the labels are informational only.
	Images     []float32
	Labels     []int64
	N, C, H, W int
}

// SelectBase draws n base examples from a target-set split (never from validation or
// test) using Permutation(s.N, seed, StreamBase).
func SelectBase(s *Split, mode BaseMode, n int, seed uint64) (*Base, error) {
	if s.Role != SplitTarget {
		return nil, fmt.Errorf("data: base examples must come from the target set, not the %q split", s.Role)
	}
	if n <= 0 {
		return nil, fmt.Errorf("data: number of base examples must be positive, got %d", n)
	}
	if n > s.N {
		return nil, fmt.Errorf("data: %d base examples requested but the target set has only %d examples", n, s.N)
	}
	if len(s.Labels) != s.N || len(s.Index) != s.N || len(s.Images) != s.N*s.ImageSize() {
		return nil, fmt.Errorf("data: inconsistent split: N=%d with %d labels, %d indices, %d values", s.N, len(s.Labels), len(s.Index), len(s.Images))
	}
	for i, l := range s.Labels {
		if l < 0 || l >= int64(s.Classes) {
			return nil, fmt.Errorf("data: label %d of example %d is out of range [0, %d)", l, i, s.Classes)
		}
	}
	perm := Permutation(s.N, seed, StreamBase)
	var chosen []int
	switch mode {
	case Unbalanced:
		chosen = perm[:n]
	case Balanced:
		if s.Classes <= 0 || n%s.Classes != 0 {
			return nil, fmt.Errorf("data: balanced selection needs N divisible by the %d classes (N/C per class); N = %d is not", s.Classes, n)
		}
		per := n / s.Classes
		for c, have := range s.ClassCounts() {
			if have < per {
				return nil, fmt.Errorf("data: balanced selection of %d needs %d examples of class %d, but the target set has only %d", n, per, c, have)
			}
		}
		kept := make([]int, s.Classes)
		chosen = make([]int, 0, n)
		for _, i := range perm {
			if c := s.Labels[i]; kept[c] < per {
				kept[c]++
				chosen = append(chosen, i)
				if len(chosen) == n {
					break
				}
			}
		}
	default:
		return nil, fmt.Errorf("data: unknown base mode %q (balanced, unbalanced)", mode)
	}
	chw := s.ImageSize()
	b := &Base{Mode: mode, Seed: seed, Indices: append([]int(nil), chosen...), Source: make([]int, n),
		Images: make([]float32, n*chw), Labels: make([]int64, n), N: n, C: s.C, H: s.H, W: s.W}
	for k, i := range chosen {
		b.Source[k] = s.Index[i]
		b.Labels[k] = s.Labels[i]
		copy(b.Images[k*chw:], s.Image(i))
	}
	return b, nil
}

// Base draws base examples from the dataset's target set (see SelectBase).
func (d *Dataset) Base(mode BaseMode, n int, seed uint64) (*Base, error) {
	return SelectBase(d.TargetSet, mode, n, seed)
}

// SelectBaseAt takes the given base examples from a target-set split: fileIdx are positions
// in the source file (Split.Index values, as Base.Source and an artifact's base_indices
// record them), kept in the given order. An index that is not in the split (out of range, or
// in the validation part under this split's seed) is an error naming it.
func SelectBaseAt(s *Split, fileIdx []int) (*Base, error) {
	if s.Role != SplitTarget {
		return nil, fmt.Errorf("data: base examples must come from the target set, not the %q split", s.Role)
	}
	if len(fileIdx) == 0 {
		return nil, fmt.Errorf("data: no base indices given")
	}
	pos := make(map[int]int, s.N)
	for i, f := range s.Index {
		pos[f] = i
	}
	seen := make(map[int]bool, len(fileIdx))
	chosen := make([]int, len(fileIdx))
	for k, f := range fileIdx {
		if seen[f] {
			return nil, fmt.Errorf("data: base index %d is listed twice", f)
		}
		seen[f] = true
		i, ok := pos[f]
		if !ok {
			return nil, fmt.Errorf("data: base index %d (entry %d) is not in the target-set part of the train split (out of range, or in the validation part under this base seed)", f, k)
		}
		chosen[k] = i
	}
	n, chw := len(chosen), s.ImageSize()
	b := &Base{Mode: Given, Indices: chosen, Source: append([]int(nil), fileIdx...),
		Images: make([]float32, n*chw), Labels: make([]int64, n), N: n, C: s.C, H: s.H, W: s.W}
	for k, i := range chosen {
		b.Labels[k] = s.Labels[i]
		copy(b.Images[k*chw:], s.Image(i))
	}
	return b, nil
}

// Prefix returns the first n examples of a split (the split itself when n is 0 or covers
// it): for the target set, the same subset SplitOptions.TargetSetSize = n keeps.
func (s *Split) Prefix(n int) *Split {
	if n <= 0 || n >= s.N {
		return s
	}
	p := *s
	p.N = n
	p.Images = s.Images[:n*s.ImageSize()]
	p.Labels = s.Labels[:n]
	p.Index = s.Index[:n]
	return &p
}
