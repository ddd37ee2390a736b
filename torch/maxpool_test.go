package torch

// maxpool_test.go: MaxPool2dDirect against MaxPool2d, bit for bit: values, first- and
// second-order derivatives (through the indices), ties, NaN, −∞, ceil mode, odd sizes,
// float32 and float64, with and without a graph; the fallbacks.

import (
	"math"
	"testing"
)

// Both ISAs' loops (simd_kernels.h) are checked: each against max_pool2d, bit for bit.
func TestMaxPool2dDirectMatchesMaxPool2d(t *testing.T) {
	scoped(t)
	t.Cleanup(func() { _ = setSIMDISA("best") })
	for _, mode := range []string{"best", "baseline"} {
		ok(t, setSIMDISA(mode))
		t.Run(simdISA(), testMaxPool2dDirectMatchesMaxPool2d)
	}
}

func testMaxPool2dDirectMatchesMaxPool2d(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dtype   DType
		withNaN bool
		// −0 for half the zeros and −∞ in one element in ten, no NaN (the NaN-free loop's
		// ties between +0 and −0, and windows of −∞ only)
		signedZeros bool
		shape       []int64
		o           PoolOpts
	}{
		{"alexnet 3/2/1 float32", Float, false, false, []int64{3, 4, 32, 32}, PoolOpts{Kernel: [2]int64{3, 3}, Stride: [2]int64{2, 2}, Padding: [2]int64{1, 1}}},
		{"alexnet 3/2/1 16×16 float64", Double, false, false, []int64{2, 3, 16, 16}, PoolOpts{Kernel: [2]int64{3, 3}, Stride: [2]int64{2, 2}, Padding: [2]int64{1, 1}}},
		{"ties and NaN, odd sizes", Double, true, false, []int64{2, 3, 9, 7}, PoolOpts{Kernel: [2]int64{3, 2}, Stride: [2]int64{2, 1}, Padding: [2]int64{1, 1}}},
		// 11 outputs a row: a whole vector of float32 lanes and a rest.
		{"ties and NaN float32, 11 outputs a row", Float, true, false, []int64{2, 3, 12, 21}, PoolOpts{Kernel: [2]int64{3, 3}, Stride: [2]int64{2, 2}, Padding: [2]int64{1, 1}}},
		{"ceil mode float32 NaN", Float, true, false, []int64{2, 2, 8, 11}, PoolOpts{Kernel: [2]int64{3, 3}, Stride: [2]int64{2, 3}, Padding: [2]int64{1, 0}, CeilMode: true}},
		{"2×2", Float, false, false, []int64{4, 6, 24, 24}, PoolOpts{Kernel: [2]int64{2, 2}}},
		{"kernel 5 stride 2 padding 2 odd NaN", Float, true, false, []int64{2, 2, 9, 11}, PoolOpts{Kernel: [2]int64{5, 5}, Stride: [2]int64{2, 2}, Padding: [2]int64{2, 2}}},
		{"kernel 2 stride 2 padding 1 ceil", Double, true, false, []int64{1, 3, 7, 5}, PoolOpts{Kernel: [2]int64{2, 2}, Stride: [2]int64{2, 2}, Padding: [2]int64{1, 1}, CeilMode: true}},
		{"kernel 5 stride 1", Double, false, false, []int64{1, 2, 7, 6}, PoolOpts{Kernel: [2]int64{5, 4}, Stride: [2]int64{1, 1}, Padding: [2]int64{2, 2}}},
		{"alexnet 3/2/1 ±0 and −∞ float32", Float, false, true, []int64{2, 3, 32, 32}, PoolOpts{Kernel: [2]int64{3, 3}, Stride: [2]int64{2, 2}, Padding: [2]int64{1, 1}}},
		{"±0 and −∞ odd float64", Double, false, true, []int64{2, 3, 11, 13}, PoolOpts{Kernel: [2]int64{2, 3}, Stride: [2]int64{1, 2}, Padding: [2]int64{1, 1}, CeilMode: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := NewScope()
			defer sc.Close()
			need := tensors(t)
			// Values in {0, 1, 2} (many ties), with NaN and −∞ in the NaN cases.
			rng := newRNG(5)
			xv := make([]float64, numel(tc.shape))
			for i := range xv {
				xv[i] = float64(rng.IntN(3))
				if tc.signedZeros && xv[i] == 0 && rng.IntN(2) == 0 {
					xv[i] = math.Copysign(0, -1)
				}
				if tc.signedZeros && rng.IntN(10) == 0 {
					xv[i] = math.Inf(-1)
				}
				if tc.withNaN && rng.IntN(30) == 0 {
					xv[i] = math.NaN()
				} else if tc.withNaN && rng.IntN(10) == 0 {
					xv[i] = math.Inf(-1)
				}
			}
			x := need(f64T(t, xv, tc.shape...).ToDType(tc.dtype))
			ref := func(x *Tensor) (*Tensor, error) { return MaxPool2d(x, tc.o) }
			y := need(ref(x))
			u := need(randnT(t, newRNG(6), y.Shape()...).ToDType(tc.dtype))
			v := need(randnT(t, newRNG(7), tc.shape...).ToDType(tc.dtype))
			want := poolDerivatives(t, ref, x, u, v)
			got := poolDerivatives(t, func(x *Tensor) (*Tensor, error) { return MaxPool2dDirect(x, tc.o) }, x, u, v)
			for i, name := range []string{"values", "gradient", "d²/dx²", "d²/du dx"} {
				if (want[i] == nil) != (got[i] == nil) {
					t.Fatalf("%s: max_pool2d's nil: %v, MaxPool2dDirect's: %v", name, want[i] == nil, got[i] == nil)
				}
				if !sameBits(want[i], got[i]) {
					t.Errorf("%s differ from max_pool2d's: max |Δ| %g", name, maxAbsDiff(want[i], got[i]))
				}
			}
			ok(t, NoGrad(func() error {
				y, err := MaxPool2dDirect(x, tc.o)
				if err != nil {
					return err
				}
				if !sameBits(vals(t, y), want[0]) {
					t.Error("values without a graph differ from max_pool2d's")
				}
				return nil
			}))
		})
	}
}

func TestMaxPool2dDirectFallbacks(t *testing.T) {
	scoped(t)
	need := tensors(t)
	o := PoolOpts{Kernel: [2]int64{3, 3}, Stride: [2]int64{2, 2}, Padding: [2]int64{1, 1}}
	// 3-D input and a non-contiguous view run max_pool2d.
	x3 := need(randnT(t, newRNG(8), 2, 7, 7).ToDType(Float))
	xt := need(need(randnT(t, newRNG(9), 2, 3, 7, 8).ToDType(Float)).Transpose(2, 3))
	for _, x := range []*Tensor{x3, xt} {
		got := need(MaxPool2dDirect(x, o))
		want := need(MaxPool2d(x, o))
		if !shapeEq(got.Shape(), want.Shape()) || !sameBits(vals(t, got), vals(t, want)) {
			t.Errorf("input %v: not max_pool2d's result", x.Shape())
		}
	}
	// Bad arguments are max_pool2d's errors, not crashes.
	x := need(randnT(t, newRNG(10), 1, 1, 4, 4).ToDType(Float))
	for _, bad := range []PoolOpts{
		{Kernel: [2]int64{3, 3}, Padding: [2]int64{2, 2}}, // padding over half the kernel
		{Kernel: [2]int64{6, 6}},                          // output too small
		{Kernel: [2]int64{0, 2}},                          // empty kernel
	} {
		if _, err := MaxPool2dDirect(x, bad); err == nil {
			t.Errorf("%+v: no error", bad)
		} else if _, err2 := MaxPool2d(x, bad); err2 == nil {
			t.Errorf("%+v: max_pool2d accepts it, MaxPool2dDirect says %v", bad, err)
		}
	}
	if _, err := MaxPool2dDirect(nil, o); err == nil {
		t.Error("nil tensor: no error")
	}
}
