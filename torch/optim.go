package torch

// optim.go: Adam and SGD over a list of tensors, with state held in Go-visible tensors so it
// can be checkpointed, reset and moved. Updates match torch.optim (1.13, foreach=False).

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"math"
)

// AdamOpts are torch.optim.Adam's hyper-parameters. Zero Beta1/Beta2/Eps take PyTorch's
// defaults (0.9, 0.999, 1e-8).
type AdamOpts struct {
	LR, Beta1, Beta2, Eps, WeightDecay float64
}

// Adam is torch.optim.Adam over explicit parameters. Its state tensors are owned by the
// optimizer (outside any scope) until Close.
//
// StepCount counts StepWith calls. As in torch.optim, each parameter also has its own step
// count, advanced only by the steps that gave it a gradient: it is StepCount for every
// parameter unless some step skipped one (a nil gradient).
type Adam struct {
	Params    []*Tensor
	ExpAvg    []*Tensor
	ExpAvgSq  []*Tensor
	StepCount int64
	Opts      AdamOpts

	steps []int64 // per-parameter step counts; nil means StepCount for all
	// onDevice, once Capturable, is the step count as a float64 scalar on the parameters'
	// device, advanced there by every step.
	onDevice *Tensor
}

// Capturable moves the step count onto the parameters' device (torch.optim.Adam's
// capturable=True): from then on every step advances it there and takes its bias
// corrections from it, so that a step recorded in a CUDA graph (CUDAGraph) is right each time
// it is replayed. The update is the same up to rounding. Every later step must give every
// parameter a gradient; StepCount, the host's count, then counts StepWith calls, and
// CountReplays adds the replayed ones.
func (a *Adam) Capturable() error {
	const op = "adam_capturable"
	if a.onDevice != nil {
		return nil
	}
	if a.steps != nil {
		return errorf(op, "the parameters' step counts differ (a step skipped some): a capturable Adam needs one count")
	}
	if len(a.Params) == 0 {
		return errorf(op, "no parameters")
	}
	if _, err := a.Params[0].handle(op); err != nil {
		return err
	}
	t, err := Full(nil, float64(a.StepCount), WithDType(Double), OnDevice(a.Params[0].Device()))
	if err != nil {
		return err
	}
	Escape(t)
	a.onDevice = t
	return nil
}

// CountReplays advances StepCount by n steps that a CUDA graph replayed (each advanced the
// count on the device; the host saw none of them).
func (a *Adam) CountReplays(n int64) { a.StepCount += n }

func zerosLike(op string, p *Tensor) (*Tensor, error) {
	if _, err := p.handle(op); err != nil {
		return nil, err
	}
	z, err := Zeros(p.Shape(), WithDType(p.DType()), OnDevice(p.Device()))
	if err != nil {
		return nil, err
	}
	Escape(z)
	return z, nil
}

func checkLR(op string, lr float64) error {
	if math.IsNaN(lr) || math.IsInf(lr, 0) || lr < 0 {
		return errorf(op, fmt.Sprintf("learning rate must be a finite non-negative number, got %v", lr))
	}
	return nil
}

// NewAdam creates Adam with zero state for params.
func NewAdam(params []*Tensor, o AdamOpts) (*Adam, error) {
	if o.Beta1 == 0 {
		o.Beta1 = 0.9
	}
	if o.Beta2 == 0 {
		o.Beta2 = 0.999
	}
	if o.Eps == 0 {
		o.Eps = 1e-8
	}
	if err := checkLR("adam", o.LR); err != nil {
		return nil, err
	}
	if o.Beta1 < 0 || o.Beta1 >= 1 || o.Beta2 < 0 || o.Beta2 >= 1 {
		return nil, errorf("adam", fmt.Sprintf("betas must lie in [0, 1), got (%v, %v)", o.Beta1, o.Beta2))
	}
	a := &Adam{Params: params, Opts: o}
	for _, p := range params {
		m, err := zerosLike("adam", p)
		if err != nil {
			a.Close()
			return nil, err
		}
		v, err := zerosLike("adam", p)
		if err != nil {
			m.Free()
			a.Close()
			return nil, err
		}
		a.ExpAvg = append(a.ExpAvg, m)
		a.ExpAvgSq = append(a.ExpAvgSq, v)
	}
	return a, nil
}

// StepWith applies one update with explicit gradients (one per parameter; nil skips it).
func (a *Adam) StepWith(grads []*Tensor) error {
	const op = "adam_step"
	if len(grads) != len(a.Params) {
		return errorf(op, fmt.Sprintf("%d gradients for %d parameters", len(grads), len(a.Params)))
	}
	ps, err := handles(op, a.Params)
	if err != nil {
		return err
	}
	ms, err := handles(op, a.ExpAvg)
	if err != nil {
		return err
	}
	vs, err := handles(op, a.ExpAvgSq)
	if err != nil {
		return err
	}
	gs := make([]C.ldt_tensor, len(grads))
	for i, g := range grads {
		if gs[i], err = optHandle(op, g); err != nil {
			return err
		}
	}
	if a.onDevice != nil {
		d, err := a.onDevice.handle(op)
		if err != nil {
			return err
		}
		o := a.Opts
		e := C.ldt_adam_step_capturable(handlePtr(ps), handlePtr(gs), handlePtr(ms), handlePtr(vs), C.int(len(ps)), d,
			C.double(o.LR), C.double(o.Beta1), C.double(o.Beta2), C.double(o.Eps), C.double(o.WeightDecay))
		if err := cerr(op, e); err != nil {
			return err
		}
		a.StepCount++
		return nil
	}
	steps := a.steps
	if steps == nil {
		steps = make([]int64, len(ps))
		for i := range steps {
			steps[i] = a.StepCount
		}
	}
	// One shim call per distinct step count (a single one unless gradients were skipped):
	// the bias corrections use each parameter's own count, as torch.optim does.
	o := a.Opts
	done := make([]bool, len(ps))
	for i := range ps {
		if done[i] || gs[i] == nil {
			continue
		}
		step := steps[i] + 1
		sel := make([]C.ldt_tensor, len(ps)) // gradients of this group only; NULL skips
		for j := i; j < len(ps); j++ {
			if !done[j] && gs[j] != nil && steps[j]+1 == step {
				sel[j], done[j] = gs[j], true
			}
		}
		e := C.ldt_adam_step(handlePtr(ps), handlePtr(sel), handlePtr(ms), handlePtr(vs), C.int(len(ps)), C.int64_t(step),
			C.double(o.LR), C.double(o.Beta1), C.double(o.Beta2), C.double(o.Eps), C.double(o.WeightDecay))
		if err := cerr(op, e); err != nil {
			return err
		}
	}
	skipped := false
	for i := range gs {
		if gs[i] != nil {
			steps[i]++
		}
		skipped = skipped || steps[i] != a.StepCount+1
	}
	a.StepCount++
	if skipped {
		a.steps = steps
	} else {
		a.steps = nil
	}
	return nil
}

// Step applies one update using each parameter's accumulated .grad.
func (a *Adam) Step() error {
	grads, err := leafGrads(a.Params)
	if err != nil {
		return err
	}
	defer freeAll(grads)
	return a.StepWith(grads)
}

// ZeroGrad drops the parameters' accumulated gradients.
func (a *Adam) ZeroGrad() error { return clearGrads(a.Params) }

// SetLR changes the learning rate.
func (a *Adam) SetLR(lr float64) error {
	if err := checkLR("adam", lr); err != nil {
		return err
	}
	a.Opts.LR = lr
	return nil
}

// Reset zeroes the state, as a freshly constructed optimizer.
func (a *Adam) Reset() error {
	for i := range a.ExpAvg {
		if err := a.ExpAvg[i].Zero_(); err != nil {
			return err
		}
		if err := a.ExpAvgSq[i].Zero_(); err != nil {
			return err
		}
	}
	a.StepCount, a.steps = 0, nil
	if a.onDevice != nil {
		return a.onDevice.Zero_()
	}
	return nil
}

// Close frees the optimizer's state (not the parameters).
func (a *Adam) Close() {
	freeAll(a.ExpAvg)
	freeAll(a.ExpAvgSq)
	a.ExpAvg, a.ExpAvgSq = nil, nil
	if a.onDevice != nil {
		a.onDevice.Free()
		a.onDevice = nil
	}
}

// SGDOpts are torch.optim.SGD's hyper-parameters.
type SGDOpts struct {
	LR, Momentum, Dampening, WeightDecay float64
	Nesterov                             bool
}

// SGD is torch.optim.SGD over explicit parameters. As in torch.optim, a parameter's
// momentum buffer starts as its first gradient (without dampening), at the first step
// that gives it one.
type SGD struct {
	Params    []*Tensor
	Buffers   []*Tensor // momentum buffers (nil without momentum)
	StepCount int64
	Opts      SGDOpts

	started []bool // whether each buffer holds a value; nil means StepCount > 0 for all
}

// NewSGD creates SGD for params.
func NewSGD(params []*Tensor, o SGDOpts) (*SGD, error) {
	if err := checkLR("sgd", o.LR); err != nil {
		return nil, err
	}
	s := &SGD{Params: params, Opts: o}
	if o.Momentum != 0 {
		for _, p := range params {
			b, err := zerosLike("sgd", p)
			if err != nil {
				s.Close()
				return nil, err
			}
			s.Buffers = append(s.Buffers, b)
		}
	}
	return s, nil
}

// StepWith applies one update with explicit gradients (nil entries skip a parameter).
func (s *SGD) StepWith(grads []*Tensor) error {
	const op = "sgd_step"
	if len(grads) != len(s.Params) {
		return errorf(op, fmt.Sprintf("%d gradients for %d parameters", len(grads), len(s.Params)))
	}
	ps, err := handles(op, s.Params)
	if err != nil {
		return err
	}
	var bs []C.ldt_tensor
	if s.Opts.Momentum != 0 {
		if bs, err = handles(op, s.Buffers); err != nil {
			return err
		}
	}
	gs := make([]C.ldt_tensor, len(grads))
	for i, g := range grads {
		if gs[i], err = optHandle(op, g); err != nil {
			return err
		}
	}
	o := s.Opts
	started := s.started
	if started == nil {
		started = make([]bool, len(ps))
		for i := range started {
			started[i] = s.StepCount > 0
		}
	}
	// Parameters whose buffer starts now, and the others: at most two shim calls.
	for _, first := range []bool{true, false} {
		sel := make([]C.ldt_tensor, len(ps))
		has := false
		for i := range ps {
			if gs[i] != nil && started[i] != first {
				sel[i], has = gs[i], true
			}
		}
		if !has {
			continue
		}
		e := C.ldt_sgd_step(handlePtr(ps), handlePtr(sel), handlePtr(bs), C.int(len(ps)), cbool(first),
			C.double(o.LR), C.double(o.Momentum), C.double(o.Dampening), C.double(o.WeightDecay), cbool(o.Nesterov))
		if err := cerr(op, e); err != nil {
			return err
		}
	}
	all := true
	for i := range gs {
		started[i] = started[i] || gs[i] != nil
		all = all && started[i]
	}
	s.StepCount++
	if all {
		s.started = nil
	} else {
		s.started = started
	}
	return nil
}

// Step applies one update using each parameter's accumulated .grad.
func (s *SGD) Step() error {
	grads, err := leafGrads(s.Params)
	if err != nil {
		return err
	}
	defer freeAll(grads)
	return s.StepWith(grads)
}

// ZeroGrad drops the parameters' accumulated gradients.
func (s *SGD) ZeroGrad() error { return clearGrads(s.Params) }

// SetLR changes the learning rate.
func (s *SGD) SetLR(lr float64) error {
	if err := checkLR("sgd", lr); err != nil {
		return err
	}
	s.Opts.LR = lr
	return nil
}

// Reset forgets the momentum, as a freshly constructed optimizer.
func (s *SGD) Reset() error {
	s.StepCount, s.started = 0, nil // the next step overwrites the buffers
	return nil
}

// Close frees the momentum buffers.
func (s *SGD) Close() {
	freeAll(s.Buffers)
	s.Buffers = nil
}

func leafGrads(params []*Tensor) ([]*Tensor, error) {
	grads := make([]*Tensor, len(params))
	for i, p := range params {
		g, err := p.Grad()
		if err != nil {
			freeAll(grads)
			return nil, err
		}
		grads[i] = g
	}
	return grads, nil
}

func clearGrads(params []*Tensor) error {
	for _, p := range params {
		if err := p.ClearGrad(); err != nil {
			return err
		}
	}
	return nil
}

// FreeAll frees every tensor in ts (nil entries are skipped).
func FreeAll(ts []*Tensor) { freeAll(ts) }

func freeAll(ts []*Tensor) {
	for _, t := range ts {
		t.Free()
	}
}
