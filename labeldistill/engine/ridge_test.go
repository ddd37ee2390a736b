package engine

// ridge_test.go: the ridge solve of LD RR (docs/ALGORITHM.md §5 step 2) against Go float64
// references in both the dual (explicit inverse) and the primal form, its gradients against
// finite differences, and one and two rrSteps against an independent recomputation: the
// pseudo-gradient update of W, the label gradient, the feature/scale step (with the
// updated labels and the still-attached W), and what moves.

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/internal/testkit"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
)

// randMat returns an r×c matrix of N(0, σ²) entries; with bias, the last column is ones.
func randMat(seed uint64, r, c int, sigma float64, bias bool) mat {
	rng := tRNG(seed)
	m := newMat(r, c)
	for i := range m.v {
		m.v[i] = sigma * rng.NormFloat64()
	}
	if bias {
		for i := 0; i < r; i++ {
			m.set(i, c-1, 1)
		}
	}
	return m
}

func TestRidgeWeightsClosedForms(t *testing.T) {
	tScope(t)
	cases := []struct {
		n, d1, classes int
		lambda, sigma  float64
	}{
		{6, 9, 4, 1, 1},      // N_i < d+1, the usual case
		{10, 85, 10, 1, 0.5}, // LeNet's feature width
		{12, 5, 3, 0.5, 1},   // N_i > d+1: Z Zᵀ is singular without λ
		{4, 4, 2, 0.01, 2},   // small λ
	}
	for ci, c := range cases {
		name := fmt.Sprintf("n=%d d+1=%d C=%d λ=%g", c.n, c.d1, c.classes, c.lambda)
		z := randMat(uint64(10+ci), c.n, c.d1, c.sigma, true)
		y := randMat(uint64(20+ci), c.n, c.classes, 1, false)
		w, err := train.RidgeWeights(z.tensor(t), y.tensor(t), c.lambda)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !slices.Equal(w.Shape(), []int64{int64(c.d1), int64(c.classes)}) || w.DType() != torch.Double {
			t.Fatalf("%s: W %v %v", name, w.Shape(), w.DType())
		}
		got := tVals(t, w)
		dual := ridgeDual(z, y, c.lambda)
		primal := ridgePrimal(z, y, c.lambda)
		if d, s := maxAbsDiff(got, dual.v); d > 1e-10*max(1, s) {
			t.Errorf("%s: train.RidgeWeights differs from Zᵀ(ZZᵀ+λI)⁻¹Y by %.3g (scale %.3g)", name, d, s)
		}
		if d, s := maxAbsDiff(got, primal.v); d > 1e-10*max(1, s) {
			t.Errorf("%s: train.RidgeWeights differs from (ZᵀZ+λI)⁻¹ZᵀY by %.3g (scale %.3g)", name, d, s)
		}
		// The two references agree with each other (Woodbury), so neither is vacuous.
		if d, s := maxAbsDiff(dual.v, primal.v); d > 1e-10*max(1, s) || s == 0 {
			t.Errorf("%s: the dual and primal references differ by %.3g (scale %.3g)", name, d, s)
		}
		// float32 inputs give a float32 solution close to the float64 one.
		z32 := tT(t)(z.tensor(t).ToDType(torch.Float))
		y32 := tT(t)(y.tensor(t).ToDType(torch.Float))
		w32 := tT(t)(train.RidgeWeights(z32, y32, c.lambda))
		if w32.DType() != torch.Float {
			t.Errorf("%s: float32 inputs gave %v", name, w32.DType())
		}
		if d, s := maxAbsDiff(tVals(t, w32), dual.v); d > 1e-4*max(1, s) {
			t.Errorf("%s: float32 solve off by %.3g (scale %.3g)", name, d, s)
		}
	}
}

// TestRidgeWeightsGradient: d(Σ R ⊙ W)/dZ and /dY through the solve against central
// differences of the Go reference.
func TestRidgeWeightsGradient(t *testing.T) {
	tScope(t)
	const n, d1, classes, lambda = 5, 7, 3, 1.0
	z := randMat(31, n, d1, 1, true)
	y := randMat(32, n, classes, 1, false)
	r := randMat(33, d1, classes, 1, false)
	zt, yt := z.tensor(t), y.tensor(t)
	tOK(t, zt.SetRequiresGrad(true))
	tOK(t, yt.SetRequiresGrad(true))
	w := tT(t)(train.RidgeWeights(zt, yt, lambda))
	loss := tT(t)(tT(t)(w.Mul(r.tensor(t))).Sum())
	grads := tNeed[[]*torch.Tensor](t)(torch.Grad([]*torch.Tensor{loss}, []*torch.Tensor{zt, yt}, torch.GradOpts{}))
	f := func(z, y mat) float64 {
		var s float64
		for i, v := range ridgeDual(z, y, lambda).v {
			s += v * r.v[i]
		}
		return s
	}
	const h = 1e-6
	for k, m := range []mat{z, y} {
		g := tVals(t, grads[k])
		what := []string{"Z", "Y"}[k]
		var gmax float64
		for i := range m.v {
			if k == 0 && i%d1 == d1-1 {
				continue // the bias column is data too, but Z's ones are not perturbed in use
			}
			orig := m.v[i]
			m.v[i] = orig + h
			up := f(z, y)
			m.v[i] = orig - h
			down := f(z, y)
			m.v[i] = orig
			fd := (up - down) / (2 * h)
			gmax = max(gmax, math.Abs(g[i]))
			if math.Abs(fd-g[i]) > 1e-7*max(1, math.Abs(fd)) {
				t.Errorf("d/d%s[%d]: autograd %.10g, central difference %.10g", what, i, g[i], fd)
			}
		}
		if gmax == 0 {
			t.Errorf("gradient with respect to %s is zero", what)
		}
	}
}

// ---- rrStep -----------------------------------------------------------------------------------

// rrFixture is a LeNet RR learner with uniform labels on real MNIST base examples and one
// target batch.
type rrFixture struct {
	cfg    config.Config
	net    *nets.Net
	l      *learner
	labels *labels
	base   deviceSplit
	xt, yt *torch.Tensor
}

func newRRFixture(t *testing.T, nTarget int) *rrFixture {
	ds := testkit.CachedMNIST(t, 2000, 200, 200, 20)
	cfg := config.Default()
	cfg.Method, cfg.BaseExamples, cfg.InnerBatch = config.MethodRR, 20, 10
	cfg.Baselines = []string{}
	cfg = tNeed[config.Config](t)(cfg.Resolved())
	f := &rrFixture{cfg: cfg}
	f.net = tNeed[*nets.Net](t)(nets.New("lenet", 1, 28, 28, 10))
	gen := tNeed[*torch.Generator](t)(torch.NewGenerator(77))
	defer gen.Close()
	f.l = tNeed[*learner](t)(newLearner(f.net, true, cfg, train.AdamSpec(cfg.ModelLR), gen, torch.CPU))
	t.Cleanup(f.l.close)
	f.labels = tNeed[*labels](t)(newLabels(20, 10, cfg, torch.CPU))
	t.Cleanup(f.labels.close)
	f.base = tNeed[deviceSplit](t)(upload(&ds.Base, ds.Shape, torch.CPU))
	t.Cleanup(f.base.free)
	target := tNeed[deviceSplit](t)(upload(&ds.TargetSet, ds.Shape, torch.CPU))
	t.Cleanup(target.free)
	f.xt = tT(t)(target.x.Narrow(0, 0, int64(nTarget)))
	f.yt = tT(t)(target.y.Narrow(0, 0, int64(nTarget)))
	return f
}

// featuresWithOnes computes [f_θ(x), 1] in Go float64 from the learner's current θ.
func featuresWithOnes(t *testing.T, l *learner, x *torch.Tensor) mat {
	var f []float64
	var rows, d int
	tOK(t, torch.NoGrad(func() error {
		s := torch.NewScope()
		defer s.Close()
		out, err := l.net.Features(l.params, l.buffers, x, true)
		if err != nil {
			return err
		}
		sh := out.Shape()
		rows, d = int(sh[0]), int(sh[1])
		f, err = out.Float64s()
		return err
	}))
	z := newMat(rows, d+1)
	for i := 0; i < rows; i++ {
		for j := 0; j < d; j++ {
			z.set(i, j, f[i*d+j])
		}
		z.set(i, d, 1)
	}
	return z
}

// rowsOf returns the rows idx of a row-major table with c columns.
func rowsOf(v []float64, c int, idx []int64) mat {
	m := newMat(len(idx), c)
	for i, r := range idx {
		copy(m.v[i*c:(i+1)*c], v[int(r)*c:int(r+1)*c])
	}
	return m
}

// rrReference recomputes in float64, from the state before a step (θ, W_old, Ỹ[idx] and
// s, copied out of the float32 learner), what one rrStep with batch idx computes: the label
// loss and its gradient with respect to Ỹ[idx], and then (for the given updated rows ybNew)
// the gradients of the feature loss with respect to θ and s.
func rrReference(t *testing.T, f *rrFixture, idx []int64, theta [][]float64, wOld []float64, yb, ybNew mat, scale float64) (lossVal float64, gY []float64, gTheta [][]float64, gS float64) {
	s := torch.NewScope()
	defer s.Close()
	T := tT(t)
	cfg := f.cfg
	var params64 []*torch.Tensor
	for i, p := range f.l.params {
		q := T(torch.FromFloat64(theta[i], p.Shape()...))
		tOK(t, q.SetRequiresGrad(true))
		params64 = append(params64, q)
	}
	x64 := T(f.base.x.ToDType(torch.Double))
	it := T(torch.FromInt64(idx, int64(len(idx))))
	xb := T(x64.IndexSelect(0, it))
	withOnes := func(feat *torch.Tensor) *torch.Tensor {
		ones := T(torch.Ones([]int64{feat.Shape()[0], 1}, torch.WithDType(torch.Double)))
		return T(torch.Cat([]*torch.Tensor{feat, ones}, 1))
	}
	zb := withOnes(T(f.net.Features(params64, nil, xb, true)))
	ybT := yb.tensor(t)
	tOK(t, ybT.SetRequiresGrad(true))
	n := int64(len(idx))
	eye := T(torch.Eye(n, torch.WithDType(torch.Double)))
	ridge := func(y *torch.Tensor) *torch.Tensor {
		// Explicit inverse, unlike RidgeWeights' solve.
		a := T(T(zb.Mm(T(zb.T()))).Add(T(eye.MulScalar(cfg.RidgeLambda))))
		wl := T(T(zb.T()).Mm(T(T(torch.LinalgInv(a)).Mm(y))))
		wo := T(torch.FromFloat64(wOld, wl.Shape()...))
		return T(T(wo.MulScalar(1 - cfg.RidgePseudoStep)).Add(T(wl.MulScalar(cfg.RidgePseudoStep))))
	}
	xt64 := T(f.xt.ToDType(torch.Double))
	var zt *torch.Tensor
	tOK(t, torch.NoGrad(func() error {
		zt = withOnes(T(f.net.Features(params64, nil, xt64, true)))
		return nil
	}))
	// Label loss: hard CE written out with log-softmax and gather.
	w := ridge(ybT)
	logits := T(T(zt.Mm(w)).MulScalar(scale))
	logp := T(torch.LogSoftmax(logits, 1))
	picked := T(logp.Gather(1, T(f.yt.Unsqueeze(1))))
	lossT := T(T(picked.Mean()).Neg())
	lossVal = tNeed[float64](t)(lossT.Item())
	gY = tVals(t, tNeed[[]*torch.Tensor](t)(torch.Grad([]*torch.Tensor{lossT}, []*torch.Tensor{ybT}, torch.GradOpts{}))[0])
	// Feature loss: soft CE of s·Z̃·W (W from the old rows, still attached) against ybNew.
	sT := T(torch.Full([]int64{1}, scale, torch.WithDType(torch.Double), torch.WithRequiresGrad()))
	w2 := ridge(T(ybT.Detach()))
	lp := T(torch.LogSoftmax(T(T(zb.Mm(w2)).Mul(sT)), 1))
	feat := T(T(T(T(lp.Mul(ybNew.tensor(t))).Sum(1)).Mean()).Neg())
	gs := tNeed[[]*torch.Tensor](t)(torch.Grad([]*torch.Tensor{feat}, append(slices.Clone(params64), sT), torch.GradOpts{}))
	for _, g := range gs[:len(params64)] {
		gTheta = append(gTheta, tVals(t, g))
	}
	gS = tVals(t, gs[len(params64)])[0]
	return
}

// TestRRStep checks three rrSteps against independent float64 recomputations from the
// state before each step. Step 1 starts from the uniform table, where W_l has identical
// columns, so every logit ties (label loss ln 10) and the feature loss does not depend on
// θ or s; steps 2 and 3 start from random labels, where the feature step is checked too.
func TestRRStep(t *testing.T) {
	tScope(t)
	f := newRRFixture(t, 256)
	cfg, l, labels := f.cfg, f.l, f.labels
	alpha := cfg.RidgePseudoStep
	b1 := cfg.LabelBetas[0]
	mb1 := cfg.ModelBetas[0]
	modelAdam := l.opt.(*torch.Adam)
	batches := [][]int64{{0, 3, 5, 7, 8, 11, 12, 15, 17, 19}, {1, 2, 4, 6, 9, 10, 13, 14, 16, 18}, {0, 1, 2, 3, 4, 10, 11, 12, 13, 14}}
	for step, idx := range batches {
		name := fmt.Sprintf("step %d", step+1)
		if step == 1 {
			// Random rows on the simplex for the remaining steps.
			rng := tRNG(5)
			v := make([]float32, 200)
			for r := 0; r < 20; r++ {
				var sum float32
				for c := 0; c < 10; c++ {
					v[r*10+c] = float32(rng.ExpFloat64())
					sum += v[r*10+c]
				}
				for c := 0; c < 10; c++ {
					v[r*10+c] /= sum
				}
			}
			src := tT(t)(torch.FromFloat32(v, 20, 10))
			tOK(t, torch.NoGrad(func() error { return labels.Y.Copy_(src) }))
		}
		wOld := tVals(t, l.w)
		yOld := tVals(t, labels.Y)
		thetaOld := make([][]float64, len(l.params))
		mThetaOld := make([][]float64, len(l.params))
		for i, p := range l.params {
			thetaOld[i] = tVals(t, p)
			mThetaOld[i] = tVals(t, modelAdam.ExpAvg[i])
		}
		sOld := tVals(t, l.scale)[0]
		mSOld := tVals(t, l.sOpt.ExpAvg[0])[0]
		xb := tT(t)(f.base.x.IndexSelect(0, tT(t)(torch.FromInt64(idx, int64(len(idx))))))
		z := featuresWithOnes(t, l, xb)
		yb := rowsOf(yOld, 10, idx)
		wl := ridgeDual(z, yb, cfg.RidgeLambda)
		mBefore := tVals(t, labels.opt.ExpAvg[0])

		st, err := readStep(labelStep(rrStep, l, labels, f.base.x, tT(t)(torch.FromInt64(idx, int64(len(idx)))), f.xt, f.yt))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}

		// W = (1 − α)·W_old + α·W_l, i.e. (W − (1 − α)·W_old)/α = W_l.
		wNew := tVals(t, l.w)
		implied := make([]float64, len(wNew))
		var wmax float64
		for i := range wNew {
			implied[i] = (wNew[i] - (1-alpha)*wOld[i]) / alpha
			wmax = max(wmax, math.Abs(wNew[i]))
		}
		if wmax == 0 {
			t.Fatalf("%s: W is zero after the step", name)
		}
		dW, sW := maxAbsDiff(implied, wl.v)
		t.Logf("%s: W_l error %.3g (scale %.3g)", name, dW, sW)
		if dW > 1e-5*sW {
			t.Errorf("%s: (W − (1−α)W_old)/α differs from an independent W_l by %.3g (scale %.3g)", name, dW, sW)
		}

		// The label loss and its gradient (from the label Adam's first moment,
		// m = β1·m_old + (1 − β1)·g).
		lossRef, gY, _, _ := rrReference(t, f, idx, thetaOld, wOld, yb, yb, sOld)
		if math.Abs(st.LabelLoss-lossRef) > 1e-5*max(1, lossRef) {
			t.Errorf("%s: label loss %.8g, independent %.8g", name, st.LabelLoss, lossRef)
		}
		if step == 0 && math.Abs(st.LabelLoss-math.Log(10)) > 1e-5 {
			t.Errorf("step 1: label loss %.8g from uniform labels, want ln 10 = %.8g", st.LabelLoss, math.Log(10))
		}
		mAfter := tVals(t, labels.opt.ExpAvg[0])
		gImpl := make([]float64, len(mAfter))
		for i := range mAfter {
			gImpl[i] = (mAfter[i] - b1*mBefore[i]) / (1 - b1)
		}
		gImplRows := rowsOf(gImpl, 10, idx)
		dg, sg := maxAbsDiff(gImplRows.v, gY)
		t.Logf("%s: label-gradient error %.3g (scale %.3g); label loss %.8g, independent %.8g", name, dg, sg, st.LabelLoss, lossRef)
		if dg > 1e-4*sg || sg == 0 {
			t.Errorf("%s: label gradient differs from an independent float64 one by %.3g (scale %.3g)", name, dg, sg)
		}
		inBatch := map[int64]bool{}
		for _, r := range idx {
			inBatch[r] = true
		}
		yNew := tVals(t, labels.Y)
		for r := 0; r < 20; r++ {
			var sum, moved, gabs float64
			for c := 0; c < 10; c++ {
				sum += yNew[r*10+c]
				moved = max(moved, math.Abs(yNew[r*10+c]-yOld[r*10+c]))
				gabs = max(gabs, math.Abs(gImpl[r*10+c]))
			}
			if math.Abs(sum-1) > 1e-5 {
				t.Errorf("%s: row %d sums to %v", name, r, sum)
			}
			if !inBatch[int64(r)] && gabs > 1e-6*math.Abs(gImplRows.v[0])+1e-30 && step == 0 {
				t.Errorf("step 1: row %d outside the batch has a label gradient %g", r, gabs)
			}
			if step == 0 && !inBatch[int64(r)] && moved > 1e-7 {
				t.Errorf("step 1: row %d outside the batch moved by %g", r, moved)
			}
			if inBatch[int64(r)] && moved < 1e-4 {
				t.Errorf("%s: batch row %d moved only %g", name, r, moved)
			}
		}

		// θ moved (even at step 1, where Adam normalises a rounding-level gradient).
		for i := range l.params {
			if d, _ := maxAbsDiff(tVals(t, l.params[i]), thetaOld[i]); d == 0 {
				t.Errorf("%s: parameter %s did not move", name, l.specs[i].Name)
			} else if step == 0 && d > cfg.ModelLR*1.001 {
				t.Errorf("step 1: parameter %s moved by %g, more than Adam's first-step bound lr", l.specs[i].Name, d)
			}
		}
		sNow := tVals(t, l.scale)[0]
		if sNow == sOld {
			t.Errorf("%s: s did not move", name)
		}
		if step == 0 {
			continue
		}

		// The feature step: soft CE against the updated rows through the attached W; its
		// gradient with respect to θ and s, from the Adams' first moments.
		ybNew := rowsOf(yNew, 10, idx)
		_, _, gTheta, gS := rrReference(t, f, idx, thetaOld, wOld, yb, ybNew, sOld)
		_, _, gThetaOldRows, _ := rrReference(t, f, idx, thetaOld, wOld, yb, yb, sOld)
		var errNew, errOld, scaleG float64
		for i := range l.params {
			m := tVals(t, modelAdam.ExpAvg[i])
			for j := range m {
				g := (m[j] - mb1*mThetaOld[i][j]) / (1 - mb1)
				errNew = max(errNew, math.Abs(g-gTheta[i][j]))
				errOld = max(errOld, math.Abs(g-gThetaOldRows[i][j]))
				scaleG = max(scaleG, math.Abs(gTheta[i][j]))
			}
		}
		t.Logf("%s: θ-gradient error %.3g against the updated labels, %.3g against the old ones (scale %.3g)", name, errNew, errOld, scaleG)
		if errNew > 1e-4*scaleG || scaleG == 0 {
			t.Errorf("%s: θ gradient differs from the independent one (updated labels, attached W) by %.3g (scale %.3g)", name, errNew, scaleG)
		}
		if errOld < 10*errNew {
			t.Errorf("%s: θ gradient matches the pre-step labels (error %.3g) about as well as the updated ones (%.3g)", name, errOld, errNew)
		}
		gSImpl := (tVals(t, l.sOpt.ExpAvg[0])[0] - mb1*mSOld) / (1 - mb1)
		t.Logf("%s: ∂/∂s %.8g, independent %.8g", name, gSImpl, gS)
		if math.Abs(gSImpl-gS) > 1e-5*math.Abs(gS) || gS == 0 {
			t.Errorf("%s: ∂/∂s %.6g, independent %.6g", name, gSImpl, gS)
		}
	}
}
