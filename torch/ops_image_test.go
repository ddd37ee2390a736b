package torch

// ops_image_test.go: GroupNorm against a direct float64 computation (per sample and group:
// mean, biased variance) and against PyTorch 1.13 (convnet.npz: values, VJPs and a
// second-order VJP), finite-difference gradient checks of GroupNorm (to second order), AffineGrid
// and GridSample, and their argument errors. DSA's use of the grid ops is
// checked against PyTorch in the augment package.

import (
	"math"
	"strings"
	"testing"
)

// directGroupNorm computes group normalisation of x (n, c, h·w values) on the host.
func directGroupNorm(x []float64, n, c, hw, groups int, w, b []float64, eps float64) []float64 {
	out := make([]float64, len(x))
	per := c / groups
	for s := 0; s < n; s++ {
		for g := 0; g < groups; g++ {
			lo, hi := (s*c+g*per)*hw, (s*c+(g+1)*per)*hw
			var mean, v float64
			for _, a := range x[lo:hi] {
				mean += a
			}
			mean /= float64(hi - lo)
			for _, a := range x[lo:hi] {
				v += (a - mean) * (a - mean)
			}
			v /= float64(hi - lo) // biased
			inv := 1 / math.Sqrt(v+eps)
			for i := lo; i < hi; i++ {
				ch := (i / hw) % c
				out[i] = (x[i]-mean)*inv*w[ch] + b[ch]
			}
		}
	}
	return out
}

func TestGroupNormMatchesDirectComputation(t *testing.T) {
	scoped(t)
	T := tensors(t)
	rng := newRNG(31)
	const n, c, h, w = 3, 6, 5, 4
	x := uniformT(t, rng, -2, 3, n, c, h, w) // spread, off-centre
	xs := vals(t, x)
	gamma, beta := make([]float64, c), make([]float64, c)
	for i := range gamma {
		gamma[i], beta[i] = 0.5+rng.Float64(), rng.NormFloat64()
	}
	for _, groups := range []int{c, 3, 1} { // c: instance normalisation
		got := vals(t, T(GroupNorm(x, int64(groups), f64T(t, gamma, c), f64T(t, beta, c), 1e-5)))
		want := directGroupNorm(xs, n, c, h*w, groups, gamma, beta, 1e-5)
		if d := maxAbsDiff(got, want); d > 1e-13*maxAbs(want) {
			t.Errorf("groups %d: max |GroupNorm − direct| = %.3e", groups, d)
		}
	}
	// Without an affine: γ = 1, β = 0; each (sample, channel) has mean 0 and variance
	// v/(v+eps) ≈ 1.
	ones, zeros := make([]float64, c), make([]float64, c)
	for i := range ones {
		ones[i] = 1
	}
	got := vals(t, T(GroupNorm(x, c, nil, nil, 1e-5)))
	want := directGroupNorm(xs, n, c, h*w, c, ones, zeros, 1e-5)
	if d := maxAbsDiff(got, want); d > 1e-13*maxAbs(want) {
		t.Errorf("no affine: max |GroupNorm − direct| = %.3e", d)
	}
	for k := 0; k < n*c; k++ {
		var m float64
		for _, a := range got[k*h*w : (k+1)*h*w] {
			m += a
		}
		if math.Abs(m/(h*w)) > 1e-14 {
			t.Fatalf("instance %d: mean %.3e after instance normalisation", k, m/(h*w))
		}
	}
}

func TestGroupNormMatchesPyTorch(t *testing.T) {
	scoped(t)
	T := tensors(t)
	g := loadGolden(t, "convnet.npz")
	for _, c := range []struct {
		name   string
		groups int64
	}{{"inorm", 6}, {"gnorm", 2}} {
		x, w, b := g.leaf(c.name+"_in0"), g.leaf(c.name+"_in1"), g.leaf(c.name+"_in2")
		y := T(GroupNorm(x, c.groups, w, b, 1e-5))
		g.check(c.name+"_out", y, 1e-13)
		gs := need[[]*Tensor](t)(Grad([]*Tensor{y}, []*Tensor{x, w, b}, GradOpts{CreateGraph: true, GradOutputs: []*Tensor{g.get(c.name + "_gout")}}))
		for k, gk := range gs {
			g.check(c.name+"_gin"+string(rune('0'+k)), gk, 1e-12)
		}
		r := T(T(gs[0].Square()).Sum())
		h := need[[]*Tensor](t)(Grad([]*Tensor{r}, []*Tensor{x}, GradOpts{}))
		g.check(c.name+"_hin0", h[0], 1e-11)
	}
}

func TestGradCheckImageOps(t *testing.T) {
	scoped(t)
	rng := newRNG(32)
	x := randnT(t, rng, 2, 4, 3, 3)
	w, b := uniformT(t, rng, 0.5, 1.5, 4), randnT(t, rng, 4)
	norm := func(in []*Tensor) (*Tensor, error) { return GroupNorm(in[0], 2, in[1], in[2], 1e-5) }
	gradCheck(t, norm, x, w, b)
	gradCheck(t, gradOf(norm), x, w, b)

	// A rotation-and-scale grid sampled bilinearly: gradients in the image and in θ. The
	// sample points avoid the pixel grid's kinks (θ is generic).
	img := randnT(t, rng, 2, 2, 4, 5)
	theta := f64T(t, []float64{0.9, -0.23, 0.05, 0.31, 1.1, -0.07, 1.05, 0.12, 0.03, -0.17, 0.87, 0.11}, 2, 2, 3)
	sample := func(in []*Tensor) (*Tensor, error) {
		grid, err := AffineGrid(in[1], []int64{2, 2, 4, 5}, true)
		if err != nil {
			return nil, err
		}
		return GridSample(in[0], grid, GridSampleOpts{AlignCorners: true})
	}
	gradCheck(t, sample, img, theta) // first order only: see GridSample
}

func TestAffineGridIdentitySamplesTheInput(t *testing.T) {
	scoped(t)
	T := tensors(t)
	x := randnT(t, newRNG(33), 2, 3, 6, 7)
	id := f64T(t, []float64{1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0}, 2, 2, 3)
	grid := T(AffineGrid(id, x.Shape(), true))
	if !shapeEq(grid.Shape(), []int64{2, 6, 7, 2}) {
		t.Fatalf("grid shape %v", grid.Shape())
	}
	for _, m := range []GridMode{GridBilinear, GridNearest, GridBicubic} {
		y := vals(t, T(GridSample(x, grid, GridSampleOpts{Mode: m, AlignCorners: true})))
		if d := maxAbsDiff(y, vals(t, x)); d > 1e-12 {
			t.Errorf("mode %d: identity grid changed the image by %.3e", m, d)
		}
	}
	// A shift by one pixel with zero padding reads zeros at the edge; with border padding
	// it repeats the edge column.
	shift := f64T(t, []float64{1, 0, 2.0 / 6, 0, 1, 0, 1, 0, 2.0 / 6, 0, 1, 0}, 2, 2, 3) // +1 column of 7
	g2 := T(AffineGrid(shift, x.Shape(), true))
	xv := vals(t, x)
	for _, pad := range []GridPadding{GridZeros, GridBorder} {
		y := vals(t, T(GridSample(x, g2, GridSampleOpts{Padding: pad, AlignCorners: true})))
		for r := 0; r < 2*3*6; r++ {
			for c := 0; c < 7; c++ {
				want := 0.0
				switch {
				case c < 6:
					want = xv[r*7+c+1]
				case pad == GridBorder:
					want = xv[r*7+6]
				}
				if math.Abs(y[r*7+c]-want) > 1e-12 {
					t.Fatalf("padding %d: row %d col %d = %g, want %g", pad, r, c, y[r*7+c], want)
				}
			}
		}
	}
}

func TestImageOpErrors(t *testing.T) {
	scoped(t)
	T := tensors(t)
	x := randnT(t, newRNG(34), 2, 6, 3, 3)
	for _, c := range []struct {
		name string
		f    func() error
		want string
	}{
		{"groups not dividing channels", func() error { _, err := GroupNorm(x, 4, nil, nil, 1e-5); return err }, "groups"},
		{"zero groups", func() error { _, err := GroupNorm(x, 0, nil, nil, 1e-5); return err }, "groups"},
		{"weight of the wrong size", func() error {
			_, err := GroupNorm(x, 6, T(Ones([]int64{5}, WithDType(Double))), nil, 1e-5)
			return err
		}, ""},
		{"affine_grid size not 4-D", func() error {
			_, err := AffineGrid(T(Zeros([]int64{2, 2, 3}, WithDType(Double))), []int64{2, 3, 3}, true)
			return err
		}, "(N, C, H, W)"},
		{"theta of the wrong shape", func() error {
			_, err := AffineGrid(T(Zeros([]int64{2, 3, 3}, WithDType(Double))), []int64{2, 6, 3, 3}, true)
			return err
		}, ""},
		{"grid of another dtype", func() error {
			_, err := GridSample(x, T(Zeros([]int64{2, 3, 3, 2})), GridSampleOpts{})
			return err
		}, ""},
		{"unknown grid mode", func() error {
			_, err := GridSample(x, T(Zeros([]int64{2, 3, 3, 2}, WithDType(Double))), GridSampleOpts{Mode: 7})
			return err
		}, "interpolation mode"},
		{"unknown padding", func() error {
			_, err := GridSample(x, T(Zeros([]int64{2, 3, 3, 2}, WithDType(Double))), GridSampleOpts{Padding: -1})
			return err
		}, "padding mode"},
	} {
		err := c.f()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %q", c.name, err, c.want)
		}
	}
	freed := T(x.Clone())
	freed.Free()
	if _, err := GroupNorm(freed, 6, nil, nil, 1e-5); err == nil {
		t.Errorf("GroupNorm of a freed tensor: no error")
	}
}
