package torch

// convblock_test.go: ConvNormReluPool against the four ops it stands for (Conv2d, GroupNorm
// with one group per channel, Relu, AvgPool2d 2×2): the fused loops' values (the per-image
// convolution for few input channels, libtorch's convolution then the per-plane loop for
// more), float32 and float64, odd planes, rows longer than a register chunk, NaN, constant
// planes; their first-order gradients and the second-order ones of the differentiable
// backward, against the four ops' and finite differences; one and two threads and every ISA
// the same bits; fallbacks; bad arguments as errors.

import (
	"fmt"
	"math"
	"runtime"
	"testing"
)

type blockCase struct {
	name   string
	dtype  DType
	x, w   []int64 // input (N, Cin, H, W) and weight (C, Cin, kh, kw) shapes
	pad    [2]int64
	bias   bool
	nanAt  int // every nanAt-th input value is NaN (0: none)
	consts bool
	rtol   float64
}

func blockCases() []blockCase {
	return []blockCase{
		{"MNIST first block float32", Float, []int64{5, 1, 28, 28}, []int64{12, 1, 3, 3}, [2]int64{3, 3}, true, 0, false, 2e-6},
		{"MNIST first block float64", Double, []int64{3, 1, 28, 28}, []int64{7, 1, 3, 3}, [2]int64{3, 3}, true, 0, false, 1e-12},
		{"CIFAR first block float32", Float, []int64{3, 3, 32, 32}, []int64{10, 3, 3, 3}, [2]int64{1, 1}, true, 0, false, 2e-6},
		{"many channels: libtorch's convolution float32", Float, []int64{4, 9, 8, 8}, []int64{6, 9, 3, 3}, [2]int64{1, 1}, true, 0, false, 2e-6},
		{"many channels float64", Double, []int64{2, 16, 7, 9}, []int64{5, 16, 3, 3}, [2]int64{1, 1}, false, 0, false, 1e-12},
		{"odd planes, 2×3 kernel, no bias float64", Double, []int64{3, 2, 9, 11}, []int64{5, 2, 2, 3}, [2]int64{0, 1}, false, 0, false, 1e-12},
		{"long rows float32", Float, []int64{2, 1, 6, 70}, []int64{4, 1, 3, 3}, [2]int64{1, 1}, true, 0, false, 2e-6},
		{"NaN float32", Float, []int64{4, 1, 10, 10}, []int64{3, 1, 3, 3}, [2]int64{1, 1}, true, 37, false, 2e-6},
		{"NaN, many channels float64", Double, []int64{3, 6, 6, 6}, []int64{4, 6, 3, 3}, [2]int64{1, 1}, true, 53, false, 1e-12},
		{"constant planes float32", Float, []int64{2, 1, 8, 8}, []int64{3, 1, 3, 3}, [2]int64{1, 1}, true, 0, true, 2e-6},
	}
}

// blockInputs are x, w, bias (nil without), γ and β of a case: γ around 1 and β around 0
// but neither exactly, so that both count.
func blockInputs(t *testing.T, c blockCase, seed uint64) (x, w, bias, gamma, beta *Tensor) {
	need := tensors(t)
	rng := newRNG(seed)
	xv := make([]float64, numel(c.x))
	for i := range xv {
		switch {
		case c.consts:
			xv[i] = 0.5
		case c.nanAt > 0 && i%c.nanAt == c.nanAt-1:
			xv[i] = math.NaN()
		default:
			xv[i] = rng.NormFloat64()
		}
	}
	x = need(f64T(t, xv, c.x...).ToDType(c.dtype))
	w = need(randnT(t, rng, c.w...).ToDType(c.dtype))
	if c.consts { // every output plane constant: variance 0
		w = need(w.MulScalar(0))
	}
	if c.bias {
		bias = need(randnT(t, rng, c.w[0]).ToDType(c.dtype))
	}
	gamma = need(uniformT(t, rng, 0.5, 1.5, c.w[0]).ToDType(c.dtype))
	beta = need(uniformT(t, rng, -0.5, 0.5, c.w[0]).ToDType(c.dtype))
	return x, w, bias, gamma, beta
}

// composedBlock is what ConvNormReluPool stands for.
func composedBlock(x, w, bias *Tensor, pad [2]int64, gamma, beta *Tensor, eps float64) (*Tensor, error) {
	var c Chain
	y := c.T(Conv2d(x, w, bias, Conv2dOpts{Padding: pad}))
	if c.Err() != nil {
		return nil, c.Err()
	}
	y = c.T(GroupNorm(y, w.Shape()[0], gamma, beta, eps))
	y = c.T(y.Relu())
	y = c.T(AvgPool2d(y, PoolOpts{Kernel: [2]int64{2, 2}}))
	return y, c.Err()
}

func fusedBlockValues(t *testing.T, x, w, bias *Tensor, pad [2]int64, gamma, beta *Tensor) []float64 {
	var out []float64
	ok(t, NoGrad(func() error {
		y, err := ConvNormReluPool(x, w, bias, pad, gamma, beta, 1e-5)
		if err != nil {
			return err
		}
		out = vals(t, y)
		return nil
	}))
	return out
}

func TestConvNormReluPoolMatchesComposition(t *testing.T) {
	scoped(t)
	for _, c := range blockCases() {
		t.Run(c.name, func(t *testing.T) {
			sc := NewScope()
			defer sc.Close()
			x, w, bias, gamma, beta := blockInputs(t, c, 31)
			want := tensors(t)(composedBlock(x, w, bias, c.pad, gamma, beta, 1e-5))
			wantV := vals(t, want)
			got := fusedBlockValues(t, x, w, bias, c.pad, gamma, beta)
			if good, worst := closeRel(wantV, got, c.rtol); !good {
				t.Errorf("not the composition's values: worst relative %g (tolerance %g)", worst, c.rtol)
			}
			if c.nanAt > 0 && !hasNaN(wantV) {
				t.Error("the NaN case has no NaN in the output")
			}
			if c.consts && maxAbs(wantV) == 0 {
				t.Error("the constant case gives zeros only: β is not tested")
			}
		})
	}
}

// blockDerivatives are a block's values, the first-order gradients of Σ y·u with respect to
// w, γ, β, the bias (when the case has one) and x (when withX), then, through a
// differentiable gradient, the gradients of Σ (∂/∂w Σ y·u)·v with respect to w, γ, β and x
// (when withX; nil where autograd finds no dependence).
func blockDerivatives(t *testing.T, f func(x, w, b *Tensor, pad [2]int64, g, be *Tensor, eps float64) (*Tensor, error),
	c blockCase, seed uint64, withX bool) [][]float64 {
	t.Helper()
	need := tensors(t)
	x, w, bias, gamma, beta := blockInputs(t, c, seed)
	wrt := []*Tensor{w, gamma, beta}
	if bias != nil {
		wrt = append(wrt, bias)
	}
	if withX {
		wrt = append(wrt, x)
	}
	for _, v := range wrt {
		ok(t, v.SetRequiresGrad(true))
	}
	y := need(f(x, w, bias, c.pad, gamma, beta, 1e-5))
	u := need(randnT(t, newRNG(seed+1), y.Shape()...).ToDType(c.dtype))
	loss := need(need(y.Mul(u)).Sum())
	out := [][]float64{vals(t, y)}
	first, err := Grad([]*Tensor{loss}, wrt, GradOpts{RetainGraph: true})
	ok(t, err)
	for _, g := range first {
		out = append(out, vals(t, g))
	}
	gw, err := Grad([]*Tensor{loss}, []*Tensor{w}, GradOpts{CreateGraph: true})
	ok(t, err)
	v := need(randnT(t, newRNG(seed+2), w.Shape()...).ToDType(c.dtype))
	m := need(need(gw[0].Mul(v)).Sum())
	second := []*Tensor{w, gamma, beta}
	if withX {
		second = append(second, x)
	}
	gg, err := Grad([]*Tensor{m}, second, GradOpts{AllowUnused: true})
	ok(t, err)
	for _, g := range gg {
		if g == nil {
			out = append(out, nil)
			continue
		}
		out = append(out, vals(t, g))
	}
	return out
}

// With a graph wanted the loops run forward and backward: values and first-order gradients
// within rounding of the four ops', whether or not x wants a gradient (images do not, DD's
// learnt images do); a differentiable backward is the four ops' own.
func TestConvNormReluPoolGradients(t *testing.T) {
	scoped(t)
	for _, i := range []int{1, 2, 4, 5, 8} {
		c := blockCases()[i]
		rtol := 1e-10
		if c.dtype == Float {
			rtol = 2e-4 // gradients sum thousands of float32 products in another order
		}
		for _, withX := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/x wants a gradient %v", c.name, withX), func(t *testing.T) {
				sc := NewScope()
				defer sc.Close()
				want := blockDerivatives(t, composedBlock, c, 71, withX)
				got := blockDerivatives(t, ConvNormReluPool, c, 71, withX)
				for k := range want {
					if (want[k] == nil) != (got[k] == nil) {
						t.Fatalf("output %d: nil %v, the four ops' nil %v", k, got[k] == nil, want[k] == nil)
					}
					if good, worst := closeRel(want[k], got[k], rtol); !good {
						t.Errorf("output %d (values, first-order gradients, second-order): worst relative %g (tolerance %g)", k, worst, rtol)
					}
				}
			})
		}
	}
}

// The fused backward against finite differences of the fused forward, in float64.
func TestConvNormReluPoolFiniteDifferences(t *testing.T) {
	scoped(t)
	for _, c := range []blockCase{
		{"few channels", Double, []int64{2, 2, 5, 6}, []int64{3, 2, 3, 3}, [2]int64{1, 1}, true, 0, false, 0},
		{"many channels", Double, []int64{2, 6, 4, 5}, []int64{3, 6, 3, 3}, [2]int64{1, 1}, true, 0, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			x, w, bias, gamma, beta := blockInputs(t, c, 81)
			gradCheck(t, func(in []*Tensor) (*Tensor, error) {
				return ConvNormReluPool(in[0], in[1], in[2], c.pad, in[3], in[4], 1e-5)
			}, x, w, bias, gamma, beta)
		})
	}
}

// fusedBlockGradients are the fused backward's gradients of Σ y·u (u fixed) with respect to
// x, w, γ, β and the bias (when not nil).
func fusedBlockGradients(t *testing.T, x, w, bias *Tensor, pad [2]int64, gamma, beta *Tensor) [][]float64 {
	need := tensors(t)
	in := []*Tensor{need(x.Detach()), need(w.Detach()), need(gamma.Detach()), need(beta.Detach())}
	var b *Tensor
	if bias != nil {
		b = need(bias.Detach())
		in = append(in, b)
	}
	for _, v := range in {
		ok(t, v.SetRequiresGrad(true))
	}
	y := need(ConvNormReluPool(in[0], in[1], b, pad, in[2], in[3], 1e-5))
	u := need(randnT(t, newRNG(5), y.Shape()...).ToDType(x.DType()))
	g, err := Grad([]*Tensor{need(need(y.Mul(u)).Sum())}, in, GradOpts{})
	ok(t, err)
	var out [][]float64
	for _, v := range g {
		out = append(out, vals(t, v))
	}
	return out
}

// One thread or two, baseline loops or AVX2: the same bits, values and gradients.
func TestConvNormReluPoolSameBitsEverywhere(t *testing.T) {
	scoped(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	threads := NumThreads()
	t.Cleanup(func() { _ = setSIMDISA("best"); _ = SetNumThreads(threads) })
	for _, i := range []int{0, 3, 5, 7} {
		c := blockCases()[i]
		c.x[0] = 9 // several images and planes per thread
		t.Run(c.name, func(t *testing.T) {
			sc := NewScope()
			defer sc.Close()
			x, w, bias, gamma, beta := blockInputs(t, c, 51)
			var runs [][]float64
			var names []string
			for _, isa := range []string{"baseline", "best"} {
				for _, n := range []int{1, 2} {
					ok(t, setSIMDISA(isa))
					ok(t, SetNumThreads(n))
					runs = append(runs, fusedBlockValues(t, x, w, bias, c.pad, gamma, beta))
					names = append(names, fmt.Sprintf("%s loops, %d thread(s), values", isa, n))
					for k, g := range fusedBlockGradients(t, x, w, bias, c.pad, gamma, beta) {
						if k < 2 && c.x[1] > 4 {
							// x's and w's: libtorch's convolution backward, as in the four ops
							g = nil
						}
						runs = append(runs, g)
						names = append(names, fmt.Sprintf("%s loops, %d thread(s), gradient %d", isa, n, k))
					}
				}
			}
			per := len(runs) / 4 // values and gradients of one run
			for i := per; i < len(runs); i++ {
				if !sameBits(runs[i%per], runs[i]) {
					t.Errorf("%s differs from %s: max |Δ| %g", names[i], names[i%per], maxAbsDiff(runs[i%per], runs[i]))
				}
			}
		})
	}
}

func TestConvNormReluPoolFallbacksAndErrors(t *testing.T) {
	scoped(t)
	need := tensors(t)
	c := blockCases()[0]
	x, w, bias, gamma, beta := blockInputs(t, c, 61)
	// Non-contiguous input runs the four ops: their bits.
	xt := need(need(x.Transpose(2, 3)).Contiguous())
	xt = need(xt.Transpose(2, 3)) // the same values, transposed strides
	var got, want []float64
	ok(t, NoGrad(func() error {
		got = vals(t, need(ConvNormReluPool(xt, w, bias, c.pad, gamma, beta, 1e-5)))
		want = vals(t, need(composedBlock(xt, w, bias, c.pad, gamma, beta, 1e-5)))
		return nil
	}))
	if !sameBits(got, want) {
		t.Errorf("non-contiguous input: not the four ops' values (max |Δ| %g)", maxAbsDiff(got, want))
	}
	bad := []struct {
		name string
		f    func() (*Tensor, error)
	}{
		{"nil γ", func() (*Tensor, error) { return ConvNormReluPool(x, w, bias, c.pad, nil, beta, 1e-5) }},
		{"γ of the wrong size", func() (*Tensor, error) {
			return ConvNormReluPool(x, w, bias, c.pad, need(gamma.Narrow(0, 0, 5)), beta, 1e-5)
		}},
		{"weight of other input channels", func() (*Tensor, error) {
			return ConvNormReluPool(x, need(randnT(t, newRNG(62), 12, 2, 3, 3).ToDType(Float)), bias, c.pad, gamma, beta, 1e-5)
		}},
		{"3-D input", func() (*Tensor, error) {
			return ConvNormReluPool(need(x.Reshape(5, 28, 28)), w, bias, c.pad, gamma, beta, 1e-5)
		}},
		{"an output smaller than one window", func() (*Tensor, error) {
			return ConvNormReluPool(need(x.Narrow(2, 0, 1)), w, bias, [2]int64{0, 0}, gamma, beta, 1e-5)
		}},
		{"negative eps", func() (*Tensor, error) { return ConvNormReluPool(x, w, bias, c.pad, gamma, beta, -1) }},
		{"float64 γ with float32 input", func() (*Tensor, error) {
			return ConvNormReluPool(x, w, bias, c.pad, need(gamma.ToDType(Double)), beta, 1e-5)
		}},
	}
	for _, b := range bad {
		ok(t, NoGrad(func() error {
			if _, err := b.f(); err == nil {
				t.Errorf("%s: no error", b.name)
			} else {
				t.Logf("%s: %v", b.name, err)
			}
			return nil
		}))
	}
}
