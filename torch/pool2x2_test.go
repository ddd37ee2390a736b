package torch

// pool2x2_test.go: the fused 2×2 max-pool against libtorch's max_pool2d, bit for bit:
// values, first- and second-order gradients, ties, NaN, odd sizes, float32 and float64,
// with and without a recorded graph. (Finite-difference checks are in gradcheck_test.go.)

import (
	"math"
	"strings"
	"testing"
)

// tiedInput returns values drawn from {0, 1, 2} (many tied windows, as conv outputs over
// blank image regions have) with a few NaN when withNaN is set.
func tiedInput(tb testing.TB, seed uint64, withNaN bool, shape ...int64) *Tensor {
	tb.Helper()
	rng := newRNG(seed)
	v := make([]float64, numel(shape))
	for i := range v {
		v[i] = float64(rng.IntN(3))
		if withNaN && rng.IntN(50) == 0 {
			v[i] = math.NaN()
		}
	}
	return f64T(tb, v, shape...)
}

// signedZeros returns values drawn from {−1, −0, +0}: windows whose maximum is a tie of
// zeros of both signs, where the first in scan order must win (max_pool2d takes v > best).
func signedZeros(tb testing.TB, seed uint64, shape ...int64) *Tensor {
	tb.Helper()
	rng := newRNG(seed)
	v := make([]float64, numel(shape))
	for i := range v {
		v[i] = []float64{-1, math.Copysign(0, -1), 0}[rng.IntN(3)]
	}
	return f64T(tb, v, shape...)
}

// sameBits reports whether a and b are equal element by element, with the sign of zero, NaN
// equal to NaN.
func sameBits(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.IsNaN(a[i]) && math.IsNaN(b[i]) {
			continue
		}
		if a[i] != b[i] || math.Signbit(a[i]) != math.Signbit(b[i]) {
			return false
		}
	}
	return true
}

// poolDerivatives returns, for pool applied to x: y = pool(x), g = dL/dx with
// L = Σ y·u, and gg = d(Σ g·v)/d(x, u): the values a second-order method uses.
func poolDerivatives(t *testing.T, pool func(*Tensor) (*Tensor, error), x, u, v *Tensor) [][]float64 {
	t.Helper()
	nt := tensors(t)
	x = nt(x.Detach())
	u = nt(u.Detach())
	ok(t, x.SetRequiresGrad(true))
	ok(t, u.SetRequiresGrad(true))
	y := nt(pool(x))
	L := nt(nt(y.Mul(u)).Sum())
	g := need[[]*Tensor](t)(Grad([]*Tensor{L}, []*Tensor{x}, GradOpts{CreateGraph: true}))[0]
	M := nt(nt(g.Mul(v)).Sum())
	gg := need[[]*Tensor](t)(Grad([]*Tensor{M}, []*Tensor{x, u}, GradOpts{AllowUnused: true}))
	out := [][]float64{vals(t, y), vals(t, g)}
	for _, d := range gg {
		if d == nil { // max-pool is piecewise linear in x: d²/dx² is zero, unused by autograd
			out = append(out, nil)
			continue
		}
		out = append(out, vals(t, d))
	}
	return out
}

func TestMaxPool2x2MatchesMaxPool2d(t *testing.T) {
	scoped(t)
	reference := func(x *Tensor) (*Tensor, error) { return MaxPool2d(x, PoolOpts{Kernel: [2]int64{2, 2}}) }
	for _, tc := range []struct {
		name    string
		dtype   DType
		withNaN bool
		shape   []int64
	}{
		{"float64 even", Double, false, []int64{3, 4, 8, 6}},
		{"float64 odd sizes", Double, false, []int64{2, 3, 7, 9}},
		{"float64 NaN", Double, true, []int64{2, 2, 6, 6}},
		{"float32 even", Float, false, []int64{5, 6, 24, 24}},
		{"float32 odd NaN", Float, true, []int64{2, 3, 5, 3}},
		{"float32 signed zeros", Float, false, []int64{2, 3, 28, 28}},
		{"float64 signed zeros", Double, false, []int64{2, 3, 10, 10}},
		// float32 rows go four windows at a time, the last four ending at the row's end.
		{"float32 rows of 5 NaN", Float, true, []int64{3, 4, 10, 11}},
		{"float32 rows of 7", Float, false, []int64{2, 3, 9, 14}},
		// Rows of more windows than the kernel gathers winners for at once (1024).
		{"float32 long rows NaN", Float, true, []int64{1, 2, 5, 2*1100 + 1}},
		{"float64 long rows", Double, false, []int64{2, 1, 4, 2 * 2049}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := NewScope()
			defer sc.Close()
			need := tensors(t)
			x := need(tiedInput(t, 1, tc.withNaN, tc.shape...).ToDType(tc.dtype))
			if strings.HasSuffix(tc.name, "signed zeros") {
				x = need(signedZeros(t, 4, tc.shape...).ToDType(tc.dtype))
			}
			outShape := []int64{tc.shape[0], tc.shape[1], tc.shape[2] / 2, tc.shape[3] / 2}
			u := need(randnT(t, newRNG(2), outShape...).ToDType(tc.dtype))
			v := need(randnT(t, newRNG(3), tc.shape...).ToDType(tc.dtype))
			want := poolDerivatives(t, reference, x, u, v)
			got := poolDerivatives(t, MaxPool2x2, x, u, v)
			for i, name := range []string{"values", "gradient", "d²/dx²", "d²/du dx"} {
				if (want[i] == nil) != (got[i] == nil) {
					t.Fatalf("%s: max_pool2d gives %v, MaxPool2x2 gives %v (nil = unused)", name, want[i] == nil, got[i] == nil)
				}
				if !sameBits(want[i], got[i]) {
					t.Errorf("%s differ from max_pool2d's: max |Δ| %g", name, maxAbsDiff(want[i], got[i]))
				}
			}
			// Without a graph the kernel skips the winners; the values must not change.
			ok(t, NoGrad(func() error {
				y, err := MaxPool2x2(x)
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

func TestMaxPool2x2Fallbacks(t *testing.T) {
	scoped(t)
	need := tensors(t)
	// 3-D (C, H, W) and integer inputs are not the kernel's: max_pool2d handles them.
	x := need(randnT(t, newRNG(4), 2, 6, 4).ToDType(Float))
	got := need(MaxPool2x2(x))
	want := need(MaxPool2d(x, PoolOpts{Kernel: [2]int64{2, 2}}))
	if !shapeEq(got.Shape(), want.Shape()) || !sameBits(vals(t, got), vals(t, want)) {
		t.Errorf("3-D input: got %v, want max_pool2d's %v", got.Shape(), want.Shape())
	}
	// A plane smaller than one window is max_pool2d's error, not a crash.
	small := need(randnT(t, newRNG(5), 1, 1, 1, 4).ToDType(Float))
	if _, err := MaxPool2x2(small); err == nil {
		t.Error("1×4 plane: no error")
	} else {
		t.Logf("as expected: %v", err)
	}
	if _, err := MaxPool2x2(nil); err == nil {
		t.Error("nil tensor: no error")
	}
}
