package engine

// learner.go: the model being trained inside the meta-loop or an evaluation run: network,
// parameters, buffers, Adam, and for RR the global ridge weights W and the scale s.

import (
	"fmt"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
)

// learner holds one model's state. For LD it is a full classifier; for RR it is the
// network's body plus W ((d+1)×C, no grad) and the learned scale s.
type learner struct {
	net     *nets.Net
	rr      bool
	specs   []nets.ParamSpec
	params  []*torch.Tensor
	buffers []*torch.Tensor
	opt     train.Optimizer
	w       *torch.Tensor // RR only
	scale   *torch.Tensor // RR only, shape (1)
	sOpt    *torch.Adam   // RR only
	cfg     config.Config
	// frozen: θ takes no step in this meta-step (RR's s and W still do): Config.ModelTraining.
	frozen bool
	// stepsOnUpdated: LD's θ steps on the inner loss recomputed with the updated learnt
	// values, as the authors' second-order image code does (compat authors), instead of the
	// inner gradient from before the update.
	stepsOnUpdated bool
}

// newLearner initialises a model from gen (a CPU generator).
func newLearner(net *nets.Net, rr bool, cfg config.Config, spec train.OptSpec, gen *torch.Generator, dev torch.Device) (*learner, error) {
	l := &learner{net: net, rr: rr, cfg: cfg}
	l.specs = net.Params()
	if rr {
		l.specs = net.Body
	}
	var err error
	if l.params, err = nets.InitParams(l.specs, gen, dev, torch.Float); err != nil {
		return nil, err
	}
	if l.buffers, err = nets.NewBuffers(net.Buffers, dev, torch.Float); err != nil {
		l.close()
		return nil, err
	}
	if l.opt, err = train.NewOptimizer(spec, cfg, l.params); err != nil {
		l.close()
		return nil, err
	}
	if rr {
		if l.w, err = torch.Zeros([]int64{net.FeatureDim + 1, net.Classes}, torch.OnDevice(dev)); err != nil {
			l.close()
			return nil, err
		}
		torch.Escape(l.w)
		if l.scale, err = torch.Full([]int64{1}, cfg.ScaleInit, torch.OnDevice(dev), torch.WithRequiresGrad()); err != nil {
			l.close()
			return nil, err
		}
		torch.Escape(l.scale)
		sAdam := torch.AdamOpts{LR: cfg.ScaleLR, Beta1: cfg.ModelBetas[0], Beta2: cfg.ModelBetas[1], Eps: cfg.ModelEps}
		if l.sOpt, err = torch.NewAdam([]*torch.Tensor{l.scale}, sAdam); err != nil {
			l.close()
			return nil, err
		}
	}
	return l, nil
}

// reset re-initialises θ and its Adam (and for RR s, its Adam, and W = 0): docs/ALGORITHM.md
// §5 step 7 and the model reset of §6.
func (l *learner) reset(gen *torch.Generator) error {
	if err := nets.Reinit(l.params, l.specs, gen); err != nil {
		return err
	}
	if err := l.opt.Reset(); err != nil {
		return err
	}
	return torch.NoGrad(func() error {
		for i, b := range l.buffers {
			if err := b.Fill_(l.net.Buffers[i].Fill); err != nil {
				return err
			}
		}
		if !l.rr {
			return nil
		}
		if err := l.w.Zero_(); err != nil {
			return err
		}
		if err := l.scale.Fill_(l.cfg.ScaleInit); err != nil {
			return err
		}
		return l.sOpt.Reset()
	})
}

// descend takes one optimizer step on the gradient of loss with respect to the parameters:
// a classifier's training step once its loss is computed.
func (l *learner) descend(loss *torch.Tensor) error {
	return train.Descend(loss, l.params, l.opt, nil, nil)
}

// features returns Z = [f_θ(x), 1] (RR learners).
func (l *learner) features(x *torch.Tensor, training bool) (*torch.Tensor, error) {
	f, err := l.net.Features(l.params, l.buffers, x, training)
	if err != nil {
		return nil, err
	}
	return train.WithBias(f)
}

// logits scores x for evaluation: the classifier's logits (LD) or Z·W with the unscaled W
// (RR; the same arg-max as s·Z·W while s > 0). BatchNorm uses running statistics.
func (l *learner) logits(x *torch.Tensor) (*torch.Tensor, error) {
	if !l.rr {
		return l.net.Forward(l.params, l.buffers, x, false)
	}
	z, err := l.features(x, false)
	if err != nil {
		return nil, err
	}
	return z.Mm(l.w)
}

func (l *learner) close() {
	if l.opt != nil {
		l.opt.Close()
	}
	if l.sOpt != nil {
		l.sOpt.Close()
	}
	torch.FreeAll(l.params)
	torch.FreeAll(l.buffers)
	l.w.Free()
	l.scale.Free()
}

// adam is the model's Adam (a distillation's model always trains with Adam; nil otherwise).
func (l *learner) adam() *torch.Adam {
	a, _ := l.opt.(*torch.Adam)
	return a
}

// learnerOf is the one model of m as a learner (the meta-step's type), sharing its tensors
// and optimizers: the caller closes m, not the result.
func learnerOf(m *train.Models) (*learner, error) {
	if m.Batched.M != 1 {
		return nil, fmt.Errorf("internal error: a learner of %d models", m.Batched.M)
	}
	l := &learner{net: m.Batched.Net, rr: m.RR, specs: m.Specs, params: m.Params[0], buffers: m.Buffers[0], opt: m.Opt, sOpt: m.SOpt, cfg: m.Cfg}
	if m.RR {
		l.w, l.scale = m.W[0], m.Scale[0]
	}
	return l, nil
}

// LabelMetaGradient takes one label meta-gradient of cfg's method (LD or LD RR) through
// the trained model m (one model) at the labels table, on the base examples bIdx and the
// target batch (xt, yt), and shows it to see before the labels' own step (the
// gradient-variance measurement, gradvar).
func LabelMetaGradient(in *Inputs, cfg config.Config, m *train.Models, table, bIdx, xt, yt *torch.Tensor, see func(*torch.Tensor) error) error {
	model, err := learnerOf(m)
	if err != nil {
		return err
	}
	y, err := newLabels(in.ds.Base.N, in.ds.Classes, cfg, in.dev)
	if err != nil {
		return err
	}
	defer y.close()
	if err := torch.NoGrad(func() error { return y.Y.Copy_(table) }); err != nil {
		return err
	}
	b, err := soloBatch(y, in.base.x, bIdx, xt, yt, func(grads []*torch.Tensor) error { return see(grads[0]) })
	if err != nil {
		return err
	}
	method := ldStep
	if cfg.Method == config.MethodRR {
		method = rrStep
	}
	_, err = method(model, b)
	return err
}
