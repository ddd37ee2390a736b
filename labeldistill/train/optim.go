package train

// optim.go: the optimisers of the models trained inside the meta-loop and of fresh models,
// and their training step (Descend).

import (
	"fmt"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/torch"
)

// Optimizer is what a model needs of torch.Adam and torch.SGD.
type Optimizer interface {
	StepWith(grads []*torch.Tensor) error
	SetLR(lr float64) error
	Reset() error
	Close()
}

// OptSpec chooses a model's optimizer: "adam" (betas and eps from the config) or "sgd".
type OptSpec struct {
	Kind     string
	LR       float64
	Momentum float64 // sgd only
	// WeightDecay (sgd only) adds WeightDecay·θ to each gradient before the momentum
	// buffer, as torch.optim.SGD's weight_decay does (L2 regularisation, not decoupled).
	WeightDecay float64
}

// AdamSpec is Adam at learning rate lr.
func AdamSpec(lr float64) OptSpec { return OptSpec{Kind: "adam", LR: lr} }

// NewOptimizer builds spec's Optimizer over params (Adam takes betas and eps from cfg). On
// error it returns a nil interface, never a typed nil, so callers' cleanup can test for nil.
func NewOptimizer(spec OptSpec, cfg config.Config, params []*torch.Tensor) (Optimizer, error) {
	switch spec.Kind {
	case "adam":
		a, err := torch.NewAdam(params, torch.AdamOpts{LR: spec.LR, Beta1: cfg.ModelBetas[0], Beta2: cfg.ModelBetas[1], Eps: cfg.ModelEps})
		if err != nil {
			return nil, err
		}
		return a, nil
	case "sgd":
		o, err := torch.NewSGD(params, torch.SGDOpts{LR: spec.LR, Momentum: spec.Momentum, WeightDecay: spec.WeightDecay})
		if err != nil {
			return nil, err
		}
		return o, nil
	}
	return nil, fmt.Errorf("unknown Optimizer %q (known: adam, sgd)", spec.Kind)
}

// Descend differentiates loss once with respect to params and scales together, then steps
// opt on the parameters' gradients and, when scales are given, sOpt on the scales' (RR's s):
// the training step of every model, one or many, LD and RR.
func Descend(loss *torch.Tensor, params []*torch.Tensor, opt Optimizer, scales []*torch.Tensor, sOpt *torch.Adam) error {
	return DescendCombined(loss, params, opt, scales, sOpt, nil)
}

// DescendCombined is Descend with combine, when not nil, applied to the parameters'
// gradients (in place) before opt's step: a data-parallel run's sum over the ranks of
// their parts of one loss's gradient. The scales' gradients are not combined.
func DescendCombined(loss *torch.Tensor, params []*torch.Tensor, opt Optimizer, scales []*torch.Tensor, sOpt *torch.Adam, combine func(grads []*torch.Tensor) error) error {
	inputs := append(append([]*torch.Tensor{}, params...), scales...)
	grads, err := torch.Grad([]*torch.Tensor{loss}, inputs, torch.GradOpts{})
	if err != nil {
		return err
	}
	n := len(params)
	if combine != nil {
		if err := combine(grads[:n]); err != nil {
			return err
		}
	}
	if err := opt.StepWith(grads[:n]); err != nil {
		return err
	}
	if len(scales) == 0 {
		return nil
	}
	return sOpt.StepWith(grads[n:])
}
