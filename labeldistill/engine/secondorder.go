package engine

// secondorder.go: one second-order LD meta-iteration (docs/ALGORITHM.md §4).

import (
	"fmt"
	"strings"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
)

// ldStep: inner soft-CE on the N_i base examples of b with their labels; one differentiable
// SGD step θ' = θ − α∇θ (create_graph); CE of θ' on the target batch, differentiated with
// respect to the learnt values only (no parameter gradients are computed for it, unlike the
// reference); the update (combined over the ranks: an Adam step on the labels and the
// projection); then an Adam step on θ with ∂inner/∂θ (computed with the values from before
// the update). Nothing is read back to the host: the label loss and the target error are
// left in the outputs, in the caller's scope. With b.shard the inner loss is this rank's
// base rows' part, summed over the ranks (baseShard).
func ldStep(l *learner, b metaBatch) (stepOutputs, error) {
	s := torch.NewScope()
	defer s.Close()
	var c torch.Chain
	alpha := l.cfg.InnerLR
	x, y := b.x, b.y
	if b.shard != nil {
		x, y = c.T(b.shard.rows(x)), c.T(b.shard.rows(y))
	}
	inner := c.T(torch.SoftCrossEntropy(c.T(l.net.Forward(l.params, l.buffers, x, true)), y))
	if b.shard != nil {
		inner = c.T(inner.MulScalar(b.shard.share())) // this rank's part of the whole batch's mean
	}
	if c.Err() != nil {
		return stepOutputs{}, c.Err()
	}
	g, err := torch.Grad([]*torch.Tensor{inner}, l.params, torch.GradOpts{CreateGraph: true})
	if err != nil {
		return stepOutputs{}, err
	}
	fast, whole, err := innerStep(l, g, b.shard, alpha, &c)
	if err != nil {
		return stepOutputs{}, err
	}
	logitsT := c.T(l.net.Forward(fast, l.buffers, b.xt, true))
	labelLoss := c.T(torch.CrossEntropyInRange(logitsT, b.yt)) // yt: dataset labels, checked on load
	wrong := c.T(train.WrongCount(logitsT, b.yt))
	if c.Err() != nil {
		return stepOutputs{}, c.Err()
	}
	var dY []*torch.Tensor
	if b.shard == nil {
		dY, err = torch.Grad([]*torch.Tensor{labelLoss}, b.params, torch.GradOpts{})
	} else {
		dY, err = b.shard.labelGradient(labelLoss, fast, b.params, float64(b.xt.Shape()[0])/float64(b.total))
	}
	if err != nil {
		return stepOutputs{}, noDoubleBackward(l.net, config.MethodLD, err)
	}
	out, err := b.update(dY, c.T(labelLoss.Detach()), wrong)
	if err != nil {
		return stepOutputs{}, err
	}
	if l.frozen {
		s.Keep(out.loss, out.wrong)
		return out, nil
	}
	if l.stepsOnUpdated { // the authors' image code: the inner loss again, on the updated values
		xu, yu, err := b.current()
		if err != nil {
			return stepOutputs{}, err
		}
		again := c.T(torch.SoftCrossEntropy(c.T(l.net.Forward(l.params, l.buffers, xu, true)), yu))
		if c.Err() != nil {
			return stepOutputs{}, c.Err()
		}
		if whole, err = torch.Grad([]*torch.Tensor{again}, l.params, torch.GradOpts{}); err != nil {
			return stepOutputs{}, err
		}
	}
	if err := l.opt.StepWith(whole); err != nil {
		return stepOutputs{}, err
	}
	s.Keep(out.loss, out.wrong)
	return out, nil
}

// innerStep is θ′ = θ − α·g, attached to the labels through g, and the inner gradient
// itself, detached, for the model's Adam step. With shard, g is this rank's rows' part:
// the ranks' parts are summed (G), and θ′ takes the value θ − α·G (the same bits on every
// rank) while its graph reaches the labels through this rank's part alone (g − g.detach()
// adds exactly zero).
func innerStep(l *learner, g []*torch.Tensor, shard *baseShard, alpha float64, c *torch.Chain) (fast, whole []*torch.Tensor, err error) {
	fast = make([]*torch.Tensor, len(g))
	whole = make([]*torch.Tensor, len(g))
	for i := range g {
		whole[i] = c.T(g[i].Detach())
	}
	if shard == nil {
		for i := range g {
			fast[i] = c.T(l.params[i].Sub(c.T(g[i].MulScalar(alpha))))
		}
		return fast, whole, c.Err()
	}
	for i := range whole {
		whole[i] = c.T(whole[i].Clone()) // summed in place below; g keeps its values and graph
	}
	if c.Err() != nil {
		return nil, nil, c.Err()
	}
	if err := shard.sum(whole); err != nil {
		return nil, nil, err
	}
	for i := range g {
		stepped := c.T(c.T(l.params[i].Detach()).Sub(c.T(whole[i].MulScalar(alpha))))
		zero := c.T(g[i].Sub(c.T(g[i].Detach())))
		fast[i] = c.T(stepped.Sub(c.T(zero.MulScalar(alpha))))
	}
	return fast, whole, c.Err()
}

// noDoubleBackward names the file and the way out when the meta-gradient of LD or of
// method dd fails through a TorchScript network: the gradient of the target loss after an
// inner step θ′ = θ − α∇θ passes through ∇θ, the derivative of every operator the module
// runs must itself be differentiable, and libtorch has none for some (grid_sample's
// backward). LD RR differentiates the network once, so it runs through such a module, for
// labels or images. Other errors, and nets' own networks (whose operators all have one),
// are returned as they are.
func noDoubleBackward(net *nets.Net, method string, err error) error {
	if !nets.IsTorchScript(net.Arch) || !strings.Contains(err.Error(), "is not implemented") {
		return err
	}
	who, what, way := "LD", "the inner step's gradient", "--method rr"
	if method == config.MethodDD {
		who, what, way = "method dd", "each unrolled step's gradient", "--method rr --learn images, which learns images"
	}
	return fmt.Errorf("torchscript %s: %s needs the second derivative of every operator the module runs "+
		"(its meta-gradient differentiates %s), and libtorch has none for one of them: %w; "+
		"method rr differentiates the network once and runs through this module (%s)",
		strings.TrimPrefix(net.Arch, nets.TorchScriptPrefix), who, what, err, way)
}
