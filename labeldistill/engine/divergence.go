package engine

// divergence.go: the meta-loop's guard on everything a diverging run makes non-finite, read
// with each step's outputs (loop.read: no host read of its own), and the setting a
// non-finite value most likely comes from. Beside the label loss and each learnt value's
// sum (loop.go), every learnable's optimiser state, the model's parameters and Adam state,
// and for LD RR the scale s (with its Adam) and the ridge weights W are reduced to one
// scalar each by torch.NonFiniteProbe: 0 when finite, NaN when any element is NaN or infinite
// (no sum of the values, which could overflow into a false alarm). A run whose Adam
// state overflows (huge gradients from --scale-init 1e30 or --label-lr 1e30) keeps finite
// labels for a while and would be scored as if nothing happened; it now ends at the step.

import (
	"fmt"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/torch"
)

// stateGuard is one group of the run's state checked every meta-step.
type stateGuard struct {
	what    string          // for messages: "Adam state of the labels"
	tensors []*torch.Tensor // reduced to one scalar
	blame   []string        // settings that can make it diverge, most direct first
}

// stateGuards lists the groups, in a fixed order (the reading vector's after the sums).
func (l *Loop) stateGuards() []stateGuard {
	var gs []stateGuard
	for _, v := range l.learnt {
		var ts []*torch.Tensor
		for _, o := range v.optimizers() {
			ts = append(ts, o.opt.ExpAvg...)
			ts = append(ts, o.opt.ExpAvgSq...)
		}
		gs = append(gs, stateGuard{what: "Adam state of the " + learntWhat(v), tensors: ts, blame: learntBlame(v)})
	}
	m := l.model
	if m == nil {
		return gs
	}
	ts := append([]*torch.Tensor(nil), m.params...)
	if a := m.adam(); a != nil {
		ts = append(append(ts, a.ExpAvg...), a.ExpAvgSq...)
	}
	gs = append(gs, stateGuard{what: "model parameters or their Adam state", tensors: ts, blame: blameModel})
	if m.rr {
		ts := []*torch.Tensor{m.scale, m.w}
		ts = append(append(ts, m.sOpt.ExpAvg...), m.sOpt.ExpAvgSq...)
		gs = append(gs, stateGuard{what: "RR scale s, its Adam state or the ridge weights W", tensors: ts, blame: blameScale})
	}
	return gs
}

// guardValues reduces each guard to its scalar (on the device, not read here).
func (l *Loop) guardValues(gs []stateGuard) ([]*torch.Tensor, error) {
	out := make([]*torch.Tensor, 0, len(gs))
	for _, g := range gs {
		v, err := torch.NonFiniteProbe(g.tensors...)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// Settings that can make each quantity diverge (json names), for blameSetting.
var (
	blameLoss   = []string{"label_lr", "inner_lr", "model_lr", "scale_init", "scale_lr", "ridge_lambda", "label_eps", "model_eps"}
	blameLabels = []string{"label_lr", "label_eps", "scale_init", "inner_lr", "scale_lr", "model_lr"}
	blameModel  = []string{"model_lr", "model_eps", "scale_init", "scale_lr", "inner_lr", "label_lr"}
	blameScale  = []string{"scale_init", "scale_lr", "model_eps", "model_lr", "ridge_lambda", "label_lr"}
)

// blameDD: method dd's settings (its step sizes start at dd_step_lr_init, and dd_lr
// drives the images' and step sizes' Adam); it has no labels, online model or ridge head.
var blameDD = []string{"dd_step_lr_init", "dd_lr"}

// learntWhat names a learnable in messages: method dd's is its images and step sizes.
func learntWhat(v learnable) string {
	if _, ok := v.(*ddData); ok {
		return "images and step sizes"
	}
	return v.name()
}

// learntBlame are the settings that can make a learnable's values or Adam state diverge.
func learntBlame(v learnable) []string {
	if _, ok := v.(*ddData); ok {
		return blameDD
	}
	return blameLabels
}

// smallIsRisky are the settings whose too small values make a run diverge (division by
// them); for the others a too large value does.
var smallIsRisky = map[string]bool{"label_eps": true, "model_eps": true, "ridge_lambda": true}

// blameSetting picks, among the settings that can make a quantity diverge (those of cfg's
// method), the one furthest from its default in the risky direction, at least 10× away;
// "" when none is (the data, or every setting at once).
func blameSetting(cfg config.Config, candidates []string) (field string, value, def float64) {
	values := func(c config.Config) map[string]float64 {
		return map[string]float64{"label_lr": c.LabelLR, "label_eps": c.LabelEps, "model_lr": c.ModelLR, "model_eps": c.ModelEps,
			"inner_lr": c.InnerLR, "scale_init": c.ScaleInit, "scale_lr": c.ScaleLR, "ridge_lambda": c.RidgeLambda,
			"dd_lr": c.DDLR, "dd_step_lr_init": c.DDStepLRInit}
	}
	// Method dd's defaults depend on the dataset (dd_step_lr_init: greyscale or colour):
	// those of a default dd run on cfg's dataset, filled in whatever its checks say.
	base := config.Default()
	if cfg.Method == config.MethodDD {
		base.Method, base.Learn, base.Dataset, base.Source = config.MethodDD, "", cfg.Dataset, ""
		base, _ = base.Resolved()
	}
	cur, defs := values(cfg), values(base)
	best := 10.0
	for _, f := range candidates {
		if onlyFor, ok := methodOf[f]; ok && onlyFor != cfg.Method {
			continue
		}
		v, d := cur[f], defs[f]
		if !(v > 0) || !(d > 0) {
			continue
		}
		ratio := v / d
		if smallIsRisky[f] {
			ratio = d / v
		}
		if ratio >= best {
			field, value, def, best = f, v, d, ratio
		}
	}
	return field, value, def
}

// methodOf are the settings only one method uses.
var methodOf = map[string]string{"inner_lr": config.MethodLD, "scale_init": config.MethodRR, "scale_lr": config.MethodRR, "ridge_lambda": config.MethodRR,
	"dd_lr": config.MethodDD, "dd_step_lr_init": config.MethodDD}

// blame names on e the setting most likely at fault for its quantity (see blameSetting).
func (e *NonFiniteError) blame(in *Inputs, candidates []string) {
	cfg := config.Default()
	if in != nil {
		cfg = in.cfg
	}
	e.Setting, e.SettingValue, e.SettingDefault = blameSetting(cfg, candidates)
	e.dd = cfg.Method == config.MethodDD
	e.SmallIsRisky = smallIsRisky[e.Setting]
	e.Diverged = true
}

// cause says what to change, for NonFiniteError's message.
func (e *NonFiniteError) cause() string {
	if !e.Diverged {
		return ""
	}
	if e.Setting == "" && e.dd {
		return "; no learning rate or step size of method dd is far from its default: look for extreme values in the data"
	}
	if e.Setting == "" {
		return "; no learning rate or scale is far from its default: look for extreme values in the data or the base examples"
	}
	if e.SmallIsRisky {
		return fmt.Sprintf("; most likely %s %g is too small (default %g): try a larger one", e.Setting, e.SettingValue, e.SettingDefault)
	}
	return fmt.Sprintf("; most likely %s %g is too large (default %g): try a smaller one", e.Setting, e.SettingValue, e.SettingDefault)
}
