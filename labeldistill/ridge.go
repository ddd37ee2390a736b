package labeldistill

// ridge.go: one LD RR meta-iteration (docs/ALGORITHM.md §5): the ridge-regression closed form in
// its Woodbury form, the pseudo-gradient step on the global W, and the learned scale s.

import (
	"github.com/ldtorch/ldtorch/torch"
)

// RidgeWeights returns W = Zᵀ (Z Zᵀ + λI)⁻¹ Y for Z (n, d+1) and Y (n, C): the ridge solution
// through an n×n linear system (n = N_i is far smaller than d+1), solved rather than
// inverted. The bias column of Z is regularised too, as in the reference.
func RidgeWeights(z, y *torch.Tensor, lambda float64) (*torch.Tensor, error) {
	var c torch.Chain
	zt := c.T(z.T())
	n := z.Shape()[0]
	eye := c.T(torch.Eye(n, torch.WithDType(z.DType()), torch.OnDevice(z.Device())))
	a := c.T(c.T(z.Mm(zt)).Add(c.T(eye.MulScalar(lambda))))
	sol := c.T(torch.LinalgSolve(a, y))
	w := c.T(zt.Mm(sol))
	return w, c.Err()
}

// pseudoStep returns (1 − α)·W + α·W_l, with W detached (it carries no graph).
func pseudoStep(w, wl *torch.Tensor, alpha float64) (*torch.Tensor, error) {
	var c torch.Chain
	out := c.T(c.T(w.MulScalar(1 - alpha)).Add(c.T(wl.MulScalar(alpha))))
	return out, c.Err()
}

// rrStep: W_l from N_i base features and labels; W ← (1−α)W + αW_l; CE of s·[f(x),1]·W on
// the target batch (the target features need a forward pass only, without a graph),
// differentiated with respect to the labels; the label step; then soft-CE of the base
// batch under the same, still attached W against the updated labels, whose gradient
// reaches θ through the features and the ridge solve, and s; Adam steps on θ and s.
// In a data-parallel run, xt and yt are this rank's shard of total target examples and
// the label gradient is combined over the ranks as in ldStep.
func rrStep(l *learner, labels *Labels, baseX, idx, xt, yt *torch.Tensor, cfg Config, p *parallel, total int) (stepStats, error) {
	s := torch.NewScope()
	defer s.Close()
	var c torch.Chain
	st := stepStats{}
	xb := c.T(baseX.IndexSelect(0, idx))
	yb := c.T(labels.Y.IndexSelect(0, idx))
	zb := c.T(l.features(xb, true))
	if c.Err() != nil {
		return st, c.Err()
	}
	wl, err := RidgeWeights(zb, yb, cfg.RidgeLambda)
	if err != nil {
		return st, err
	}
	w := c.T(pseudoStep(l.w, wl, cfg.RidgePseudoStep))
	var zt *torch.Tensor
	c.Check(torch.NoGrad(func() (err error) {
		zt, err = l.features(xt, true)
		return err
	}))
	logitsT := c.T(c.T(zt.Mm(w)).Mul(l.scale))
	labelLoss := c.T(torch.CrossEntropy(logitsT, yt))
	if c.Err() != nil {
		return st, c.Err()
	}
	if st.LabelLoss, err = labelLoss.Item(); err != nil {
		return st, err
	}
	if st.Error, err = errorPercent(logitsT, yt); err != nil {
		return st, err
	}
	dY, err := torch.Grad([]*torch.Tensor{labelLoss}, []*torch.Tensor{labels.Y}, torch.GradOpts{RetainGraph: true})
	if err != nil {
		return st, err
	}
	dYAll, st, err := p.combine(dY[0], st, int(xt.Shape()[0]), total)
	if err != nil {
		return st, err
	}
	if !finite(st.LabelLoss) {
		return st, &NonFiniteError{Quantity: "label loss", Value: st.LabelLoss}
	}
	if err := labels.Step(dYAll); err != nil {
		return st, err
	}
	ybNew := c.T(c.T(labels.Y.Detach()).IndexSelect(0, idx))
	return st, rrFeatureStep(l, zb, w, ybNew, &c)
}

// rrFeatureStep is §5 step 5 (shared with RR evaluation models): soft-CE of s·Z·W against
// the labels, Adam on θ and s, and W kept (detached) for the next step.
func rrFeatureStep(l *learner, zb, w, yb *torch.Tensor, c *torch.Chain) error {
	featLoss := c.T(torch.SoftCrossEntropy(c.T(c.T(zb.Mm(w)).Mul(l.scale)), yb))
	if c.Err() != nil {
		return c.Err()
	}
	if err := descend(featLoss, l.params, l.opt, []*torch.Tensor{l.scale}, l.sOpt); err != nil {
		return err
	}
	return torch.NoGrad(func() error { return l.w.Copy_(w) })
}
