package torch

// aten.go: tensors handed to and taken from other libtorch bindings in the same process.

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"unsafe"
)

// ErrNilATen is matched (errors.Is) by FromATen's error for a nil pointer.
var ErrNilATen = errors.New("nil at::Tensor pointer")

// FromATen returns a Tensor of ours on the tensor that p points to: p is an at::Tensor *,
// a heap at::Tensor as gotorch's cgotorch passes it (typedef at::Tensor *Tensor in C++,
// void * in C; in Go the pointer that its Tensor struct's T field points to, *t.T) and as
// similar cgo bindings do. Nothing is copied: the result is one more reference to the same
// tensor, with the same storage (writes through either side are visible to the other), the
// same device and the same autograd identity. The other side keeps owning its handle.
//
// Conditions (see docs/ARCHITECTURE.md, "Tensors shared with other bindings"):
//
//   - One libtorch in the process, of one version. Both bindings must run on the same
//     libtorch files: compare Version() (the version the shim was compiled against) and
//     RuntimeInfo's LibtorchDir (the folder libc10 was loaded from) with the other binding's
//     libtorch. FromATen refuses, with an error, a process that has loaded two files named
//     libc10.so* ("two copies of libtorch are loaded in this process"), and a tensor whose
//     TensorImpl type is defined outside libtorch's libraries in that folder ("not an
//     at::Tensor of this binding's libtorch"): another copy of libtorch, e.g. linked
//     statically, or not a tensor at all. A different version installed in the same folder
//     cannot be told apart.
//   - What is checked of p: nil is refused (ErrNilATen); a misaligned pointer, a null
//     TensorImpl, a TensorImpl whose vtable lies in no loaded library (e.g. a pointer to a
//     pointer to an at::Tensor, one indirection too many), an undefined tensor, a sparse or
//     other non-strided tensor, and a device other than the CPU or CUDA are refused with an
//     error. What cannot be checked: p (and the TensorImpl it points to) must be readable
//     memory; a dangling or wild pointer crashes the process, as it would in C.
//   - Autograd: requires-grad, the gradient and the graph are shared, since it is the same
//     tensor. A graph recorded partly by each binding is one graph: Backward on either side
//     reaches leaves made by the other. Grad mode is per OS thread in libtorch (NoGrad here
//     does not affect calls the other binding makes on another thread).
//   - Threads: the reference count is atomic, so either handle may be freed on any thread,
//     in any order; the storage lives until the last one goes. Using one tensor from two
//     goroutines at once (a write with any other use) is a data race, as in PyTorch.
//     SetNumThreads changes libtorch's process-wide thread pool, the other binding's too.
//   - Lifetime: the result belongs to this package like any new Tensor (the innermost open
//     Scope frees it, or Free); freeing it never frees the other side's handle, and the
//     other side must keep p alive (not delete it) during the call.
func FromATen(p unsafe.Pointer) (*Tensor, error) {
	const op = "from_aten"
	if p == nil {
		return nil, &Error{Op: op, Msg: ErrNilATen.Error(), err: ErrNilATen}
	}
	var out C.ldt_tensor
	e := C.ldt_aten_from(&out, p)
	return result(op, out, e)
}

// ToATen returns a new heap at::Tensor (an at::Tensor * for another binding, e.g. the
// pointer gotorch's Tensor struct wraps) on t's tensor: same storage, device and autograd
// identity, no copy. The caller owns it and must free it with its own binding (gotorch: hand
// it to a Tensor whose finalizer deletes it); no Scope of ours frees it, and freeing t does
// not affect it. Refused with an error: a nil or freed t, and a process with two copies of
// libc10 loaded. The conditions of FromATen (one libtorch, devices, autograd, threads) apply.
func (t *Tensor) ToATen() (unsafe.Pointer, error) {
	const op = "to_aten"
	h, err := t.handle(op)
	if err != nil {
		return nil, err
	}
	var out unsafe.Pointer
	if err := cerr(op, C.ldt_aten_to(&out, h)); err != nil {
		return nil, err
	}
	return out, nil
}
