// Package atentest is a stand-in for another cgo binding of libtorch in the same process,
// for the tests of torch.FromATen and (*torch.Tensor).ToATen. Its C++ side (csrc/standin.cc,
// built by CMake into build/libldtorch_atentest.so against the same libtorch as the shim)
// follows gotorch's convention: a tensor is a heap at::Tensor made with new, passed as
// void *, and freed with delete; in Go it is a struct holding a pointer to that pointer,
// freed by a finalizer, as gotorch's Tensor is (Free deletes it at once).
//
// These #cgo lines are the only ones outside torch/cgo.go: this package is a test helper,
// never imported by the torch package itself or by any program.
package atentest

/*
#cgo CFLAGS: -I${SRCDIR}/csrc
#cgo LDFLAGS: -L${SRCDIR}/../../../build -lldtorch_atentest -Wl,-rpath,${SRCDIR}/../../../build
#include <stdlib.h>
#include "standin.h"
*/
import "C"

import (
	"errors"
	"runtime"
	"unsafe"
)

// Tensor is the other binding's tensor: T points to the at::Tensor pointer.
type Tensor struct{ T *unsafe.Pointer }

// Wrap takes ownership of a heap at::Tensor (e.g. one from ToATen): a finalizer deletes it
// unless Free does first.
func Wrap(p unsafe.Pointer) Tensor {
	t := &p
	runtime.SetFinalizer(t, func(ct *unsafe.Pointer) { C.standin_delete(*ct) })
	return Tensor{T: t}
}

func made(p unsafe.Pointer, what string) (Tensor, error) {
	if p == nil {
		return Tensor{}, errors.New("atentest: " + what + " failed")
	}
	return Wrap(p), nil
}

// Arange returns 0, 1, …, n−1 as float32 on the CPU, or on CUDA device 0 with cuda (an
// error without one).
func Arange(n int64, cuda bool) (Tensor, error) {
	c := C.int(0)
	if cuda {
		c = 1
	}
	return made(C.standin_arange(C.int64_t(n), c), "arange")
}

// Undefined returns a default-constructed (undefined) at::Tensor.
func Undefined() (Tensor, error) { return made(C.standin_undefined(), "undefined") }

// Sparse returns a 2×2 sparse COO tensor.
func Sparse() (Tensor, error) { return made(C.standin_sparse(), "sparse") }

// Free deletes the at::Tensor now; it is idempotent.
func (t Tensor) Free() {
	if t.T == nil || *t.T == nil {
		return
	}
	runtime.SetFinalizer(t.T, nil)
	C.standin_delete(*t.T)
	*t.T = nil
}

// Ptr is the at::Tensor pointer (what FromATen takes).
func (t Tensor) Ptr() unsafe.Pointer { return *t.T }

// Deleted is the number of at::Tensors this binding has deleted so far (by Free or by a
// finalizer).
func Deleted() int64 { return int64(C.standin_deleted()) }

// UseCount is the number of references to t's TensorImpl (both bindings' handles).
func (t Tensor) UseCount() int64 { return int64(C.standin_use_count(*t.T)) }

// Set writes v into element i of the flattened tensor (without recording autograd).
func (t Tensor) Set(i int64, v float64) error {
	if C.standin_set(*t.T, C.int64_t(i), C.double(v)) != 0 {
		return errors.New("atentest: set failed")
	}
	return nil
}

// Get reads element i of the flattened tensor.
func (t Tensor) Get(i int64) float64 { return float64(C.standin_get(*t.T, C.int64_t(i))) }

// SameData reports whether a and b view the same memory.
func SameData(a, b Tensor) bool { return C.standin_same_data(*a.T, *b.T) == 1 }

// IsCUDA reports whether t is on a GPU.
func (t Tensor) IsCUDA() bool { return C.standin_is_cuda(*t.T) == 1 }

// SetRequiresGrad sets t's requires-grad flag.
func (t Tensor) SetRequiresGrad(on bool) error {
	c := C.int(0)
	if on {
		c = 1
	}
	if C.standin_set_requires_grad(*t.T, c) != 0 {
		return errors.New("atentest: set_requires_grad failed")
	}
	return nil
}

// RequiresGrad reports t's requires-grad flag.
func (t Tensor) RequiresGrad() bool { return C.standin_requires_grad(*t.T) == 1 }

// Mul returns t·s, recorded by autograd.
func (t Tensor) Mul(s float64) (Tensor, error) { return made(C.standin_mul(*t.T, C.double(s)), "mul") }

// BackwardSum runs t.sum().backward().
func (t Tensor) BackwardSum() error {
	if C.standin_backward_sum(*t.T) != 0 {
		return errors.New("atentest: backward failed")
	}
	return nil
}

// Grad returns t's gradient; ok is false when it is undefined.
func (t Tensor) Grad() (g Tensor, ok bool) {
	p := C.standin_grad(*t.T)
	if p == nil {
		return Tensor{}, false
	}
	return Wrap(p), true
}

// Zeroed is a pointer to a zeroed static block: an "at::Tensor" whose TensorImpl pointer is
// NULL. Never free it.
func Zeroed() unsafe.Pointer { return C.standin_zeroed() }

// NotATensor is a pointer to a static block whose first word points to a polymorphic object
// of the stand-in library: its "TensorImpl" vtable lies outside libtorch. Never free it.
func NotATensor() unsafe.Pointer { return C.standin_not_a_tensor() }

// Dlopen loads the shared library at path into the process (RTLD_NOW | RTLD_LOCAL).
func Dlopen(path string) error {
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	if C.standin_dlopen(cs) != 0 {
		return errors.New("atentest: dlopen " + path + " failed")
	}
	return nil
}
