package engine

// learnable.go: what the meta-loop learns. A learnable is a value with its own optimiser
// step, state (checkpoint members and optimiser step counts) and place in the base batch;
// the loop builds each meta-step's base batch from the learnables, takes the meta-gradient
// with respect to their parameters, reduces those gradients over the ranks in its one
// all-reduce (parallel.combine), and hands each learnable its part. The labels (labels.go)
// are the learnable of label distillation.

import (
	"github.com/ldtorch/ldtorch/torch"
)

type learnable interface {
	// name prefixes its checkpoint members and names it in messages ("labels").
	name() string
	// params are the tensors the meta-gradient is taken with respect to (leaves that
	// require grad).
	params() []*torch.Tensor
	// batch puts the learnt value into the base batch: x (B, C, H, W) and y (B, classes) of
	// the base examples idx (nil: all of them; y is nil where no fixed labels exist),
	// with the graph to params, or detached.
	batch(idx, x, y *torch.Tensor, detach bool) (*torch.Tensor, *torch.Tensor, error)
	// step takes one optimiser step with the meta-gradients of params, combined over the
	// ranks, in params' order.
	step(grads []*torch.Tensor) error
	// state lists its tensors (params first, then optimiser state) by checkpoint member
	// name; optimizers its Adams, whose step counts the checkpoint records by name.
	state() []namedTensor
	optimizers() []namedAdam
	close()
}

// namedTensor is one tensor of a run's state and its member name in a checkpoint.
type namedTensor struct {
	name string
	t    *torch.Tensor
}

// namedAdam is an optimiser of a run's state, named in the checkpoint's step counts.
type namedAdam struct {
	name string
	opt  *torch.Adam
}

// metaBatch is one meta-step's data: the base batch with the learnt values in it, the
// parameters to differentiate, and this rank's shard of the target batch.
type metaBatch struct {
	idx, x, y *torch.Tensor // base indices and their (images, labels), graph to params
	params    []*torch.Tensor
	xt, yt    *torch.Tensor // target images and dataset labels (checked on load)
	total     int           // target examples of the whole batch, every rank's
	// update combines the meta-gradients of params (and the shard's mean loss and wrong
	// count) over the ranks and steps the learnables; it returns the step's outputs for
	// the whole batch. current is the base batch after the update, detached.
	update  func(grads []*torch.Tensor, loss, wrong *torch.Tensor) (stepOutputs, error)
	current func() (x, y *torch.Tensor, err error)
	// shard, when not nil, is this rank's part of the base batch (a data-parallel run that
	// learns labels): the method runs the network on its rows only (baseShard).
	shard *baseShard
}

// metaMethod is one meta-step through model m (ldStep, §4; rrStep, §5): the meta-gradient
// of the target loss with respect to b.params, handed to b.update, then the model's own
// step. Its outputs are left on the device, in the caller's scope.
type metaMethod func(m *learner, b metaBatch) (stepOutputs, error)

// soloBatch is the metaBatch of learnable v alone in a lone process, on the base examples
// idx of baseX and the target batch (xt, yt); onGrads, when set, sees the meta-gradients
// before v's step (the gradient-variance measurement; the tests).
func soloBatch(v learnable, baseX, idx, xt, yt *torch.Tensor, onGrads func([]*torch.Tensor) error) (metaBatch, error) {
	b := metaBatch{idx: idx, params: v.params(), xt: xt, yt: yt, total: int(xt.Shape()[0])}
	x, err := baseX.IndexSelect(0, idx)
	if err != nil {
		return b, err
	}
	if b.x, b.y, err = v.batch(idx, x, nil, false); err != nil {
		return b, err
	}
	b.update = func(grads []*torch.Tensor, loss, wrong *torch.Tensor) (stepOutputs, error) {
		if onGrads != nil {
			if err := onGrads(grads); err != nil {
				return stepOutputs{}, err
			}
		}
		return stepOutputs{loss: loss, wrong: wrong, batch: int64(b.total)}, v.step(grads)
	}
	b.current = func() (*torch.Tensor, *torch.Tensor, error) { return v.batch(idx, x, nil, true) }
	return b, nil
}
