package torch

// autograd.go: requires-grad flags, backward, leaf gradients, torch.autograd.grad (with
// create_graph for second-order steps) and no-grad regions.

/*
#include "shim.h"
*/
import "C"

import "runtime"

// SetRequiresGrad turns gradient recording on or off for a leaf tensor.
func (t *Tensor) SetRequiresGrad(b bool) error {
	h, err := t.handle("set_requires_grad")
	if err != nil {
		return err
	}
	return cerr("set_requires_grad", C.ldt_set_requires_grad(h, cbool(b)))
}

// Backward accumulates d(t)/d(leaf) into the .grad of every leaf that requires grad;
// t must hold one element.
func (t *Tensor) Backward() error { return t.BackwardWith(nil, false, false) }

// BackwardWith is Backward with an explicit upstream gradient (nil for a scalar) and the
// retain_graph / create_graph flags.
func (t *Tensor) BackwardWith(grad *Tensor, retainGraph, createGraph bool) error {
	h, err := t.handle("backward")
	if err != nil {
		return err
	}
	hg, err := optHandle("backward", grad)
	if err != nil {
		return err
	}
	return cerr("backward", C.ldt_backward(h, hg, cbool(retainGraph), cbool(createGraph)))
}

// Grad returns the accumulated gradient of a leaf (a new handle), or nil if there is none.
func (t *Tensor) Grad() (*Tensor, error) {
	h, err := t.handle("grad")
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	if err := cerr("grad", C.ldt_grad_get(&out, h)); err != nil {
		return nil, err
	}
	if out == nil {
		return nil, nil
	}
	return wrap(out), nil
}

// ClearGrad drops the accumulated gradient (PyTorch's zero_grad(set_to_none=True)).
func (t *Tensor) ClearGrad() error {
	h, err := t.handle("clear_grad")
	if err != nil {
		return err
	}
	return cerr("clear_grad", C.ldt_grad_clear(h))
}

// GradOpts are torch.autograd.grad's options.
type GradOpts struct {
	CreateGraph bool      // record the gradient computation, for higher-order gradients
	RetainGraph bool      // keep the graph for another backward pass (implied by CreateGraph in PyTorch; explicit here)
	AllowUnused bool      // return nil for inputs the outputs do not depend on
	GradOutputs []*Tensor // upstream gradients, one per output (nil entries: ones for scalars)
}

// Grad computes the gradients of the outputs with respect to the inputs
// (torch.autograd.grad) without touching any .grad field. With CreateGraph the result
// is differentiable again: this is the second-order step of label distillation.
func Grad(outputs, inputs []*Tensor, o GradOpts) ([]*Tensor, error) {
	const op = "grad"
	if len(outputs) == 0 || len(inputs) == 0 {
		return nil, errorf(op, "needs at least one output and one input")
	}
	if o.GradOutputs != nil && len(o.GradOutputs) != len(outputs) {
		return nil, errorf(op, "GradOutputs must have one entry per output")
	}
	hout, err := handles(op, outputs)
	if err != nil {
		return nil, err
	}
	hin, err := handles(op, inputs)
	if err != nil {
		return nil, err
	}
	var hgo []C.ldt_tensor
	if o.GradOutputs != nil {
		hgo = make([]C.ldt_tensor, len(outputs))
		for i, g := range o.GradOutputs {
			if hgo[i], err = optHandle(op, g); err != nil {
				return nil, err
			}
		}
	}
	res := make([]C.ldt_tensor, len(inputs))
	retain := o.RetainGraph || o.CreateGraph
	e := C.ldt_autograd_grad(&res[0], handlePtr(hout), C.int(len(hout)), handlePtr(hgo), handlePtr(hin), C.int(len(hin)),
		cbool(retain), cbool(o.CreateGraph), cbool(o.AllowUnused))
	if err := cerr(op, e); err != nil {
		return nil, err
	}
	grads := make([]*Tensor, len(res))
	for i, h := range res {
		if h != nil {
			grads[i] = wrap(h)
		}
	}
	return grads, nil
}

// NoGrad runs fn with gradient recording off (torch.no_grad()). libtorch's grad mode is
// per OS thread, so the goroutine is locked to its thread for the duration.
func NoGrad(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prev := C.ldt_set_grad_enabled(0)
	defer C.ldt_set_grad_enabled(prev)
	return fn()
}

// IsGradEnabled reports the calling thread's grad mode.
func IsGradEnabled() bool { return C.ldt_is_grad_enabled() != 0 }
