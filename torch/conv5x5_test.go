package torch

// conv5x5_test.go: Conv2dDirect (the shim's direct 5×5 kernels, torch/csrc/kernels/conv5x5.cc)
// against libtorch's conv2d: values, first- and second-order derivatives within the rounding
// bound of a sum in another order, float32 and float64, odd sizes, asymmetric padding, NaN;
// the same bits on AVX2 and AVX-512 and for one and two threads; the fallbacks. The
// finite-difference checks, first and second order, are in gradcheck_test.go.

import (
	"fmt"
	"math"
	"runtime"
	"testing"
)

// needDirectConv skips t when the CPU has no direct kernels (no AVX2 and FMA, or not x86-64):
// Conv2dDirect is then Conv2d itself, which TestConv2dDirectFallbacks covers.
func needDirectConv(t *testing.T) {
	t.Helper()
	if DirectConvISA() == "" {
		t.Skip("no direct convolution kernels on this CPU")
	}
}

// withDirectConv runs f with the direct kernels set to mode, then restores the default.
func withDirectConv(t *testing.T, mode string, f func()) {
	t.Helper()
	ok(t, SetDirectConv(mode))
	defer func() { ok(t, SetDirectConv("best")) }()
	f()
}

type convCase struct {
	name     string
	dtype    DType
	x, w     []int64
	pad      [2]int64
	bias     bool
	nanEvery int // one input element in nanEvery is NaN (0: none)
}

func convCases() []convCase {
	return []convCase{
		{"lenet1 float32", Float, []int64{3, 1, 28, 28}, []int64{6, 1, 5, 5}, [2]int64{2, 2}, true, 0},
		{"lenet2 float32", Float, []int64{3, 6, 14, 14}, []int64{16, 6, 5, 5}, [2]int64{0, 0}, true, 0},
		{"lenet1 32×32 float64", Double, []int64{2, 1, 32, 32}, []int64{6, 1, 5, 5}, [2]int64{0, 0}, true, 0},
		{"lenet2 float64", Double, []int64{2, 6, 14, 14}, []int64{16, 6, 5, 5}, [2]int64{0, 0}, true, 0},
		{"odd sizes float64", Double, []int64{3, 3, 9, 7}, []int64{5, 3, 5, 5}, [2]int64{1, 3}, true, 0},
		{"odd sizes float32 no bias", Float, []int64{11, 2, 5, 13}, []int64{7, 2, 5, 5}, [2]int64{4, 0}, false, 0},
		{"one output position", Double, []int64{2, 4, 5, 5}, []int64{3, 4, 5, 5}, [2]int64{0, 0}, true, 0},
		{"16 channels float32", Float, []int64{9, 16, 6, 10}, []int64{16, 16, 5, 5}, [2]int64{2, 1}, true, 0},
		{"alexnet1 float32", Float, []int64{2, 3, 32, 32}, []int64{64, 3, 5, 5}, [2]int64{2, 2}, true, 0},
		{"40 output channels float64", Double, []int64{2, 3, 11, 9}, []int64{40, 3, 5, 5}, [2]int64{1, 2}, true, 0},
		{"NaN float32", Float, []int64{2, 2, 12, 12}, []int64{3, 2, 5, 5}, [2]int64{2, 2}, true, 40},
		{"NaN float64", Double, []int64{2, 1, 10, 9}, []int64{4, 1, 5, 5}, [2]int64{1, 2}, true, 30},
	}
}

// convInputs returns x, w, bias (nil without) for c, and the output gradients u (for the
// first order) and v (for the second: one per input of the first-order gradient).
func convInputs(t *testing.T, c convCase, seed uint64) (x, w, bias *Tensor) {
	t.Helper()
	need := tensors(t)
	rng := newRNG(seed)
	xv := make([]float64, numel(c.x))
	for i := range xv {
		xv[i] = rng.NormFloat64()
		if c.nanEvery > 0 && rng.IntN(c.nanEvery) == 0 {
			xv[i] = math.NaN()
		}
	}
	x = need(f64T(t, xv, c.x...).ToDType(c.dtype))
	w = need(randnT(t, rng, c.w...).ToDType(c.dtype))
	if c.bias {
		bias = need(randnT(t, rng, c.w[0]).ToDType(c.dtype))
	}
	return x, w, bias
}

// convDerivatives returns, for conv at (x, w, bias): y, the gradient of L = Σ y·u with
// respect to (x, w, bias), and the gradient of M = Σ_i Σ g_i·v_i with respect to
// (x, w, bias, u) (nil where unused): every derivative a second-order method takes.
func convDerivatives(t *testing.T, conv func(x, w, b *Tensor, o Conv2dOpts) (*Tensor, error), c convCase, x, w, bias *Tensor) [][]float64 {
	t.Helper()
	nt := tensors(t)
	leaf := func(a *Tensor) *Tensor {
		if a == nil {
			return nil
		}
		l := nt(a.Detach())
		ok(t, l.SetRequiresGrad(true))
		return l
	}
	x, w, bias = leaf(x), leaf(w), leaf(bias)
	opts := Conv2dOpts{Padding: c.pad}
	y := nt(conv(x, w, bias, opts))
	u := leaf(nt(randnT(t, newRNG(91), y.Shape()...).ToDType(c.dtype)))
	in := []*Tensor{x, w}
	if bias != nil {
		in = append(in, bias)
	}
	L := nt(nt(y.Mul(u)).Sum())
	g := need[[]*Tensor](t)(Grad([]*Tensor{L}, in, GradOpts{CreateGraph: true}))
	M := nt(Zeros([]int64{}, WithDType(c.dtype)))
	for i, gi := range g {
		v := nt(randnT(t, newRNG(100+uint64(i)), gi.Shape()...).ToDType(c.dtype))
		M = nt(M.Add(nt(nt(gi.Mul(v)).Sum())))
	}
	gg := need[[]*Tensor](t)(Grad([]*Tensor{M}, append(in, u), GradOpts{AllowUnused: true}))
	out := [][]float64{vals(t, y)}
	for _, d := range append(g, gg...) {
		if d == nil {
			out = append(out, nil)
			continue
		}
		out = append(out, vals(t, d))
	}
	return out
}

// withinRounding reports the first index where got and want differ by more than the
// rounding bound of their sums, or −1: |got − want| ≤ 2·n·u·scale, with n the number of terms
// of each sum, u the unit roundoff of the dtype and scale the sum of the terms' magnitudes,
// bounded here by max|got| + max|want| + 1 (every derivative here is a sum of products of
// O(1) normal values). NaN must match NaN.
func withinRounding(got, want []float64, terms int, dtype DType) int {
	u := 0x1p-24
	if dtype == Double {
		u = 0x1p-53
	}
	scale := maxFinite(got) + maxFinite(want) + 1
	bound := 2 * float64(terms) * u * scale
	for i := range want {
		if math.IsNaN(want[i]) != math.IsNaN(got[i]) {
			return i
		}
		if !math.IsNaN(want[i]) && !(math.Abs(got[i]-want[i]) <= bound) {
			return i
		}
	}
	return -1
}

func TestConv2dDirectMatchesConv2d(t *testing.T) {
	needDirectConv(t)
	scoped(t)
	for _, c := range convCases() {
		t.Run(c.name, func(t *testing.T) {
			sc := NewScope()
			defer sc.Close()
			x, w, bias := convInputs(t, c, 7)
			want := convDerivatives(t, Conv2d, c, x, w, bias)
			got := convDerivatives(t, Conv2dDirect, c, x, w, bias)
			if len(got) != len(want) {
				t.Fatalf("%d derivatives, conv2d gives %d", len(got), len(want))
			}
			// The longest sum behind any of the values: a weight gradient's, over the batch and
			// the output positions (at most the padded input's), or an output's over cin·25 taps.
			terms := int(c.x[0]*(c.x[2]+2*c.pad[0])*(c.x[3]+2*c.pad[1])) + int(c.x[1]*c.w[0]*25)
			names := []string{"values", "d/dx", "d/dw", "d/db", "d²/dx", "d²/dw", "d²/db", "d²/du"}
			if !c.bias {
				names = []string{"values", "d/dx", "d/dw", "d²/dx", "d²/dw", "d²/du"}
			}
			checked := 0
			for i := range want {
				name := names[i]
				if (want[i] == nil) != (got[i] == nil) {
					t.Errorf("%s: conv2d's is nil: %v, Conv2dDirect's: %v", name, want[i] == nil, got[i] == nil)
					continue
				}
				if want[i] == nil {
					continue
				}
				if j := withinRounding(got[i], want[i], terms, c.dtype); j >= 0 {
					t.Errorf("%s differ from conv2d's at %d: %g against %g (max |Δ| %g)", name, j, got[i][j], want[i][j], maxAbsDiff(got[i], want[i]))
				}
				checked++
			}
			if c.nanEvery > 0 && !hasNaN(want[0]) {
				t.Error("the NaN case has no NaN in conv2d's output")
			}
			if checked < 6 {
				t.Errorf("only %d derivatives compared", checked)
			}
		})
	}
}

// maxFinite is the largest magnitude among the finite entries of v.
func maxFinite(v []float64) float64 {
	m := 0.0
	for _, e := range v {
		if !math.IsNaN(e) && !math.IsInf(e, 0) {
			m = math.Max(m, math.Abs(e))
		}
	}
	return m
}

func hasNaN(v []float64) bool {
	for _, e := range v {
		if math.IsNaN(e) {
			return true
		}
	}
	return false
}

// TestConv2dDirectSameBitsEverywhere: AVX2 and AVX-512 kernels, and one or two threads, give
// the same bits (the order of every sum is fixed by the lanes and the image chunks). The
// goroutine stays on one OS thread, as training loops keep it: libtorch's thread count is
// per OS thread, and so is the counter that orders autograd's nodes, which decides in which
// order the three contributions to d²/du (one per custom function) are added.
func TestConv2dDirectSameBitsEverywhere(t *testing.T) {
	needDirectConv(t)
	scoped(t)
	for _, c := range convCases() {
		t.Run(c.name, func(t *testing.T) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			threads := NumThreads()
			defer func() { ok(t, SetNumThreads(threads)) }()
			sc := NewScope()
			defer sc.Close()
			c.x[0] = 37 // several weight-gradient chunks and forward tasks
			x, w, bias := convInputs(t, c, 8)
			var ref [][]float64
			compare := func(what string) {
				got := convDerivatives(t, Conv2dDirect, c, x, w, bias)
				if ref == nil {
					ref = got
					return
				}
				for i := range ref {
					if !sameBits(got[i], ref[i]) {
						t.Errorf("%s: derivative %d differs (max |Δ| %g)", what, i, maxAbsDiff(got[i], ref[i]))
					}
				}
			}
			ok(t, SetNumThreads(1))
			compare("one thread")
			ok(t, SetNumThreads(2))
			compare("two threads")
			ok(t, SetNumThreads(1))
			if DirectConvISA() == "avx512" {
				withDirectConv(t, "avx2", func() { compare("AVX2 against AVX-512") })
			} else {
				t.Log("no AVX-512 on this CPU: AVX2 alone checked")
			}
		})
	}
}

func TestConv2dDirectFallbacks(t *testing.T) {
	scoped(t)
	need := tensors(t)
	rng := newRNG(11)
	x := need(randnT(t, rng, 2, 3, 9, 9).ToDType(Float))
	w5 := need(randnT(t, rng, 4, 3, 5, 5).ToDType(Float))
	w3 := need(randnT(t, rng, 4, 3, 3, 3).ToDType(Float))
	wide := need(randnT(t, rng, 65, 3, 5, 5).ToDType(Float))
	deep := need(randnT(t, rng, 2, 17, 9, 9).ToDType(Float))
	deepW := need(randnT(t, rng, 4, 17, 5, 5).ToDType(Float))
	for _, c := range []struct {
		name string
		x, w *Tensor
		o    Conv2dOpts
	}{
		{"3×3 kernel", x, w3, Conv2dOpts{Padding: [2]int64{1, 1}}},
		{"stride 2", x, w5, Conv2dOpts{Stride: [2]int64{2, 2}}},
		{"dilation 2", x, w5, Conv2dOpts{Dilation: [2]int64{2, 2}, Padding: [2]int64{4, 4}}},
		{"padding 5", x, w5, Conv2dOpts{Padding: [2]int64{5, 5}}},
		{"65 output channels", x, wide, Conv2dOpts{}},
		{"17 input channels", deep, deepW, Conv2dOpts{}},
		{"half precision", need(x.ToDType(Half)), need(w5.ToDType(Half)), Conv2dOpts{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			want, errWant := Conv2d(c.x, c.w, nil, c.o)
			got, errGot := Conv2dDirect(c.x, c.w, nil, c.o)
			if (errWant == nil) != (errGot == nil) {
				t.Fatalf("conv2d error %v, Conv2dDirect error %v", errWant, errGot)
			}
			if errWant != nil {
				return
			}
			need(want, nil)
			need(got, nil)
			if !shapeEq(got.Shape(), want.Shape()) || !sameBits(vals(t, got), vals(t, want)) {
				t.Errorf("not conv2d's result: shape %v, conv2d's %v", got.Shape(), want.Shape())
			}
			if c.x.DType() == Half {
				return // no half-precision max-pool on the CPU in libtorch 1.13
			}
			pooled := need(MaxPool2x2(want))
			fused := need(Conv2dMaxPool2x2(c.x, c.w, nil, c.o))
			if !shapeEq(fused.Shape(), pooled.Shape()) || !sameBits(vals(t, fused), vals(t, pooled)) {
				t.Errorf("Conv2dMaxPool2x2: not MaxPool2x2(Conv2d)'s result: shape %v, want %v", fused.Shape(), pooled.Shape())
			}
		})
	}
	// A 1×1 convolution output has no 2×2 window: an error, as from MaxPool2x2.
	one := need(randnT(t, rng, 2, 3, 5, 5).ToDType(Float))
	if _, err := Conv2dMaxPool2x2(one, w5, nil, Conv2dOpts{}); err == nil {
		t.Error("Conv2dMaxPool2x2 of a 1×1 output: no error")
	}
	// Errors, not crashes: channel mismatch, too small an input, a nil tensor, a bad mode.
	wrongIn := need(randnT(t, rng, 4, 2, 5, 5).ToDType(Float))
	if _, err := Conv2dDirect(x, wrongIn, nil, Conv2dOpts{}); err == nil {
		t.Error("channel mismatch: no error")
	}
	small := need(randnT(t, rng, 1, 3, 3, 3).ToDType(Float))
	if _, err := Conv2dDirect(small, w5, nil, Conv2dOpts{}); err == nil {
		t.Error("3×3 input, 5×5 kernel, no padding: no error")
	}
	if _, err := Conv2dDirect(nil, w5, nil, Conv2dOpts{}); err == nil {
		t.Error("nil input: no error")
	}
	if err := SetDirectConv("sse9"); err == nil {
		t.Error("unknown mode: no error")
	}
	// Off: Conv2d's bits exactly.
	withDirectConv(t, "off", func() {
		if DirectConvISA() != "" {
			t.Errorf("off, yet DirectConvISA() = %q", DirectConvISA())
		}
		want := need(Conv2d(x, w5, nil, Conv2dOpts{Padding: [2]int64{2, 2}}))
		got := need(Conv2dDirect(x, w5, nil, Conv2dOpts{Padding: [2]int64{2, 2}}))
		if !sameBits(vals(t, got), vals(t, want)) {
			t.Error("off: not conv2d's bits")
		}
	})
}

// composedConvPool is what Conv2dMaxPool2x2 fuses.
func composedConvPool(x, w, b *Tensor, o Conv2dOpts) (*Tensor, error) {
	y, err := Conv2dDirect(x, w, b, o)
	if err != nil {
		return nil, err
	}
	defer y.Free()
	return MaxPool2x2(y)
}

// firstOrder returns y = f(x, w, b) and the gradient of Σ y·u with respect to x, w and b,
// taken without a graph (the fused backward's path).
func firstOrder(t *testing.T, f func(x, w, b *Tensor, o Conv2dOpts) (*Tensor, error), c convCase, x, w, bias *Tensor) [][]float64 {
	t.Helper()
	nt := tensors(t)
	in := []*Tensor{nt(x.Detach()), nt(w.Detach()), nt(bias.Detach())}
	for _, l := range in {
		ok(t, l.SetRequiresGrad(true))
	}
	y := nt(f(in[0], in[1], in[2], Conv2dOpts{Padding: c.pad}))
	u := nt(randnT(t, newRNG(92), y.Shape()...).ToDType(c.dtype))
	L := nt(nt(y.Mul(u)).Sum())
	g := need[[]*Tensor](t)(Grad([]*Tensor{L}, in, GradOpts{}))
	return [][]float64{vals(t, y), vals(t, g[0]), vals(t, g[1]), vals(t, g[2])}
}

// zeroIfNil stands for an unused derivative: autograd reports it as nil (the fused op) or
// as a tensor of zeros (MaxPool2x2's backward keeps a zero derivative for its input).
func zeroIfNil(v []float64, n int) []float64 {
	if v == nil {
		return make([]float64, n)
	}
	return v
}

// fusedMatchesComposition compares a convolution fused with a pool (fused) with the two ops
// (composed) at x, w, bias: every derivative convDerivatives takes, with a graph, and the
// first ones without (the fused backward's path). The same bits but for two sums the fused
// op adds in another order, the bias gradient (over the pooled gradient) and d²/du (the bias
// term joins after the pool's adjoint), which agree within rounding.
func fusedMatchesComposition(t *testing.T, c convCase, x, w, bias *Tensor, composed, fused func(x, w, b *Tensor, o Conv2dOpts) (*Tensor, error)) {
	t.Helper()
	terms := int(c.x[0]*(c.x[2]+2*c.pad[0])*(c.x[3]+2*c.pad[1])) + int(c.x[1]*c.w[0]*25)
	want := convDerivatives(t, composed, c, x, w, bias)
	got := convDerivatives(t, fused, c, x, w, bias)
	names := []string{"values", "d/dx", "d/dw", "d/db", "d²/dx", "d²/dw", "d²/db", "d²/du"}
	sizes := []int{0, numel(c.x), numel(c.w), int(c.w[0]), numel(c.x), numel(c.w), int(c.w[0]), len(want[0])}
	for i, name := range names {
		wi, gi := want[i], got[i]
		if i > 0 {
			wi, gi = zeroIfNil(wi, sizes[i]), zeroIfNil(gi, sizes[i])
		}
		switch {
		case name == "d/db" || name == "d²/du":
			if j := withinRounding(gi, wi, terms, c.dtype); j >= 0 {
				t.Errorf("%s: %g against %g at %d", name, gi[j], wi[j], j)
			}
		case name == "d²/dw" && c.nanEvery > 0:
			// The composition differentiates the pool's zero derivative with respect to its
			// input back through the convolution: 0·NaN reaches d²/dw wherever the input has a
			// NaN. The fused op has no such path: its d²/dw is finite, and the composition's
			// where that is.
			for j := range gi {
				if math.IsNaN(gi[j]) || (!math.IsNaN(wi[j]) && gi[j] != wi[j]) {
					t.Fatalf("%s: %g against %g at %d", name, gi[j], wi[j], j)
				}
			}
		case !sameBits(gi, wi):
			t.Errorf("%s differ from the composition's (max |Δ| %g)", name, maxAbsDiff(gi, wi))
		}
	}
	want1 := firstOrder(t, composed, c, x, w, bias)
	got1 := firstOrder(t, fused, c, x, w, bias)
	for i, name := range []string{"values", "d/dx", "d/dw"} {
		if !sameBits(got1[i], want1[i]) {
			t.Errorf("without a graph: %s differ (max |Δ| %g)", name, maxAbsDiff(got1[i], want1[i]))
		}
	}
	if j := withinRounding(got1[3], want1[3], terms, c.dtype); j >= 0 {
		t.Errorf("without a graph: d/db %g against %g at %d", got1[3][j], want1[3][j], j)
	}
}

// TestConv2dMaxPool2x2MatchesComposition: the fused convolution and max-pool against
// MaxPool2x2(Conv2dDirect(...)): the same bits for the values, the winners (through the
// gradients) and every derivative but two sums that the fused op adds in another order, the
// bias gradient (over the pooled gradient) and d²/du (the bias term joins after the
// pooling's adjoint), which agree within rounding. Both backward paths: with a graph (the
// composed adjoints) and without (the fused one).
func TestConv2dMaxPool2x2MatchesComposition(t *testing.T) {
	needDirectConv(t)
	scoped(t)
	modes := []string{"best"}
	if DirectConvISA() == "avx512" {
		modes = append(modes, "avx2")
	}
	for _, mode := range modes {
		withDirectConv(t, mode, func() { convPoolMatchesComposition(t, mode) })
	}
	// Off, the composition with libtorch's conv2d, bit for bit.
	withDirectConv(t, "off", func() {
		c := convCases()[0]
		x, w, bias := convInputs(t, c, 10)
		want := firstOrder(t, func(x, w, b *Tensor, o Conv2dOpts) (*Tensor, error) {
			y, err := Conv2d(x, w, b, o)
			if err != nil {
				return nil, err
			}
			return MaxPool2x2(y)
		}, c, x, w, bias)
		got := firstOrder(t, Conv2dMaxPool2x2, c, x, w, bias)
		for i := range want {
			if !sameBits(got[i], want[i]) {
				t.Errorf("off: derivative %d is not the composition's (max |Δ| %g)", i, maxAbsDiff(got[i], want[i]))
			}
		}
	})
}

func convPoolMatchesComposition(t *testing.T, mode string) {
	for _, c := range convCases() {
		if !c.bias || c.x[2]+2*c.pad[0] < 6 {
			continue // without a bias, see TestConv2dDirectMatchesConv2d; below 2×2 outputs, Fallbacks
		}
		t.Run(mode+"/"+c.name, func(t *testing.T) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			sc := NewScope()
			defer sc.Close()
			c.x[0] = 19 // several chunks
			x, w, bias := convInputs(t, c, 9)
			fusedMatchesComposition(t, c, x, w, bias, composedConvPool, Conv2dMaxPool2x2)
			want := need[*Tensor](t)(composedConvPool(x, w, bias, Conv2dOpts{Padding: c.pad}))
			ok(t, NoGrad(func() error {
				y := need[*Tensor](t)(Conv2dMaxPool2x2(x, w, bias, Conv2dOpts{Padding: c.pad}))
				if !sameBits(vals(t, y), vals(t, want)) {
					t.Error("no-graph values differ")
				}
				return nil
			}))
		})
	}
}

// maxPoolCases are the pools TestConv2dMaxPool2dMatchesComposition runs after each
// convolution: AlexCifarNet's (3, stride 2, padding 1), in ceil mode, and others.
var maxPoolCases = []PoolOpts{
	{Kernel: [2]int64{3, 3}, Stride: [2]int64{2, 2}, Padding: [2]int64{1, 1}},
	{Kernel: [2]int64{3, 3}, Stride: [2]int64{2, 2}, Padding: [2]int64{1, 1}, CeilMode: true},
	{Kernel: [2]int64{2, 2}},
	{Kernel: [2]int64{3, 2}, Stride: [2]int64{1, 3}, Padding: [2]int64{1, 0}},
	{Kernel: [2]int64{4, 4}, Stride: [2]int64{3, 3}, Padding: [2]int64{2, 1}, CeilMode: true},
}

// composedConvMaxPool is what Conv2dMaxPool2d fuses.
func composedConvMaxPool(x, w, b *Tensor, o Conv2dOpts, p PoolOpts) (*Tensor, error) {
	y, err := Conv2dDirect(x, w, b, o)
	if err != nil {
		return nil, err
	}
	defer y.Free()
	return MaxPool2dDirect(y, p)
}

// TestConv2dMaxPool2dMatchesComposition: the convolution fused with a max-pool against
// MaxPool2dDirect(Conv2dDirect(...)): the values bit for bit without a graph (over several
// chunks and one or two threads, NaN included), and with one every derivative too but the
// two sums the fused op adds in another order (as TestConv2dMaxPool2x2MatchesComposition),
// through both of its backward paths.
func TestConv2dMaxPool2dMatchesComposition(t *testing.T) {
	needDirectConv(t)
	scoped(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	threads := NumThreads()
	defer func() { ok(t, SetNumThreads(threads)) }()
	for _, c := range convCases() {
		for pi, p := range maxPoolCases {
			t.Run(fmt.Sprintf("%s/pool %d", c.name, pi), func(t *testing.T) {
				sc := NewScope()
				defer sc.Close()
				c.x[0] = 37 // several chunks and forward tasks
				x, w, bias := convInputs(t, c, 12)
				o := Conv2dOpts{Padding: c.pad}
				want, errWant := composedConvMaxPool(x, w, bias, o, p)
				for _, n := range []int{1, 2} {
					ok(t, SetNumThreads(n))
					var got *Tensor
					var errGot error
					ok(t, NoGrad(func() error { got, errGot = Conv2dMaxPool2d(x, w, bias, o, p); return nil }))
					if (errWant == nil) != (errGot == nil) {
						t.Fatalf("%d thread(s): the composition's error %v, the fused op's %v", n, errWant, errGot)
					}
					if errWant != nil {
						return // a pool larger than the convolution's output: an error either way
					}
					if !shapeEq(got.Shape(), want.Shape()) || !sameBits(vals(t, got), vals(t, want)) {
						t.Errorf("%d thread(s): not the composition's values (shape %v, want %v; max |Δ| %g)",
							n, got.Shape(), want.Shape(), maxAbsDiff(vals(t, got), vals(t, want)))
					}
				}
				ok(t, SetNumThreads(1))
				if c.nanEvery > 0 && !hasNaN(vals(t, want)) {
					t.Error("the NaN case has no NaN in the pooled output")
				}
				if pi > 1 || c.x[1]*c.w[0] > 400 || !c.bias {
					return // derivatives: AlexCifarNet's pool, on the smaller layers with a bias
				}
				c.x[0] = 19 // several backward chunks
				x, w, bias = convInputs(t, c, 13)
				conv := func(f func(x, w, b *Tensor, o Conv2dOpts, p PoolOpts) (*Tensor, error)) func(x, w, b *Tensor, o Conv2dOpts) (*Tensor, error) {
					return func(x, w, b *Tensor, o Conv2dOpts) (*Tensor, error) { return f(x, w, b, o, p) }
				}
				fusedMatchesComposition(t, c, x, w, bias, conv(composedConvMaxPool), conv(Conv2dMaxPool2d))
			})
		}
	}
	// Settings max_pool2d rejects: its error, not a crash.
	need := tensors(t)
	rng := newRNG(14)
	x := need(randnT(t, rng, 2, 3, 12, 12).ToDType(Float))
	w := need(randnT(t, rng, 8, 3, 5, 5).ToDType(Float))
	for _, p := range []PoolOpts{
		{Kernel: [2]int64{3, 3}, Padding: [2]int64{2, 2}},
		{Kernel: [2]int64{0, 3}},
		{Kernel: [2]int64{3, 3}, Stride: [2]int64{-1, 1}},
		{Kernel: [2]int64{9, 9}},
	} {
		err := NoGrad(func() error { _, err := Conv2dMaxPool2d(x, w, nil, Conv2dOpts{}, p); return err })
		if err == nil {
			t.Errorf("pool %+v of an 8×8 output: no error", p)
		}
	}
}
