package engine

// images_test.go: the learnt images' meta-gradient (docs/ALGORITHM.md §12, "Our DD"). In
// float64, ldStep and rrStep on the learnable "images" (pixels normalised before the
// model, fixed one-hot labels): the gradient they hand to the images against central
// differences of the whole meta-step objective in the pixels, then the step itself
// (Adam's first step, clamped to [0, 1]).

import (
	"math"
	"slices"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
)

// imageBatch is the metaBatch of the learnable images v alone, with fixed labels y (all N
// rows) and the target batch (xt, yt); got receives the meta-gradients before v's step.
func imageBatch(v *pixelImages, y, idx, xt, yt *torch.Tensor, got *[]float64) (metaBatch, error) {
	b := metaBatch{idx: idx, params: v.params(), xt: xt, yt: yt, total: int(xt.Shape()[0])}
	yb, err := y.IndexSelect(0, idx)
	if err != nil {
		return b, err
	}
	if b.x, b.y, err = v.batch(idx, nil, yb, false); err != nil {
		return b, err
	}
	b.update = func(grads []*torch.Tensor, loss, wrong *torch.Tensor) (stepOutputs, error) {
		g, err := grads[0].Float64s()
		if err != nil {
			return stepOutputs{}, err
		}
		*got = g
		return stepOutputs{loss: loss, wrong: wrong, batch: int64(b.total)}, v.step(grads)
	}
	b.current = func() (*torch.Tensor, *torch.Tensor, error) { return v.batch(idx, nil, yb, true) }
	return b, nil
}

func TestImageMetaGradientFiniteDifferences(t *testing.T) {
	for _, method := range []string{config.MethodLD, config.MethodRR} {
		t.Run(method, func(t *testing.T) { testImageMetaGradient(t, method) })
	}
}

func testImageMetaGradient(t *testing.T, method string) {
	tScope(t)
	T := tT(t)
	const nBase, classes = 6, 10
	mean, std := []float64{0.1307}, []float64{0.3081}
	cfg := config.Default()
	cfg.Method, cfg.BaseExamples, cfg.InnerBatch, cfg.Baselines = method, 10, 4, []string{}
	cfg = tNeed[config.Config](t)(cfg.Resolved())
	rr := method == config.MethodRR
	net := tNeed[*nets.Net](t)(nets.New("lenet", 1, 28, 28, classes))
	specs := net.Params()
	if rr {
		specs = net.Body
	}
	gen := tNeed[*torch.Generator](t)(torch.NewGenerator(61))
	theta := tNeed[[]*torch.Tensor](t)(nets.InitParams(specs, gen, torch.CPU, torch.Double))
	gen.Close()
	t.Cleanup(func() { torch.FreeAll(theta) })
	rng := tRNG(62)
	p0 := make([]float64, nBase*28*28)
	for i := range p0 {
		p0[i] = rng.Float64()
	}
	// A few pixels at the edges of [0, 1], so that the step's clamp is exercised.
	p0[3], p0[800], p0[1600] = 0.0002, 0.9997, 0
	xtv := make([]float64, 8*28*28)
	for i := range xtv {
		xtv[i] = rng.NormFloat64()
	}
	xt := T(torch.FromFloat64(xtv, 8, 1, 28, 28))
	yt := T(torch.FromInt64([]int64{3, 1, 4, 1, 5, 9, 2, 6}, 8))
	onehot := make([]float64, nBase*classes)
	for i, c := range []int{3, 1, 4, 1, 5, 9} {
		onehot[i*classes+c] = 1
	}
	y := T(torch.FromFloat64(onehot, nBase, classes))
	idxv := []int64{4, 0, 1, 3}
	idx := T(torch.FromInt64(idxv, 4))
	wOld := make([]float64, (net.FeatureDim+1)*classes)
	for i := range wOld {
		wOld[i] = 0.01 * rng.NormFloat64()
	}

	// objective is the meta-step's target loss as a function of the pixels p (forward only).
	objective := func(p *torch.Tensor, createGraph bool) *torch.Tensor {
		meanT := T(torch.FromFloat64(mean, 1, 1, 1, 1))
		stdT := T(torch.FromFloat64(std, 1, 1, 1, 1))
		x := T(T(p.Sub(meanT)).Div(stdT))
		if !rr {
			return ldOuter(t, net, theta, x, idx, y, xt, yt, cfg.InnerLR, createGraph)
		}
		l := &learner{net: net, rr: true, specs: specs, params: theta, cfg: cfg}
		zb := T(l.features(T(x.IndexSelect(0, idx)), true))
		w, _, err := train.RRWeights(zb, T(y.IndexSelect(0, idx)), T(torch.FromFloat64(wOld, net.FeatureDim+1, classes)), cfg)
		tOK(t, err)
		zt := T(l.features(xt, true))
		return T(torch.CrossEntropy(T(train.RRLogits(zt, w, T(torch.Full([]int64{1}, 1.3, torch.WithDType(torch.Double))))), yt))
	}
	const eps = 1e-5
	eval := func(v []float64) float64 {
		s := torch.NewScope()
		defer s.Close()
		return tNeed[float64](t)(objective(T(torch.FromFloat64(v, nBase, 1, 28, 28)), false).Item())
	}

	// The meta-step on the learnable, with a float64 learner holding theta.
	v := tNeed[*pixelImages](t)(newPixelImages(T(torch.FromFloat64(slices.Clone(p0), nBase, 1, 28, 28)), mean, std))
	t.Cleanup(v.close)
	var lp []*torch.Tensor
	for _, p := range theta {
		q := T(T(p.Detach()).Clone())
		tOK(t, q.SetRequiresGrad(true))
		lp = append(lp, q)
	}
	adam := tNeed[*torch.Adam](t)(torch.NewAdam(lp, torch.AdamOpts{LR: cfg.ModelLR, Beta1: cfg.ModelBetas[0], Beta2: cfg.ModelBetas[1], Eps: cfg.ModelEps}))
	t.Cleanup(adam.Close)
	l := &learner{net: net, rr: rr, specs: specs, params: lp, opt: adam, cfg: cfg}
	step := ldStep
	if rr {
		l.w = T(torch.FromFloat64(slices.Clone(wOld), net.FeatureDim+1, classes))
		l.scale = T(torch.Full([]int64{1}, 1.3, torch.WithDType(torch.Double), torch.WithRequiresGrad()))
		l.sOpt = tNeed[*torch.Adam](t)(torch.NewAdam([]*torch.Tensor{l.scale}, torch.AdamOpts{LR: cfg.ScaleLR}))
		t.Cleanup(l.sOpt.Close)
		step = rrStep
	}
	var g []float64
	b := tNeed[metaBatch](t)(imageBatch(v, y, idx, xt, yt, &g))
	st := tNeed[StepStats](t)(readStep(step(l, b)))
	want := eval(p0)
	if math.Abs(st.LabelLoss-want) > 1e-12*want {
		t.Errorf("loss %.15g, objective %.15g", st.LabelLoss, want)
	}

	// Central differences at the largest gradients and a spread of pixels of the batch.
	order := make([]int, len(g))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmpAbs(g[b], g[a]) })
	picks := append(append([]int{}, order[:10]...), 3, 800, 4*784+390, 3*784+100)
	var an, fd []float64
	for _, i := range picks {
		p := slices.Clone(p0)
		p[i] = p0[i] + eps
		up := eval(p)
		p[i] = p0[i] - eps
		an = append(an, g[i])
		fd = append(fd, (up-eval(p))/(2*eps))
	}
	d, sc := maxAbsDiff(an, fd)
	t.Logf("%s: %d pixels, max |meta-gradient − central difference| %.3g (scale %.3g)", method, len(picks), d, sc)
	if sc == 0 || d > 1e-5*sc {
		t.Errorf("the images' meta-gradient differs from central differences: relative error %.3g", d/sc)
	}
	for i, gv := range g {
		inBatch := slices.Contains(idxv, int64(i/784))
		if !inBatch && gv != 0 {
			t.Fatalf("pixel %d of image %d (outside the batch) has gradient %g", i%784, i/784, gv)
		}
	}
	// The step: Adam's first step on the gradient, clamped to [0, 1].
	now := tVals(t, v.P)
	clamped := 0
	for i := range now {
		w := min(1, max(0, p0[i]-adamFirst(g[i], imageLR, imageEps)))
		if math.Abs(now[i]-w) > 1e-12 {
			t.Fatalf("pixel %d: %v after the step, want %v", i, now[i], w)
		}
		if w == 0 || w == 1 {
			clamped++
		}
	}
	if clamped == 0 {
		t.Error("no pixel was clamped: the test does not exercise the clamp")
	}
	t.Logf("%d pixels clamped", clamped)
}
