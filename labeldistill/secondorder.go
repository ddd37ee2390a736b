package labeldistill

// secondorder.go: one second-order LD meta-iteration (docs/ALGORITHM.md §4).

import (
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/torch"
)

// ldStep: inner soft-CE on the N_i base examples of b with their labels; one differentiable
// SGD step θ' = θ − α∇θ (create_graph); CE of θ' on the target batch, differentiated with
// respect to the learnt values only (no parameter gradients are computed for it, unlike the
// reference); the update (combined over the ranks: an Adam step on the labels and the
// projection); then an Adam step on θ with ∂inner/∂θ (computed with the values from before
// the update). Nothing is read back to the host: the label loss and the target error are
// left in the outputs, in the caller's scope.
func ldStep(l *learner, b metaBatch) (stepOutputs, error) {
	s := torch.NewScope()
	defer s.Close()
	var c torch.Chain
	alpha := l.cfg.InnerLR
	inner := c.T(torch.SoftCrossEntropy(c.T(l.net.Forward(l.params, l.buffers, b.x, true)), b.y))
	if c.Err() != nil {
		return stepOutputs{}, c.Err()
	}
	g, err := torch.Grad([]*torch.Tensor{inner}, l.params, torch.GradOpts{CreateGraph: true})
	if err != nil {
		return stepOutputs{}, err
	}
	fast := make([]*torch.Tensor, len(g))
	for i := range g {
		fast[i] = c.T(l.params[i].Sub(c.T(g[i].MulScalar(alpha))))
	}
	logitsT := c.T(l.net.Forward(fast, l.buffers, b.xt, true))
	labelLoss := c.T(torch.CrossEntropyInRange(logitsT, b.yt)) // yt: dataset labels, checked on load
	wrong := c.T(train.WrongCount(logitsT, b.yt))
	if c.Err() != nil {
		return stepOutputs{}, c.Err()
	}
	dY, err := torch.Grad([]*torch.Tensor{labelLoss}, b.params, torch.GradOpts{})
	if err != nil {
		return stepOutputs{}, err
	}
	out, err := b.update(dY, c.T(labelLoss.Detach()), wrong)
	if err != nil {
		return stepOutputs{}, err
	}
	detached := make([]*torch.Tensor, len(g))
	for i := range g {
		detached[i] = c.T(g[i].Detach())
	}
	if c.Err() != nil {
		return stepOutputs{}, c.Err()
	}
	if err := l.opt.StepWith(detached); err != nil {
		return stepOutputs{}, err
	}
	s.Keep(out.loss, out.wrong)
	return out, nil
}
