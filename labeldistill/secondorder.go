package labeldistill

// secondorder.go: one second-order LD meta-iteration (docs/ALGORITHM.md §4).

import (
	"github.com/ldtorch/ldtorch/torch"
)

// ldStep: inner soft-CE on N_i base examples with their labels; one differentiable SGD step
// θ' = θ − α∇θ (create_graph); CE of θ' on the target batch, differentiated with respect
// to the labels only (no parameter gradients are computed for it, unlike the reference);
// an Adam step on the labels and the projection; then an Adam step on θ with ∂inner/∂θ
// (computed with the labels from before the label step). Nothing is read back to the
// host: the label loss and the target error are left in the outputs, in the caller's scope.
//
// In a data-parallel run (p of size > 1), xt and yt are this rank's shard of a batch of
// total target examples, and the label gradient, loss and error count are combined over
// the ranks (p.combine) before the label step, so every rank takes the same one.
func ldStep(l *learner, labels *Labels, baseX, idx, xt, yt *torch.Tensor, alpha float64, p *parallel, total int) (stepOutputs, error) {
	s := torch.NewScope()
	defer s.Close()
	var c torch.Chain
	xb := c.T(baseX.IndexSelect(0, idx))
	yb := c.T(labels.Y.IndexSelect(0, idx))
	inner := c.T(torch.SoftCrossEntropy(c.T(l.net.Forward(l.params, l.buffers, xb, true)), yb))
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
	logitsT := c.T(l.net.Forward(fast, l.buffers, xt, true))
	labelLoss := c.T(torch.CrossEntropyInRange(logitsT, yt)) // yt: dataset labels, checked on load
	wrong := c.T(wrongCount(logitsT, yt))
	if c.Err() != nil {
		return stepOutputs{}, c.Err()
	}
	dY, err := torch.Grad([]*torch.Tensor{labelLoss}, []*torch.Tensor{labels.Y}, torch.GradOpts{})
	if err != nil {
		return stepOutputs{}, err
	}
	dYAll, out, err := p.combine(dY[0], c.T(labelLoss.Detach()), wrong, int(xt.Shape()[0]), total)
	if err != nil {
		return stepOutputs{}, err
	}
	if err := labels.Step(dYAll); err != nil {
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
