package engine

// dd_test.go: method dd's meta-gradient (docs/ALGORITHM.md §12). In float64, through six
// unrolled steps (two image blocks, three epochs), the gradients with respect to the
// images and the raw step sizes of both backward passes (recompute, graph) against
// central differences of the unrolled training, and against each other.

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
)

// ddLoss is the target loss after the unrolled training from theta on images x with raw
// step sizes raw, computed forward only (each step's gradient without a graph).
func ddLoss(t *testing.T, net *nets.Net, theta []*torch.Tensor, x, y, raw *torch.Tensor, steps int, xt, yt *torch.Tensor) float64 {
	s := torch.NewScope()
	defer s.Close()
	T := tT(t)
	lr := tVals(t, T(softplus(raw)))
	w := tNeed[[]*torch.Tensor](t)(leaves(theta))
	for i := range lr {
		xb, yb := tNeed[*torch.Tensor](t)(ddBlockX(x, i, steps)), tNeed[*torch.Tensor](t)(ddBlockX(y, i, steps))
		g := tNeed[[]*torch.Tensor](t)(torch.Grad([]*torch.Tensor{T(innerLoss(net, w, xb, yb))}, w, torch.GradOpts{}))
		next := make([]*torch.Tensor, len(w))
		for j := range w {
			next[j] = T(T(T(w[j].Detach()).Sub(T(g[j].MulScalar(lr[i])))).Detach())
			tOK(t, next[j].SetRequiresGrad(true))
		}
		w = next
	}
	loss, _, err := targetLoss(net, w, xt, yt)
	return tNeed[float64](t)(tNeed[*torch.Tensor](t)(loss, err).Item())
}

func ddBlockX(x *torch.Tensor, step, steps int) (*torch.Tensor, error) {
	k := x.Shape()[0] / int64(steps)
	return x.Narrow(0, int64(step%steps)*k, k)
}

func TestDDMetaGradientFiniteDifferences(t *testing.T) {
	tScope(t)
	T := tT(t)
	const classes, n, steps, epochs = 2, 4, 2, 3 // 6 unrolled steps
	net := tNeed[*nets.Net](t)(nets.New("lenet", 1, 28, 28, classes))
	net = net.XavierInit()
	gen := tNeed[*torch.Generator](t)(torch.NewGenerator(7))
	theta := tNeed[[]*torch.Tensor](t)(nets.InitParams(net.Params(), gen, torch.CPU, torch.Double))
	gen.Close()
	t.Cleanup(func() { torch.FreeAll(theta) })
	rng := tRNG(8)
	normals := func(k int) []float64 {
		v := make([]float64, k)
		for i := range v {
			v[i] = rng.NormFloat64()
		}
		return v
	}
	x0 := normals(n * 28 * 28)
	xt := T(torch.FromFloat64(normals(6*28*28), 6, 1, 28, 28))
	yt := T(torch.FromInt64([]int64{0, 1, 1, 0, 1, 0}, 6))
	raw0 := make([]float64, steps*epochs)
	for i := range raw0 {
		raw0[i] = softplusInverse(0.05 + 0.02*float64(i)) // distinct, so that a permutation would show
	}
	x := T(torch.FromFloat64(slices.Clone(x0), n, 1, 28, 28))
	v := tNeed[*ddData](t)(newDD(x, raw0, classes, steps, 0.01, 1))
	t.Cleanup(v.close)
	if got := v.classes; !slices.Equal(got, []int64{0, 1, 0, 1}) {
		t.Fatalf("classes %v, want one image of each class per step", got)
	}

	grads := map[string][]*torch.Tensor{}
	loss := map[string]float64{}
	for name, f := range map[string]ddUnroll{"recompute": ddRecompute, "graph": ddGraph} {
		g, l, _, err := f(net, theta, v.X, v.y, v.raw, steps, xt, yt)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		grads[name], loss[name] = g, tNeed[float64](t)(l.Item())
	}
	want := ddLoss(t, net, theta, v.X, v.y, v.raw, steps, xt, yt)
	for name, l := range loss {
		if math.Abs(l-want) > 1e-12*want {
			t.Errorf("%s: loss %.15g, forward-only %.15g", name, l, want)
		}
	}
	gxR, grR := tVals(t, grads["recompute"][0]), tVals(t, grads["recompute"][1])
	gxG, grG := tVals(t, grads["graph"][0]), tVals(t, grads["graph"][1])
	if d, sc := maxAbsDiff(gxR, gxG); d > 1e-10*sc || sc == 0 {
		t.Errorf("image gradients: recompute and graph differ by %.3g (scale %.3g)", d, sc)
	}
	if d, sc := maxAbsDiff(grR, grG); d > 1e-10*sc || sc == 0 {
		t.Errorf("step-size gradients: recompute and graph differ by %.3g (scale %.3g)", d, sc)
	}

	const eps = 1e-5
	eval := func(xv, rv []float64) float64 {
		s := torch.NewScope()
		defer s.Close()
		return ddLoss(t, net, theta, T(torch.FromFloat64(xv, n, 1, 28, 28)), v.y, T(torch.FromFloat64(rv, int64(len(rv)))), steps, xt, yt)
	}
	// Every raw step size.
	fdR := make([]float64, len(raw0))
	for i := range raw0 {
		r := slices.Clone(raw0)
		r[i] = raw0[i] + eps
		up := eval(x0, r)
		r[i] = raw0[i] - eps
		fdR[i] = (up - eval(x0, r)) / (2 * eps)
	}
	d, sc := maxAbsDiff(grR, fdR)
	t.Logf("step sizes: gradient %v; max |autograd − central difference| %.3g (scale %.3g)", grR, d, sc)
	if sc == 0 || d > 1e-5*sc {
		t.Errorf("step-size gradient differs from central differences: relative error %.3g", d/sc)
	}
	for i := 1; i < len(grR); i++ {
		if grR[i] == grR[0] {
			t.Errorf("step sizes %d and 0 have the same gradient: the check cannot tell steps apart", i)
		}
	}
	// The largest image gradients (each image is used in three steps) and a spread of others.
	order := make([]int, len(gxR))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmpAbs(gxR[b], gxR[a]) })
	picks := append(append([]int{}, order[:12]...), 0, 300, 784+400, 2*784+10, 3*784+783)
	var an, fd []float64
	for _, i := range picks {
		xv := slices.Clone(x0)
		xv[i] = x0[i] + eps
		up := eval(xv, raw0)
		xv[i] = x0[i] - eps
		an = append(an, gxR[i])
		fd = append(fd, (up-eval(xv, raw0))/(2*eps))
	}
	d, sc = maxAbsDiff(an, fd)
	t.Logf("images: %d coordinates, max |autograd − central difference| %.3g (scale %.3g)", len(picks), d, sc)
	if sc == 0 || d > 1e-5*sc {
		t.Errorf("image gradient differs from central differences: relative error %.3g", d/sc)
	}
	for b := 0; b < n; b++ {
		nz := false
		for _, g := range gxR[b*784 : (b+1)*784] {
			nz = nz || g != 0
		}
		if !nz {
			t.Errorf("image %d has no gradient", b)
		}
	}
}

func cmpAbs(a, b float64) int {
	switch {
	case math.Abs(a) < math.Abs(b):
		return -1
	case math.Abs(a) > math.Abs(b):
		return 1
	}
	return 0
}

// TestScheduleTrainsInOrder: a Trainer with a Schedule (method dd's fresh models) takes
// plain gradient steps of the given sizes on the batches in order, from the seed's
// initialisation: the same parameters as those steps written out.
func TestScheduleTrainsInOrder(t *testing.T) {
	tScope(t)
	T := tT(t)
	oneThread(t)
	net := tNeed[*nets.Net](t)(nets.New("lenet", 1, 28, 28, 2))
	net = net.XavierInit()
	rng := tRNG(9)
	xv := make([]float32, 4*784)
	for i := range xv {
		xv[i] = float32(rng.NormFloat64())
	}
	x := T(torch.FromFloat32(xv, 4, 1, 28, 28))
	y := T(torch.FromFloat32([]float32{1, 0, 0, 1, 1, 0, 0, 1}, 4, 2))
	sch := &train.Schedule{Batches: [][]int64{{0, 1}, {2, 3}}, LRs: []float64{0.05, 0.2, 0.1}}
	cfg := tNeed[config.Config](t)(config.Default().Resolved())
	tr := &train.Trainer{Net: net, Cfg: cfg, Images: x, Labels: y, Batch: 2, Opt: train.AdamSpec(1e-3), Device: torch.CPU, Schedule: sch}
	const seed = 123
	m := tNeed[*train.Models](t)(tr.TrainOne(context.Background(), 3, seed, nil))
	defer m.Close()

	gen := tNeed[*torch.Generator](t)(torch.NewGenerator(seed))
	w := tNeed[[]*torch.Tensor](t)(nets.InitParams(net.Params(), gen, torch.CPU, torch.Float))
	gen.Close()
	defer torch.FreeAll(w)
	start := make([]*torch.Tensor, len(w))
	for i := range w {
		start[i] = T(T(w[i].Detach()).Clone())
	}
	for step, lr := range sch.LRs {
		b := T(torch.FromInt64(sch.Batches[step%2], 2))
		loss := T(innerLoss(net, w, T(x.IndexSelect(0, b)), T(y.IndexSelect(0, b))))
		g := tNeed[[]*torch.Tensor](t)(torch.Grad([]*torch.Tensor{loss}, w, torch.GradOpts{}))
		tOK(t, torch.NoGrad(func() error {
			for i := range w {
				if err := w[i].AddScaled_(g[i], -lr); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	moved := 0.0
	for i := range w {
		got, want := tVals(t, m.Params[0][i]), tVals(t, w[i])
		if d, sc := maxAbsDiff(got, want); d > 1e-6*max(sc, 1) {
			t.Errorf("%s: scheduled training differs from the written-out steps by %.3g", net.Params()[i].Name, d)
		}
		d, _ := maxAbsDiff(want, tVals(t, start[i]))
		moved = max(moved, d)
	}
	if moved == 0 {
		t.Error("the steps moved nothing")
	}
	// A schedule too short for the steps asked is refused.
	if _, err := tr.TrainOne(context.Background(), 4, seed, nil); err == nil {
		t.Error("4 steps of a 3-step schedule: no error")
	}
}
