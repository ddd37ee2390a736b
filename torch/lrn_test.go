package torch

// lrn_test.go: LocalResponseNormDirect against LocalResponseNorm (the composite, whose
// derivatives are autograd's): values, the gradient without a graph (the one-pass
// backward), the gradient with one and the second derivatives through it (the
// differentiable form), float32 and float64, odd sizes, windows wider than the channels,
// β other than 0.75, NaN; the fallbacks.

import (
	"math"
	"testing"
)

// lrnCase is one LRN setting. alpha is large in most cases: with AlexCifarNet's 0.001/9
// the window term is too small for a wrong one to show.
type lrnCase struct {
	name                 string
	dtype                DType
	shape                []int64
	size                 int64
	alpha, beta, k       float64
	withNaN              bool
	rtolFloat, rtolGrad2 float64
}

// closeRel says whether got is want within rtol of max(1, |want|), NaN where want has NaN.
func closeRel(want, got []float64, rtol float64) (bool, float64) {
	if len(want) != len(got) {
		return false, math.Inf(1)
	}
	worst := 0.0
	for i := range want {
		if math.IsNaN(want[i]) || math.IsNaN(got[i]) {
			if math.IsNaN(want[i]) != math.IsNaN(got[i]) {
				return false, math.Inf(1)
			}
			continue
		}
		worst = max(worst, math.Abs(want[i]-got[i])/max(1, math.Abs(want[i])))
	}
	return worst <= rtol, worst
}

func TestLocalResponseNormDirectMatchesComposite(t *testing.T) {
	scoped(t)
	for _, tc := range []lrnCase{
		{"alexnet settings float32", Float, []int64{3, 64, 8, 8}, 4, 0.001 / 9, 0.75, 1, false, 2e-6, 1e-4},
		{"alexnet settings float64", Double, []int64{2, 64, 5, 5}, 4, 0.001 / 9, 0.75, 1, false, 1e-13, 1e-11},
		{"strong window float64", Double, []int64{2, 5, 3, 7}, 4, 0.7, 0.75, 1, false, 1e-13, 1e-11},
		{"strong window float32", Float, []int64{2, 9, 4, 5}, 4, 0.7, 0.75, 2, false, 2e-6, 1e-4},
		{"size 1", Double, []int64{1, 3, 2, 2}, 1, 0.5, 0.75, 1, false, 1e-13, 1e-11},
		{"size 3 beta 0.5", Double, []int64{2, 6, 3, 3}, 3, 0.9, 0.5, 1.5, false, 1e-13, 1e-11},
		{"size 7 over 5 channels beta 1.3", Double, []int64{2, 5, 1, 3}, 7, 0.6, 1.3, 1, false, 1e-13, 1e-11},
		{"size 2 one channel", Float, []int64{3, 1, 5, 1}, 2, 0.8, 0.75, 1, false, 2e-6, 1e-4},
		{"NaN float64", Double, []int64{2, 7, 4, 4}, 4, 0.7, 0.75, 1, true, 1e-13, 1e-11},
		{"NaN float32", Float, []int64{2, 7, 4, 4}, 4, 0.7, 0.75, 1, true, 2e-6, 1e-4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := NewScope()
			defer sc.Close()
			need := tensors(t)
			rng := newRNG(11)
			xv := make([]float64, numel(tc.shape))
			for i := range xv {
				xv[i] = 2 * rng.NormFloat64()
				if tc.withNaN && rng.IntN(40) == 0 {
					xv[i] = math.NaN()
				}
			}
			x := need(f64T(t, xv, tc.shape...).ToDType(tc.dtype))
			u := need(randnT(t, newRNG(12), tc.shape...).ToDType(tc.dtype))
			v := need(randnT(t, newRNG(13), tc.shape...).ToDType(tc.dtype))
			ref := func(x *Tensor) (*Tensor, error) { return LocalResponseNorm(x, tc.size, tc.alpha, tc.beta, tc.k) }
			direct := func(x *Tensor) (*Tensor, error) {
				return LocalResponseNormDirect(x, tc.size, tc.alpha, tc.beta, tc.k)
			}
			// Values, the gradient with a graph and the two second derivatives.
			want := poolDerivatives(t, ref, x, u, v)
			got := poolDerivatives(t, direct, x, u, v)
			for i, name := range []string{"values", "gradient (graph)", "d²/dx²", "d²/du dx"} {
				rtol := tc.rtolFloat
				if i >= 2 {
					rtol = tc.rtolGrad2
				}
				if ok, worst := closeRel(want[i], got[i], rtol); !ok {
					t.Errorf("%s differ from the composite's: worst relative %g (tolerance %g)", name, worst, rtol)
				}
			}
			// The gradient without a graph: the one-pass backward.
			if ok, worst := closeRel(want[1], lrnGradient(t, direct, x, u), tc.rtolFloat); !ok {
				t.Errorf("gradient (one pass) differs from the composite's: worst relative %g", worst)
			}
			// Values without a graph.
			ok(t, NoGrad(func() error {
				y, err := direct(x)
				if err != nil {
					return err
				}
				if good, worst := closeRel(want[0], vals(t, y), tc.rtolFloat); !good {
					t.Errorf("values without a graph: worst relative %g", worst)
				}
				return nil
			}))
		})
	}
}

// ReluLocalResponseNormDirect is LocalResponseNorm(Relu(x)): with a graph (a ReLU op, then
// the LRN) and without (the ReLU read in the LRN's pass), NaN and zeros included.
func TestReluLocalResponseNormDirect(t *testing.T) {
	scoped(t)
	for _, dtype := range []DType{Float, Double} {
		sc := NewScope()
		need := tensors(t)
		shape := []int64{3, 7, 4, 5}
		rng := newRNG(21)
		xv := make([]float64, numel(shape))
		for i := range xv {
			switch rng.IntN(20) {
			case 0:
				xv[i] = math.NaN()
			case 1:
				xv[i] = 0
			default:
				xv[i] = 2 * rng.NormFloat64()
			}
		}
		x := need(f64T(t, xv, shape...).ToDType(dtype))
		u := need(randnT(t, newRNG(22), shape...).ToDType(dtype))
		v := need(randnT(t, newRNG(23), shape...).ToDType(dtype))
		ref := func(x *Tensor) (*Tensor, error) {
			r, err := x.Relu()
			if err != nil {
				return nil, err
			}
			return LocalResponseNorm(r, 4, 0.7, 0.75, 1)
		}
		fused := func(x *Tensor) (*Tensor, error) { return ReluLocalResponseNormDirect(x, 4, 0.7, 0.75, 1) }
		rtol := map[DType]float64{Float: 2e-6, Double: 1e-13}[dtype]
		want := poolDerivatives(t, ref, x, u, v)
		got := poolDerivatives(t, fused, x, u, v)
		for i, name := range []string{"values", "gradient (graph)", "d²/dx²", "d²/du dx"} {
			if (want[i] == nil) != (got[i] == nil) {
				t.Fatalf("%v %s: composite's nil %v, fused %v", dtype, name, want[i] == nil, got[i] == nil)
			}
			if good, worst := closeRel(want[i], got[i], 100*rtol); !good {
				t.Errorf("%v %s differ: worst relative %g", dtype, name, worst)
			}
		}
		if good, worst := closeRel(want[1], lrnGradient(t, fused, x, u), rtol); !good {
			t.Errorf("%v gradient (one pass): worst relative %g", dtype, worst)
		}
		ok(t, NoGrad(func() error {
			y, err := fused(x)
			if err != nil {
				return err
			}
			if good, worst := closeRel(want[0], vals(t, y), rtol); !good {
				t.Errorf("%v values without a graph (fused ReLU): worst relative %g", dtype, worst)
			}
			return nil
		}))
		sc.Close()
	}
}

// lrnGradient is d(Σ u·f(x))/dx without a graph.
func lrnGradient(t *testing.T, f func(*Tensor) (*Tensor, error), x, u *Tensor) []float64 {
	t.Helper()
	nt := tensors(t)
	x = nt(x.Detach())
	ok(t, x.SetRequiresGrad(true))
	L := nt(nt(nt(f(x)).Mul(u)).Sum())
	return vals(t, need[[]*Tensor](t)(Grad([]*Tensor{L}, []*Tensor{x}, GradOpts{}))[0])
}

// The one-pass backward in float64 against central finite differences of the forward.
func TestLocalResponseNormDirectFiniteDifferences(t *testing.T) {
	scoped(t)
	need := tensors(t)
	shape := []int64{2, 5, 2, 3}
	x := randnT(t, newRNG(14), shape...)
	u := randnT(t, newRNG(15), shape...)
	f := func(x *Tensor) (*Tensor, error) { return LocalResponseNormDirect(x, 4, 0.7, 0.75, 1) }
	g := lrnGradient(t, f, x, u)
	xv, uv := vals(t, x), vals(t, u)
	loss := func(xv []float64) float64 {
		y := vals(t, need(f(f64T(t, xv, shape...))))
		s := 0.0
		for i := range y {
			s += y[i] * uv[i]
		}
		return s
	}
	const h = 1e-6
	for i := range xv {
		p, m := append([]float64(nil), xv...), append([]float64(nil), xv...)
		p[i] += h
		m[i] -= h
		if fd := (loss(p) - loss(m)) / (2 * h); math.Abs(fd-g[i]) > 1e-7*max(1, math.Abs(fd)) {
			t.Fatalf("element %d: gradient %g, finite difference %g", i, g[i], fd)
		}
	}
}

func TestLocalResponseNormDirectFallbacks(t *testing.T) {
	scoped(t)
	need := tensors(t)
	// 3-D, 5-D and non-contiguous input run the composite: the same bits.
	x3 := need(randnT(t, newRNG(16), 4, 6, 5).ToDType(Float))
	x5 := need(randnT(t, newRNG(17), 2, 6, 2, 3, 2).ToDType(Float))
	xt := need(need(randnT(t, newRNG(18), 2, 6, 4, 5).ToDType(Float)).Transpose(2, 3))
	for _, x := range []*Tensor{x3, x5, xt} {
		got := need(LocalResponseNormDirect(x, 4, 0.7, 0.75, 1))
		want := need(LocalResponseNorm(x, 4, 0.7, 0.75, 1))
		if !shapeEq(got.Shape(), want.Shape()) || !sameBits(vals(t, got), vals(t, want)) {
			t.Errorf("input %v: not the composite's result", x.Shape())
		}
	}
	// Bad arguments are errors, not crashes.
	x := need(randnT(t, newRNG(19), 1, 3, 2, 2).ToDType(Float))
	if _, err := LocalResponseNormDirect(x, 0, 0.7, 0.75, 1); err == nil {
		t.Error("size 0: no error")
	}
	if _, err := LocalResponseNormDirect(need(randnT(t, newRNG(20), 4, 4).ToDType(Float)), 4, 0.7, 0.75, 1); err == nil {
		t.Error("2-D input: no error")
	}
	if _, err := LocalResponseNormDirect(nil, 4, 0.7, 0.75, 1); err == nil {
		t.Error("nil tensor: no error")
	}
}

// The LRN's loops give the same bits on the baseline ISA and with AVX2 (where the CPU has
// it): values, the fused ReLU and the one-pass gradient, float32 and float64, NaN.
func TestLocalResponseNormDirectSameBitsOnEveryISA(t *testing.T) {
	scoped(t)
	if simdISA() == "baseline" {
		t.Log("this CPU runs the baseline loops only: the comparison is of one ISA with itself")
	}
	t.Cleanup(func() { _ = setSIMDISA("best") })
	if err := setSIMDISA("avx512"); err == nil {
		t.Error("an unknown mode is accepted")
	}
	need := tensors(t)
	for _, dtype := range []DType{Float, Double} {
		shape := []int64{2, 9, 5, 7}
		rng := newRNG(24)
		xv := make([]float64, numel(shape))
		for i := range xv {
			xv[i] = 3 * rng.NormFloat64()
			if rng.IntN(50) == 0 {
				xv[i] = math.NaN()
			}
		}
		x := need(f64T(t, xv, shape...).ToDType(dtype))
		u := need(randnT(t, newRNG(25), shape...).ToDType(dtype))
		run := func(mode string) [][]float64 {
			ok(t, setSIMDISA(mode))
			var out [][]float64
			for _, f := range []func(*Tensor, int64, float64, float64, float64) (*Tensor, error){LocalResponseNormDirect, ReluLocalResponseNormDirect} {
				ok(t, NoGrad(func() error {
					y, err := f(x, 4, 0.7, 0.75, 1)
					if err != nil {
						return err
					}
					out = append(out, vals(t, y))
					return nil
				}))
				out = append(out, lrnGradient(t, func(x *Tensor) (*Tensor, error) { return f(x, 3, 0.9, 0.6, 2) }, x, u))
			}
			return out
		}
		base, best := run("baseline"), run("best")
		for i := range base {
			if !sameBits(base[i], best[i]) {
				t.Errorf("%v output %d: baseline and %s loops differ: max |Δ| %g", dtype, i, simdISA(), maxAbsDiff(base[i], best[i]))
			}
		}
	}
}
