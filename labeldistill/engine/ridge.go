package engine

// ridge.go: one LD RR meta-iteration (docs/ALGORITHM.md §5): the ridge-regression closed form in
// its Woodbury form, the pseudo-gradient step on the global W, and the learned scale s.

import (
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/torch"
)

// rrStep: W_l from the N_i base features and labels of b; W ← (1−α)W + αW_l; CE of
// s·[f(x),1]·W on the target batch (the target features need a forward pass only, without a
// graph), differentiated with respect to the learnt values; the update (combined over the
// ranks); then soft-CE of the base batch under the same, still attached W against the
// updated labels, whose gradient reaches θ through the features and the ridge solve, and s;
// Adam steps on θ and s. Nothing is read back to the host: the label loss, the target error
// and the solve's status are left in the outputs, in the caller's scope. With b.shard the
// base features are this rank's rows computed and the others' received (while the target
// features are computed), and θ's gradient is summed over the ranks (baseShard).
func rrStep(l *learner, b metaBatch) (stepOutputs, error) {
	s := torch.NewScope()
	defer s.Close()
	var c torch.Chain
	var zb, zt *torch.Tensor
	if b.shard != nil {
		gather, err := b.shard.startFeatures(l, b.x)
		if err != nil {
			return stepOutputs{}, err
		}
		zt = c.T(l.targetFeatures(b.xt)) // θ only: computed while the ranks exchange the base features
		zb = c.T(gather.finish())        // also after an error above: every started collective ends
		if c.Err() != nil {
			return stepOutputs{}, c.Err()
		}
	}
	h, err := rrHead(l, b, zb, zt)
	if err != nil {
		return stepOutputs{}, err
	}
	zb, w, info, logitsT := h.zb, h.w, h.info, h.logits
	labelLoss := c.T(torch.CrossEntropyInRange(logitsT, b.yt)) // yt: dataset labels, checked on load
	wrong := c.T(train.WrongCount(logitsT, b.yt))
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
	if err := rrFeatureStep(l, zb, w, ybNew, b.shard, &c); err != nil {
		return stepOutputs{}, err
	}
	s.Keep(out.loss, out.wrong, out.info)
	return out, nil
}

// rrHeadOut is one model's head at a meta-step.
type rrHeadOut struct {
	zb, w, info, logits *torch.Tensor // base features (attached), W and the solve's status, target logits
}

// rrHead: the base features (unless given), the ridge solve for W, the target features
// (unless given; without a graph) and the target batch's logits, in the caller's scope.
// rrStep and rrStepTogether's model-by-model path share it, so the two compute alike.
func rrHead(l *learner, b metaBatch, zb, zt *torch.Tensor) (rrHeadOut, error) {
	var c torch.Chain
	if zb == nil {
		zb = c.T(l.features(b.x, true))
	}
	if c.Err() != nil {
		return rrHeadOut{}, c.Err()
	}
	w, info, err := train.RRWeights(zb, b.y, l.w, l.cfg)
	if err != nil {
		return rrHeadOut{}, err
	}
	if zt == nil {
		zt = c.T(l.targetFeatures(b.xt))
	}
	logits := c.T(train.RRLogits(zt, w, l.scale))
	return rrHeadOut{zb: zb, w: w, info: info, logits: logits}, c.Err()
}

// targetFeatures are the target batch's features under θ, without a graph.
func (l *learner) targetFeatures(xt *torch.Tensor) (zt *torch.Tensor, err error) {
	err = torch.NoGrad(func() (err error) {
		zt, err = l.features(xt, true)
		return err
	})
	return zt, err
}

// rrFeatureStep is §5 step 5 of the meta-step: soft-CE of s·Z·W against the (updated)
// labels, Adam on θ and s, and W kept (detached) for the next step. (Evaluation models take
// the same step in train.Models.Step.)
func rrFeatureStep(l *learner, zb, w, yb *torch.Tensor, shard *baseShard, c *torch.Chain) error {
	featLoss := c.T(torch.SoftCrossEntropy(c.T(train.RRLogits(zb, w, l.scale)), yb))
	if c.Err() != nil {
		return c.Err()
	}
	if l.frozen {
		g, err := torch.Grad([]*torch.Tensor{featLoss}, []*torch.Tensor{l.scale}, torch.GradOpts{})
		if err != nil {
			return err
		}
		if err := l.sOpt.StepWith(g); err != nil {
			return err
		}
		return torch.NoGrad(func() error { return l.w.Copy_(w) })
	}
	var combine func([]*torch.Tensor) error // a split base batch: θ's gradient is the ranks' parts summed
	if shard != nil {
		combine = shard.sum
	}
	if err := train.DescendCombined(featLoss, l.params, l.opt, []*torch.Tensor{l.scale}, l.sOpt, combine); err != nil {
		return err
	}
	return torch.NoGrad(func() error { return l.w.Copy_(w) })
}
