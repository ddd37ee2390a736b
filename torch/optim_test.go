package torch

// optim_test.go: Adam and SGD beyond the golden fixtures: per-parameter step counts and
// momentum-buffer starts when a gradient is skipped (as torch.optim), Nesterov and
// dampening against the formulas, Reset, Step from .grad, and argument errors.

import (
	"math"
	"testing"
)

func cloneLeaf(t *testing.T, x *Tensor) *Tensor {
	t.Helper()
	T := tensors(t)
	return T(T(x.Detach()).Clone())
}

func assertClose(t *testing.T, what string, got, want *Tensor, tol float64) {
	t.Helper()
	d := maxAbsDiff(vals(t, got), vals(t, want))
	if !(d <= tol) {
		t.Errorf("%s: max |diff| %.3e > %.0e", what, d, tol)
	}
}

// A parameter whose gradient is missing at step 1 takes, at step 2, exactly the step a
// fresh optimizer would take (torch.optim keeps a step count per parameter).
func TestAdamSkippedGradientPerParamStep(t *testing.T) {
	scoped(t)
	rng := newRNG(11)
	p1, p2 := randnT(t, rng, 3, 2), randnT(t, rng, 4)
	g1, g2, h := randnT(t, rng, 3, 2), randnT(t, rng, 3, 2), randnT(t, rng, 4)
	q1, q2 := cloneLeaf(t, p1), cloneLeaf(t, p2)
	o := AdamOpts{LR: 0.1, WeightDecay: 0.01}
	a := need[*Adam](t)(NewAdam([]*Tensor{p1, p2}, o))
	defer a.Close()
	ok(t, a.StepWith([]*Tensor{g1, nil}))
	ok(t, a.StepWith([]*Tensor{g2, h}))
	b1 := need[*Adam](t)(NewAdam([]*Tensor{q1}, o))
	defer b1.Close()
	ok(t, b1.StepWith([]*Tensor{g1}))
	ok(t, b1.StepWith([]*Tensor{g2}))
	b2 := need[*Adam](t)(NewAdam([]*Tensor{q2}, o))
	defer b2.Close()
	ok(t, b2.StepWith([]*Tensor{h}))
	assertClose(t, "p1 (never skipped)", p1, q1, 0)
	assertClose(t, "p2 (skipped at step 1)", p2, q2, 0)
	if a.StepCount != 2 {
		t.Errorf("StepCount %d, want 2", a.StepCount)
	}
	// Reset forgets everything: a step then equals a fresh optimizer's first step
	ok(t, a.Reset())
	r1, r2 := cloneLeaf(t, p1), cloneLeaf(t, p2)
	ok(t, a.StepWith([]*Tensor{g1, h}))
	c := need[*Adam](t)(NewAdam([]*Tensor{r1, r2}, o))
	defer c.Close()
	ok(t, c.StepWith([]*Tensor{g1, h}))
	assertClose(t, "p1 after Reset", p1, r1, 0)
	assertClose(t, "p2 after Reset", p2, r2, 0)
}

// adamReference is Adam's formula in float64: one step of parameters p with gradient g at
// the 1-based step count step, moments m and v updated in place.
func adamReference(p, g, m, v []float64, step, lr, b1, b2, eps, wd float64) {
	for i := range p {
		gi := g[i] + wd*p[i]
		m[i] = b1*m[i] + (1-b1)*gi
		v[i] = b2*v[i] + (1-b2)*gi*gi
		denom := math.Sqrt(v[i])/math.Sqrt(1-math.Pow(b2, step)) + eps
		p[i] -= lr / (1 - math.Pow(b1, step)) * m[i] / denom
	}
}

// Adam against its formula, two steps, with weight decay (L2 added to the gradient).
func TestAdamFormula(t *testing.T) {
	scoped(t)
	p0 := []float64{0.5, -1.5, 2}
	gs := [][]float64{{0.1, -0.2, 0.3}, {-0.5, 0.4, 0.05}}
	lr, b1, b2, eps, wd := 0.05, 0.8, 0.95, 1e-6, 0.1
	p := f64T(t, p0, 3)
	a := need[*Adam](t)(NewAdam([]*Tensor{p}, AdamOpts{LR: lr, Beta1: b1, Beta2: b2, Eps: eps, WeightDecay: wd}))
	defer a.Close()
	want := append([]float64{}, p0...)
	m, v := make([]float64, 3), make([]float64, 3)
	for k, g := range gs {
		ok(t, a.StepWith([]*Tensor{f64T(t, g, 3)}))
		adamReference(want, g, m, v, float64(k+1), lr, b1, b2, eps, wd)
	}
	if d := maxAbsDiff(vals(t, p), want); d > 1e-15 {
		t.Errorf("Adam: max |diff| %.3e from the formula", d)
	}
}

// SGD with momentum, dampening and Nesterov against the formula, including a parameter
// whose first gradient arrives at step 2 (its buffer starts as that gradient, undamped).
func TestSGDFormulaAndSkippedGradient(t *testing.T) {
	scoped(t)
	for _, nesterov := range []bool{false, true} {
		lr, mom, damp, wd := 0.1, 0.9, 0.3, 0.01
		p1v, p2v := []float64{1, -2}, []float64{0.5}
		p1, p2 := f64T(t, p1v, 2), f64T(t, p2v, 1)
		s := need[*SGD](t)(NewSGD([]*Tensor{p1, p2}, SGDOpts{LR: lr, Momentum: mom, Dampening: damp, WeightDecay: wd, Nesterov: nesterov}))
		grads := [][2][]float64{{{0.2, 0.4}, nil}, {{-0.1, 0.3}, {0.7}}, {{0.5, 0.5}, {-0.2}}}
		want := [][]float64{append([]float64{}, p1v...), append([]float64{}, p2v...)}
		bufs := [][]float64{nil, nil}
		for _, gg := range grads {
			in := make([]*Tensor, 2)
			for j := range gg {
				if gg[j] == nil {
					continue
				}
				in[j] = f64T(t, gg[j], int64(len(gg[j])))
				if bufs[j] == nil {
					bufs[j] = make([]float64, len(gg[j]))
					for i := range gg[j] {
						bufs[j][i] = gg[j][i] + wd*want[j][i]
					}
				} else {
					for i := range gg[j] {
						bufs[j][i] = mom*bufs[j][i] + (1-damp)*(gg[j][i]+wd*want[j][i])
					}
				}
				for i := range gg[j] {
					d := gg[j][i] + wd*want[j][i]
					if nesterov {
						d += mom * bufs[j][i]
					} else {
						d = bufs[j][i]
					}
					want[j][i] -= lr * d
				}
			}
			ok(t, s.StepWith(in))
		}
		if d := maxAbsDiff(vals(t, p1), want[0]); d > 1e-15 {
			t.Errorf("nesterov=%v: p1 off the formula by %.3e", nesterov, d)
		}
		if d := maxAbsDiff(vals(t, p2), want[1]); d > 1e-15 {
			t.Errorf("nesterov=%v: p2 (first gradient at step 2) off the formula by %.3e", nesterov, d)
		}
		if d := maxAbsDiff(vals(t, s.Buffers[1]), bufs[1]); d > 1e-15 {
			t.Errorf("nesterov=%v: p2's buffer off by %.3e", nesterov, d)
		}
		s.Close()
	}
}

// Plain SGD (no momentum) has no buffers; Step reads .grad and skips parameters without one.
func TestSGDPlainStepFromGrad(t *testing.T) {
	scoped(t)
	T := tensors(t)
	p := f64T(t, []float64{1, 2}, 2)
	q := f64T(t, []float64{3}, 1)
	ok(t, p.SetRequiresGrad(true))
	ok(t, q.SetRequiresGrad(true))
	s := need[*SGD](t)(NewSGD([]*Tensor{p, q}, SGDOpts{LR: 0.5}))
	defer s.Close()
	if s.Buffers != nil {
		t.Fatal("buffers without momentum")
	}
	loss := T(T(p.Square()).Sum()) // ∂/∂p = 2p; q has no gradient
	ok(t, loss.Backward())
	ok(t, s.Step())
	if v := vals(t, p); v[0] != 0 || v[1] != 0 {
		t.Errorf("p after one step: %v, want [0 0]", v)
	}
	if v := vals(t, q); v[0] != 3 {
		t.Errorf("q (no gradient) moved to %v", v)
	}
	ok(t, s.ZeroGrad())
	if g := T(p.Grad()); g != nil {
		t.Errorf("ZeroGrad left %v", g)
	}
}

func TestOptimArgumentErrors(t *testing.T) {
	scoped(t)
	p := f64T(t, []float64{1}, 1)
	for _, lr := range []float64{-1, math.NaN(), math.Inf(1)} {
		_, err := NewAdam([]*Tensor{p}, AdamOpts{LR: lr})
		wantErr(t, err, "adam", "learning rate")
		_, err = NewSGD([]*Tensor{p}, SGDOpts{LR: lr})
		wantErr(t, err, "sgd", "learning rate")
	}
	_, err := NewAdam([]*Tensor{p}, AdamOpts{LR: 1, Beta1: 1})
	wantErr(t, err, "adam", "betas")
	_, err = NewAdam([]*Tensor{p}, AdamOpts{LR: 1, Beta2: -0.5})
	wantErr(t, err, "adam", "betas")
	a := need[*Adam](t)(NewAdam([]*Tensor{p}, AdamOpts{LR: 1}))
	defer a.Close()
	wantErr(t, a.SetLR(-2), "adam", "learning rate")
	ok(t, a.SetLR(0.5))
	wantErr(t, a.StepWith(nil), "adam_step", "0 gradients for 1 parameters")
	wantErr(t, a.StepWith([]*Tensor{f64T(t, []float64{1, 2}, 2)}), "adam_step")
	if a.StepCount != 0 {
		t.Errorf("failed steps advanced StepCount to %d", a.StepCount)
	}
	s := need[*SGD](t)(NewSGD([]*Tensor{p}, SGDOpts{LR: 1, Momentum: 0.5}))
	defer s.Close()
	wantErr(t, s.StepWith([]*Tensor{nil, nil}), "sgd_step", "2 gradients for 1 parameters")
	wantErr(t, s.SetLR(math.NaN()), "sgd", "learning rate")
	freed := f64T(t, []float64{1}, 1)
	freed.Free()
	_, err = NewAdam([]*Tensor{freed}, AdamOpts{LR: 1})
	wantErr(t, err, "adam", "freed")
}

// A capturable Adam (step count on the device) takes the formula's steps, continues the
// count of the steps before it, and restarts it on Reset; with float32 parameters it stays
// within rounding of the ordinary Adam. On the device under test (LDTORCH_TEST_DEVICE).
func TestAdamCapturable(t *testing.T) {
	scoped(t)
	T := tensors(t)
	dev := testDevice(t)
	p0 := []float64{0.5, -1.5, 2}
	gs := [][]float64{{0.1, -0.2, 0.3}, {-0.5, 0.4, 0.05}, {0.2, 0.2, -0.7}, {1, -1, 0.5}}
	lr, b1, b2, eps, wd := 0.05, 0.8, 0.95, 1e-6, 0.1
	p := T(T(f64T(t, p0, 3).To(dev)).Detach())
	a := need[*Adam](t)(NewAdam([]*Tensor{p}, AdamOpts{LR: lr, Beta1: b1, Beta2: b2, Eps: eps, WeightDecay: wd}))
	defer a.Close()
	want := append([]float64{}, p0...)
	m, v := make([]float64, 3), make([]float64, 3)
	step := 0.0
	for k, g := range gs {
		if k == 1 {
			ok(t, a.Capturable()) // after one ordinary step: the count goes on from 1
		}
		if k == 3 {
			ok(t, a.Reset())
			m, v, step = make([]float64, 3), make([]float64, 3), 0
		}
		ok(t, a.StepWith([]*Tensor{T(f64T(t, g, 3).To(dev))}))
		step++
		adamReference(want, g, m, v, step, lr, b1, b2, eps, wd)
	}
	if d := maxAbsDiff(vals(t, p), want); d > 1e-14 {
		t.Errorf("capturable Adam: max |diff| %.3e from the formula", d)
	}
	if a.StepCount != 1 {
		t.Errorf("StepCount %d after Reset and one step, want 1", a.StepCount)
	}
	a.CountReplays(3)
	if a.StepCount != 4 {
		t.Errorf("StepCount %d after CountReplays(3), want 4", a.StepCount)
	}
	wantErr(t, a.StepWith([]*Tensor{nil}), "adam_step", "needs every gradient")

	// float32, 30 steps of a random problem: within rounding of the ordinary update
	rng := newRNG(3)
	x := T(T(randnT(t, rng, 64).To(dev)).ToDType(Float))
	y := T(x.Detach())
	y = T(y.Clone())
	plain := need[*Adam](t)(NewAdam([]*Tensor{x}, AdamOpts{LR: 0.01}))
	defer plain.Close()
	capt := need[*Adam](t)(NewAdam([]*Tensor{y}, AdamOpts{LR: 0.01}))
	defer capt.Close()
	ok(t, capt.Capturable())
	for k := 0; k < 30; k++ {
		g := T(T(randnT(t, rng, 64).To(dev)).ToDType(Float))
		ok(t, plain.StepWith([]*Tensor{g}))
		ok(t, capt.StepWith([]*Tensor{g}))
	}
	assertClose(t, "capturable against ordinary Adam, float32, 30 steps", y, x, 1e-5)

	// one count for all: not after a step that skipped a parameter
	q1, q2 := T(f64T(t, []float64{1}, 1).To(dev)), T(f64T(t, []float64{2}, 1).To(dev))
	sk := need[*Adam](t)(NewAdam([]*Tensor{q1, q2}, AdamOpts{LR: 0.1}))
	defer sk.Close()
	ok(t, sk.StepWith([]*Tensor{T(f64T(t, []float64{1}, 1).To(dev)), nil}))
	wantErr(t, sk.Capturable(), "adam_capturable", "step counts differ")
}
