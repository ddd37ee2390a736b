package torch

// lenet_test.go: a functional MNIST LeNet (conv 6@5×5 pad 2 → relu → max_pool 2 →
// conv 16@5×5 → relu → max_pool 2 → fc 120 → relu → fc 84 → relu → fc 10) and the
// label-distillation meta-step built on it, for the golden, memory and benchmark tests.
// Written here on purpose: the torch tests must not depend on nets/.

import (
	"math"
	"testing"
)

// lenetShapes lists the parameters in the fixtures' order:
// conv1_w, conv1_b, conv2_w, conv2_b, fc1_w, fc1_b, fc2_w, fc2_b, fc3_w, fc3_b.
var lenetShapes = [][]int64{
	{6, 1, 5, 5}, {6}, {16, 6, 5, 5}, {16}, {120, 400}, {120}, {84, 120}, {84}, {10, 84}, {10},
}

// lenetParams draws PyTorch's default init, U(±1/√fan_in) for weights and biases, from a
// Go RNG, as leaves that require grad, outside any scope (the caller frees them).
func lenetParams(tb testing.TB, seed uint64, dt DType) []*Tensor {
	tb.Helper()
	T := tensors(tb)
	rng := newRNG(seed)
	ps := make([]*Tensor, len(lenetShapes))
	for i, sh := range lenetShapes {
		w := lenetShapes[i&^1] // the weight of this layer gives fan_in
		fanIn := int64(1)
		for _, d := range w[1:] {
			fanIn *= d
		}
		bound := 1 / math.Sqrt(float64(fanIn))
		v := make([]float64, numel(sh))
		for j := range v {
			v[j] = bound * (2*rng.Float64() - 1)
		}
		p := T(FromFloat64(v, sh...))
		if dt != Double {
			p = T(p.ToDType(dt))
		}
		ok(tb, p.SetRequiresGrad(true))
		Escape(p)
		ps[i] = p
	}
	return ps
}

// lenetFeatures runs LeNet up to relu(fc2): (B, 1, 28, 28) → (B, 84).
func lenetFeatures(p []*Tensor, x *Tensor) (*Tensor, error) {
	var c Chain
	pool := PoolOpts{Kernel: [2]int64{2, 2}}
	h := c.T(Conv2d(x, p[0], p[1], Conv2dOpts{Padding: [2]int64{2, 2}}))
	h = c.T(MaxPool2d(c.T(h.Relu()), pool))
	h = c.T(Conv2d(h, p[2], p[3], Conv2dOpts{}))
	h = c.T(MaxPool2d(c.T(h.Relu()), pool))
	h = c.T(h.Flatten(1, -1))
	h = c.T(c.T(Linear(h, p[4], p[5])).Relu())
	h = c.T(c.T(Linear(h, p[6], p[7])).Relu())
	return h, c.Err()
}

// lenet returns the logits (B, 10).
func lenet(p []*Tensor, x *Tensor) (*Tensor, error) {
	var c Chain
	h := c.T(lenetFeatures(p, x))
	return c.T(Linear(h, p[8], p[9])), c.Err()
}

// metaParts are the intermediate results of one label-distillation meta-step.
type metaParts struct {
	logitsB, inner *Tensor
	grads          []*Tensor // ∇θ inner, with graph
	logitsT, outer *Tensor
}

// metaForward is one meta-step: inner = soft CE(lenet(θ, xb), labels); θ' = θ − α∇θ inner,
// taken with CreateGraph; outer = CE(lenet(θ', xt), yt). θ must require grad.
func metaForward(p []*Tensor, xb, labels, xt, yt *Tensor, alpha float64) (*metaParts, error) {
	var c Chain
	m := &metaParts{}
	m.logitsB = c.T(lenet(p, xb))
	m.inner = c.T(SoftCrossEntropy(m.logitsB, labels))
	if c.Err() != nil {
		return nil, c.Err()
	}
	g, err := Grad([]*Tensor{m.inner}, p, GradOpts{CreateGraph: true})
	if err != nil {
		return nil, err
	}
	m.grads = g
	fast := make([]*Tensor, len(p))
	for i := range p {
		fast[i] = c.T(p[i].Sub(c.T(g[i].MulScalar(alpha))))
	}
	m.logitsT = c.T(lenet(fast, xt))
	m.outer = c.T(CrossEntropy(m.logitsT, yt))
	return m, c.Err()
}

// metaStep is a whole training iteration on the labels: the meta-step, the gradient of
// the outer loss with respect to the labels only, and one Adam step on the labels.
func metaStep(p []*Tensor, xb, labels, xt, yt *Tensor, alpha float64, opt *Adam) (float64, error) {
	m, err := metaForward(p, xb, labels, xt, yt, alpha)
	if err != nil {
		return 0, err
	}
	g, err := Grad([]*Tensor{m.outer}, []*Tensor{labels}, GradOpts{})
	if err != nil {
		return 0, err
	}
	if err := opt.StepWith(g); err != nil {
		return 0, err
	}
	return m.outer.Item()
}

// metaData returns float32 inputs for metaStep: nb base images with soft labels (a leaf
// that requires grad), nt target images with classes. All live outside any scope.
func metaData(tb testing.TB, seed uint64, nb, nt int64) (xb, labels, xt, yt *Tensor) {
	tb.Helper()
	T := tensors(tb)
	rng := newRNG(seed)
	img := func(n int64) *Tensor {
		v := make([]float32, n*28*28)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return T(FromFloat32(v, n, 1, 28, 28))
	}
	xb, xt = img(nb), img(nt)
	l := make([]float32, nb*10)
	for i := range l {
		l[i] = 0.1
	}
	labels = T(FromFloat32(l, nb, 10))
	ok(tb, labels.SetRequiresGrad(true))
	y := make([]int64, nt)
	for i := range y {
		y[i] = int64(rng.IntN(10))
	}
	yt = T(FromInt64(y, nt))
	Escape(xb, labels, xt, yt)
	return xb, labels, xt, yt
}
