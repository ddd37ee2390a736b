package labeldistill

// ridge.go: one LD RR meta-iteration (docs/ALGORITHM.md §5): the ridge-regression closed form in
// its Woodbury form, the pseudo-gradient step on the global W, and the learned scale s.

import (
	"fmt"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/torch"
)

// RidgeWeights returns W = Zᵀ (Z Zᵀ + λI)⁻¹ Y for Z (n, d+1) and Y (n, C): the ridge solution
// through an n×n linear system (n = N_i is far smaller than d+1), solved rather than
// inverted. The bias column of Z is regularised too, as in the reference. A singular system
// is an error (its check reads the solver's status back to the host).
func RidgeWeights(z, y *torch.Tensor, lambda float64) (*torch.Tensor, error) {
	w, info, err := ridgeWeightsUnchecked(z, y, lambda)
	if err != nil {
		return nil, err
	}
	defer info.Free()
	status, err := info.Item()
	if err != nil {
		return nil, err
	}
	if status != 0 {
		w.Free()
		return nil, fmt.Errorf("ridge solve: the system is singular (linalg_solve info %v)", status)
	}
	return w, nil
}

// ridgeWeightsUnchecked is RidgeWeights without the solve's error check (a host read): it
// returns the solve's status (info, 0 = solved) for the caller to read later. The same
// arithmetic, so the same W. Z and Y may also carry a leading model dimension ((M, n, d+1)
// and (M, n, C)): one batched solve, W_m from model m's own Z_m and Y_m (the matrix
// products are torch.Matmul, which is mm for matrices and bmm for stacks of them).
func ridgeWeightsUnchecked(z, y *torch.Tensor, lambda float64) (w, info *torch.Tensor, err error) {
	var c torch.Chain
	rank := int64(len(z.Shape()))
	zt := c.T(z.Transpose(rank-2, rank-1))
	n := z.Shape()[rank-2]
	eye := c.T(torch.Eye(n, torch.WithDType(z.DType()), torch.OnDevice(z.Device())))
	a := c.T(c.T(z.Matmul(zt)).Add(c.T(eye.MulScalar(lambda))))
	if c.Err() != nil {
		return nil, nil, c.Err()
	}
	sol, info, err := torch.LinalgSolveEx(a, y)
	if err != nil {
		return nil, nil, err
	}
	w = c.T(zt.Matmul(sol))
	return w, info, c.Err()
}

// pseudoStep returns (1 − α)·W + α·W_l, with W detached (it carries no graph).
func pseudoStep(w, wl *torch.Tensor, alpha float64) (*torch.Tensor, error) {
	var c torch.Chain
	out := c.T(c.T(w.MulScalar(1 - alpha)).Add(c.T(wl.MulScalar(alpha))))
	return out, c.Err()
}

// rrWeights is §5 steps 2–3, written once for the meta-step and every evaluation model:
// W_l by ridge regression of the labels y on the features z (with their bias column), then
// the pseudo-gradient step from the kept W. The solve's status is left unread in info (a
// failed solve shows as non-finite numbers later). Shapes as ridgeWeightsUnchecked.
func rrWeights(z, y, kept *torch.Tensor, cfg config.Config) (w, info *torch.Tensor, err error) {
	wl, info, err := ridgeWeightsUnchecked(z, y, cfg.RidgeLambda)
	if err != nil {
		return nil, nil, err
	}
	w, err = pseudoStep(kept, wl, cfg.RidgePseudoStep)
	return w, info, err
}

// rrLogits is s·Z·W: the RR head's training-time logits (scale s of shape (1), or (M, 1, 1)
// for stacks of models).
func rrLogits(z, w, scale *torch.Tensor) (*torch.Tensor, error) {
	var c torch.Chain
	out := c.T(c.T(z.Matmul(w)).Mul(scale))
	return out, c.Err()
}

// rrStep: W_l from the N_i base features and labels of b; W ← (1−α)W + αW_l; CE of
// s·[f(x),1]·W on the target batch (the target features need a forward pass only, without a
// graph), differentiated with respect to the learnt values; the update (combined over the
// ranks); then soft-CE of the base batch under the same, still attached W against the
// updated labels, whose gradient reaches θ through the features and the ridge solve, and s;
// Adam steps on θ and s. Nothing is read back to the host: the label loss, the target error
// and the solve's status are left in the outputs, in the caller's scope.
func rrStep(l *learner, b metaBatch) (stepOutputs, error) {
	s := torch.NewScope()
	defer s.Close()
	var c torch.Chain
	zb := c.T(l.features(b.x, true))
	if c.Err() != nil {
		return stepOutputs{}, c.Err()
	}
	w, info, err := rrWeights(zb, b.y, l.w, l.cfg)
	if err != nil {
		return stepOutputs{}, err
	}
	var zt *torch.Tensor
	c.Check(torch.NoGrad(func() (err error) {
		zt, err = l.features(b.xt, true)
		return err
	}))
	logitsT := c.T(rrLogits(zt, w, l.scale))
	labelLoss := c.T(torch.CrossEntropyInRange(logitsT, b.yt)) // yt: dataset labels, checked on load
	wrong := c.T(wrongCount(logitsT, b.yt))
	if c.Err() != nil {
		return stepOutputs{}, c.Err()
	}
	dY, err := torch.Grad([]*torch.Tensor{labelLoss}, b.params, torch.GradOpts{RetainGraph: true})
	if err != nil {
		return stepOutputs{}, err
	}
	out, err := b.update(dY, c.T(labelLoss.Detach()), wrong)
	if err != nil {
		return stepOutputs{}, err
	}
	out.info = info
	_, ybNew, err := b.current()
	if err != nil {
		return stepOutputs{}, err
	}
	if err := rrFeatureStep(l, zb, w, ybNew, &c); err != nil {
		return stepOutputs{}, err
	}
	s.Keep(out.loss, out.wrong, out.info)
	return out, nil
}

// rrFeatureStep is §5 step 5 of the meta-step: soft-CE of s·Z·W against the (updated)
// labels, Adam on θ and s, and W kept (detached) for the next step. (Evaluation models take
// the same step in batchedLearner.step.)
func rrFeatureStep(l *learner, zb, w, yb *torch.Tensor, c *torch.Chain) error {
	featLoss := c.T(torch.SoftCrossEntropy(c.T(rrLogits(zb, w, l.scale)), yb))
	if c.Err() != nil {
		return c.Err()
	}
	if err := descend(featLoss, l.params, l.opt, []*torch.Tensor{l.scale}, l.sOpt); err != nil {
		return err
	}
	return torch.NoGrad(func() error { return l.w.Copy_(w) })
}
