package engine

// secondorder_test.go: the second-order LD meta-gradient (docs/ALGORITHM.md §4). In float64, the
// label gradient of "outer CE after one inner SGD step" against central differences of the
// whole procedure, and ldStep itself run on a float64 learner (its label gradient read back
// from the label Adam's first moment, its θ step from the model Adam's). Then the real
// float32 path: one ldStep from the uniform table moves the labels against an
// independently computed float64 meta-gradient, and θ by Adam's first step on ∂inner/∂θ.

import (
	"math"
	"slices"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/internal/testkit"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
)

// ldOuter evaluates one LD meta-iteration's target loss in float64 with hand-written
// cross-entropies: CE(f(xt; θ − α∇θ softCE(f(x̃[idx]; θ), L[idx])), yt). With createGraph
// the inner gradient stays differentiable, so the result can be differentiated in L.
func ldOuter(t *testing.T, net *nets.Net, params []*torch.Tensor, baseX, idx, labels, xt, yt *torch.Tensor, alpha float64, createGraph bool) *torch.Tensor {
	T := tT(t)
	xb := T(baseX.IndexSelect(0, idx))
	lb := T(labels.IndexSelect(0, idx))
	inner := T(T(T(T(T(torch.LogSoftmax(T(net.Forward(params, nil, xb, true)), 1)).Mul(lb)).Sum(1)).Mean()).Neg())
	g := tNeed[[]*torch.Tensor](t)(torch.Grad([]*torch.Tensor{inner}, params, torch.GradOpts{CreateGraph: createGraph}))
	fast := make([]*torch.Tensor, len(params))
	for i := range params {
		fast[i] = T(params[i].Sub(T(g[i].MulScalar(alpha))))
	}
	logp := T(torch.LogSoftmax(T(net.Forward(fast, nil, xt, true)), 1))
	return T(T(T(logp.Gather(1, T(yt.Unsqueeze(1)))).Mean()).Neg())
}

// innerGrad is ∂ softCE(f(x̃[idx]; θ), L[idx]) / ∂θ in float64, as Go slices.
func innerGrad(t *testing.T, net *nets.Net, params []*torch.Tensor, baseX, idx, labels *torch.Tensor) [][]float64 {
	s := torch.NewScope()
	defer s.Close()
	T := tT(t)
	xb := T(baseX.IndexSelect(0, idx))
	lb := T(T(labels.Detach()).IndexSelect(0, idx))
	inner := T(T(T(T(T(torch.LogSoftmax(T(net.Forward(params, nil, xb, true)), 1)).Mul(lb)).Sum(1)).Mean()).Neg())
	g := tNeed[[]*torch.Tensor](t)(torch.Grad([]*torch.Tensor{inner}, params, torch.GradOpts{}))
	out := make([][]float64, len(g))
	for i := range g {
		out[i] = tVals(t, g[i])
	}
	return out
}

// randSimplex returns n rows of c positive entries summing to 1.
func randSimplex(seed uint64, n, c int) []float64 {
	rng := tRNG(seed)
	v := make([]float64, n*c)
	for r := 0; r < n; r++ {
		var s float64
		for j := 0; j < c; j++ {
			v[r*c+j] = 0.05 + rng.ExpFloat64()
			s += v[r*c+j]
		}
		for j := 0; j < c; j++ {
			v[r*c+j] /= s
		}
	}
	return v
}

// adamFirst is Adam's first update from zero state: lr·g/(|g| + eps).
func adamFirst(g, lr, eps float64) float64 { return lr * g / (math.Abs(g) + eps) }

func TestLDMetaGradientFiniteDifferences(t *testing.T) {
	tScope(t)
	T := tT(t)
	const nBase, classes, alpha = 6, 10, 0.01
	net := tNeed[*nets.Net](t)(nets.New("lenet", 1, 28, 28, classes))
	gen := tNeed[*torch.Generator](t)(torch.NewGenerator(41))
	params := tNeed[[]*torch.Tensor](t)(nets.InitParams(net.Params(), gen, torch.CPU, torch.Double))
	gen.Close()
	t.Cleanup(func() { torch.FreeAll(params) })
	rng := tRNG(42)
	img := func(n int) *torch.Tensor {
		v := make([]float64, n*28*28)
		for i := range v {
			v[i] = rng.NormFloat64()
		}
		return T(torch.FromFloat64(v, int64(n), 1, 28, 28))
	}
	baseX, xt := img(nBase), img(8)
	ytv := make([]int64, 8)
	for i := range ytv {
		ytv[i] = int64(rng.IntN(classes))
	}
	yt := T(torch.FromInt64(ytv, 8))
	idxv := []int64{4, 0, 2, 5}
	idx := T(torch.FromInt64(idxv, 4))
	l0 := randSimplex(43, nBase, classes)

	// The analytic meta-gradient: inner soft CE, Grad with CreateGraph, θ' = θ − αg, CE.
	L := T(torch.FromFloat64(slices.Clone(l0), nBase, classes))
	tOK(t, L.SetRequiresGrad(true))
	outer := ldOuter(t, net, params, baseX, idx, L, xt, yt, alpha, true)
	outerVal := tNeed[float64](t)(outer.Item())
	an := tVals(t, tNeed[[]*torch.Tensor](t)(torch.Grad([]*torch.Tensor{outer}, []*torch.Tensor{L}, torch.GradOpts{}))[0])

	// Central differences of the whole procedure in L.
	const eps = 1e-5
	eval := func(v []float64) float64 {
		s := torch.NewScope()
		defer s.Close()
		lt := T(torch.FromFloat64(v, nBase, classes))
		return tNeed[float64](t)(ldOuter(t, net, params, baseX, idx, lt, xt, yt, alpha, false).Item())
	}
	fd := make([]float64, len(l0))
	inBatch := map[int]bool{}
	for _, r := range idxv {
		inBatch[int(r)] = true
	}
	for i := range l0 {
		if !inBatch[i/classes] {
			continue // checked below without evaluations: the loss ignores these rows
		}
		v := slices.Clone(l0)
		v[i] = l0[i] + eps
		up := eval(v)
		v[i] = l0[i] - eps
		down := eval(v)
		fd[i] = (up - down) / (2 * eps)
	}
	diff, scale := maxAbsDiff(an, fd)
	t.Logf("meta-gradient: max |autograd − central difference| %.3g, max |gradient| %.3g, loss %.6g", diff, scale, outerVal)
	if scale == 0 || diff > 1e-5*scale {
		t.Errorf("meta-gradient differs from central differences: relative error %.3g (≥ 1e-5)", diff/scale)
	}
	for r := 0; r < nBase; r++ {
		if inBatch[r] {
			continue
		}
		for c := 0; c < classes; c++ {
			if an[r*classes+c] != 0 {
				t.Errorf("row %d is not in the inner batch but has gradient %g", r, an[r*classes+c])
			}
		}
	}
	// A shuffled row would be a different gradient: the check can tell rows apart.
	if d, _ := maxAbsDiff(an[4*classes:5*classes], an[0:classes]); d < 1e-3*scale {
		t.Errorf("rows 4 and 0 have the same gradient: test setting is degenerate")
	}

	// ldStep itself, run on a float64 learner with these parameters and labels.
	cfg := tNeed[config.Config](t)(config.Default().Resolved())
	var lp []*torch.Tensor
	for _, p := range params {
		q := T(T(p.Detach()).Clone())
		tOK(t, q.SetRequiresGrad(true))
		lp = append(lp, q)
	}
	adam := tNeed[*torch.Adam](t)(torch.NewAdam(lp, torch.AdamOpts{LR: cfg.ModelLR, Beta1: cfg.ModelBetas[0], Beta2: cfg.ModelBetas[1], Eps: cfg.ModelEps}))
	t.Cleanup(adam.Close)
	l := &learner{net: net, specs: net.Params(), params: lp, opt: adam, cfg: cfg}
	y := T(torch.FromFloat64(slices.Clone(l0), nBase, classes))
	tOK(t, y.SetRequiresGrad(true))
	lAdam := tNeed[*torch.Adam](t)(torch.NewAdam([]*torch.Tensor{y}, torch.AdamOpts{LR: cfg.LabelLR, Beta1: cfg.LabelBetas[0], Beta2: cfg.LabelBetas[1], Eps: cfg.LabelEps}))
	t.Cleanup(lAdam.Close)
	labels := &labels{Y: y, opt: lAdam}
	st, err := readStep(labelStep(ldStep, l, labels, baseX, idx, xt, yt))
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(st.LabelLoss-outerVal) > 1e-12*outerVal {
		t.Errorf("ldStep label loss %.15g, reference %.15g", st.LabelLoss, outerVal)
	}
	b1 := cfg.LabelBetas[0]
	m := tVals(t, lAdam.ExpAvg[0])
	gStep := make([]float64, len(m))
	for i := range m {
		gStep[i] = m[i] / (1 - b1)
	}
	if d, s := maxAbsDiff(gStep, an); d > 1e-9*s {
		t.Errorf("ldStep's label gradient differs from the reference by %.3g (scale %.3g)", d, s)
	}
	if d, s := maxAbsDiff(gStep, fd); d > 1e-5*s {
		t.Errorf("ldStep's label gradient differs from central differences: relative error %.3g", d/s)
	}
	// Labels: one Adam step, then clamp and renormalise.
	want := make([]float64, len(l0))
	for r := 0; r < nBase; r++ {
		var sum float64
		for c := 0; c < classes; c++ {
			i := r*classes + c
			want[i] = min(1, max(0, l0[i]-adamFirst(an[i], cfg.LabelLR, cfg.LabelEps)))
			sum += want[i]
		}
		for c := 0; c < classes; c++ {
			want[r*classes+c] /= sum
		}
	}
	newY := tVals(t, y)
	if d, _ := maxAbsDiff(newY, want); d > 1e-12 {
		t.Errorf("labels after ldStep differ from project(L − Adam step) by %.3g", d)
	}
	// θ: Adam on ∂inner/∂θ with the labels from before the label step.
	gOld := innerGrad(t, net, params, baseX, idx, T(torch.FromFloat64(l0, nBase, classes)))
	gNew := innerGrad(t, net, params, baseX, idx, y)
	mb1 := cfg.ModelBetas[0]
	var errOld, errNew, gscale, stepErr float64
	for i := range lp {
		mm := tVals(t, adam.ExpAvg[i])
		before := tVals(t, params[i])
		after := tVals(t, lp[i])
		for j := range mm {
			g := mm[j] / (1 - mb1)
			errOld = max(errOld, math.Abs(g-gOld[i][j]))
			errNew = max(errNew, math.Abs(g-gNew[i][j]))
			gscale = max(gscale, math.Abs(gOld[i][j]))
			stepErr = max(stepErr, math.Abs(after[j]-(before[j]-adamFirst(gOld[i][j], cfg.ModelLR, cfg.ModelEps))))
		}
	}
	t.Logf("θ step: gradient error %.3g with the pre-step labels, %.3g with the post-step ones (scale %.3g); update error %.3g", errOld, errNew, gscale, stepErr)
	if errOld > 1e-10*gscale {
		t.Errorf("the θ step's gradient differs from ∂inner/∂θ with the pre-step labels by %.3g (scale %.3g)", errOld, gscale)
	}
	if errNew < 100*errOld {
		t.Errorf("the θ step's gradient is as close to the post-step labels' (%.3g) as to the pre-step ones (%.3g)", errNew, errOld)
	}
	if stepErr > 1e-12 {
		t.Errorf("θ after ldStep differs from θ − Adam's first step by %.3g", stepErr)
	}
}

// TestLDStepFloat32 runs the production path (newLearner, NewLabels, float32) for one
// ldStep from the uniform table on real MNIST and compares it with a float64 recomputation
// of the meta-gradient from the same initial state.
func TestLDStepFloat32(t *testing.T) {
	tScope(t)
	T := tT(t)
	ds := testkit.CachedMNIST(t, 2000, 200, 200, 20)
	cfg := config.Default()
	cfg.BaseExamples, cfg.InnerBatch = 20, 10
	cfg.Baselines = []string{}
	cfg = tNeed[config.Config](t)(cfg.Resolved())
	net := tNeed[*nets.Net](t)(nets.New("lenet", 1, 28, 28, 10))
	gen := tNeed[*torch.Generator](t)(torch.NewGenerator(51))
	l := tNeed[*learner](t)(newLearner(net, false, cfg, train.AdamSpec(cfg.ModelLR), gen, torch.CPU))
	gen.Close()
	t.Cleanup(l.close)
	labels := tNeed[*labels](t)(newLabels(20, 10, cfg, torch.CPU))
	t.Cleanup(labels.close)
	base := tNeed[deviceSplit](t)(upload(&ds.Base, ds.Shape, torch.CPU))
	t.Cleanup(base.free)
	target := tNeed[deviceSplit](t)(upload(&ds.TargetSet, ds.Shape, torch.CPU))
	t.Cleanup(target.free)
	xt := T(target.x.Narrow(0, 0, 256))
	yt := T(target.y.Narrow(0, 0, 256))
	idxv := []int64{2, 5, 7, 8, 11, 13, 14, 16, 18, 19}
	idx := T(torch.FromInt64(idxv, int64(len(idxv))))

	// Float64 reference from the initial state.
	var p64 []*torch.Tensor
	theta0 := make([][]float64, len(l.params))
	for i, p := range l.params {
		theta0[i] = tVals(t, p)
		q := T(torch.FromFloat64(theta0[i], p.Shape()...))
		tOK(t, q.SetRequiresGrad(true))
		p64 = append(p64, q)
	}
	base64 := T(base.x.ToDType(torch.Double))
	xt64 := T(xt.ToDType(torch.Double))
	L := T(torch.Full([]int64{20, 10}, 0.1, torch.WithDType(torch.Double), torch.WithRequiresGrad()))
	outer := ldOuter(t, net, p64, base64, idx, L, xt64, yt, cfg.InnerLR, true)
	outer64 := tNeed[float64](t)(outer.Item())
	g64 := tVals(t, tNeed[[]*torch.Tensor](t)(torch.Grad([]*torch.Tensor{outer}, []*torch.Tensor{L}, torch.GradOpts{}))[0])
	gIn := innerGrad(t, net, p64, base64, idx, L)

	st, err := readStep(labelStep(ldStep, l, labels, base.x, idx, xt, yt))
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(st.LabelLoss-outer64) > 1e-5*outer64 || st.Error < 0 || st.Error > 100 {
		t.Errorf("label loss %.8g (float64 reference %.8g), error %v%%", st.LabelLoss, outer64, st.Error)
	}
	// The float32 label gradient (from the label Adam's first moment) against float64.
	m := tVals(t, labels.opt.ExpAvg[0])
	g32 := make([]float64, len(m))
	for i := range m {
		g32[i] = m[i] / (1 - cfg.LabelBetas[0])
	}
	d, gmax := maxAbsDiff(g32, g64)
	t.Logf("float32 meta-gradient: max error %.3g, max |g| %.3g", d, gmax)
	if gmax == 0 || d > 1e-4*gmax {
		t.Errorf("float32 label gradient differs from the float64 one by %.3g (scale %.3g)", d, gmax)
	}

	// The labels moved against the gradient: from uniform, row r becomes
	// (0.1 − lr·sign g)/S_r. Undo the row scale S_r and check sign and size of the step on
	// every entry whose gradient is not tiny.
	y := tVals(t, labels.Y)
	inBatch := map[int]bool{}
	for _, r := range idxv {
		inBatch[int(r)] = true
	}
	lr := cfg.LabelLR
	checked := 0
	for r := 0; r < 20; r++ {
		var sum, sRow float64
		for c := 0; c < 10; c++ {
			i := r*10 + c
			sum += y[i]
			sRow += 0.1 - adamFirst(g64[i], lr, cfg.LabelEps)
		}
		if math.Abs(sum-1) > 1e-6 {
			t.Errorf("row %d sums to %v", r, sum)
		}
		if !inBatch[r] {
			for c := 0; c < 10; c++ {
				if math.Abs(y[r*10+c]-0.1) > 1e-7 {
					t.Errorf("row %d is outside the inner batch but moved to %v", r, y[r*10+c])
				}
			}
			continue
		}
		hiNeg, loPos := math.Inf(-1), math.Inf(1)
		for c := 0; c < 10; c++ {
			i := r*10 + c
			if math.Abs(g64[i]) < 1e-3*gmax {
				continue
			}
			checked++
			step := y[i]*sRow - 0.1 // −lr·sign(g) before the projection
			if math.Signbit(step) == math.Signbit(g64[i]) || math.Abs(math.Abs(step)-lr) > 0.05*lr {
				t.Errorf("row %d class %d: pre-projection step %.4g for gradient %.4g, want −lr·sign(g) = %.4g", r, c, step, g64[i], -math.Copysign(lr, g64[i]))
			}
			if g64[i] > 0 {
				hiNeg = max(hiNeg, y[i])
			} else {
				loPos = min(loPos, y[i])
			}
		}
		if hiNeg >= loPos {
			t.Errorf("row %d: an entry with positive gradient (%.6g) ends above one with negative gradient (%.6g)", r, hiNeg, loPos)
		}
	}
	if checked < 50 {
		t.Errorf("only %d label entries had a gradient above 1e-3 of the largest", checked)
	}

	// θ took Adam's first step on ∂inner/∂θ (uniform labels): every tensor moved, by at
	// most lr, against the gradient's sign.
	var gInMax float64
	for i := range gIn {
		for _, v := range gIn[i] {
			gInMax = max(gInMax, math.Abs(v))
		}
	}
	signChecked := 0
	for i, p := range l.params {
		now := tVals(t, p)
		moved := 0.0
		for j := range now {
			delta := now[j] - theta0[i][j]
			moved = max(moved, math.Abs(delta))
			if math.Abs(delta) > cfg.ModelLR*1.001 {
				t.Fatalf("%s[%d] moved by %g, more than Adam's first-step bound %g", l.specs[i].Name, j, delta, cfg.ModelLR)
			}
			if math.Abs(gIn[i][j]) > 1e-3*gInMax {
				signChecked++
				if math.Signbit(delta) == math.Signbit(gIn[i][j]) || math.Abs(math.Abs(delta)-cfg.ModelLR) > 0.05*cfg.ModelLR {
					t.Fatalf("%s[%d] moved by %g for an inner gradient %g: not −lr·sign", l.specs[i].Name, j, delta, gIn[i][j])
				}
			}
		}
		if moved == 0 {
			t.Errorf("%s did not move", l.specs[i].Name)
		}
	}
	if signChecked < 1000 {
		t.Errorf("only %d parameters had a clear inner gradient", signChecked)
	}
	t.Logf("%d label entries and %d parameters checked against the float64 gradients' signs", checked, signChecked)
}

// readStep reads a meta-step's outputs back (as the meta-loop does, with its checks).
// labelStep is one meta-step of method through l on the labels y alone, in a lone process.
func labelStep(method metaMethod, l *learner, y *labels, baseX, idx, xt, yt *torch.Tensor) (stepOutputs, error) {
	b, err := soloBatch(y, baseX, idx, xt, yt, nil)
	if err != nil {
		return stepOutputs{}, err
	}
	return method(l, b)
}

func readStep(out stepOutputs, err error) (StepStats, error) {
	if err != nil {
		return StepStats{}, err
	}
	return out.read()
}
