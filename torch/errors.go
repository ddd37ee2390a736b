package torch

// errors.go: the typed error every call returns, and helpers for tests and examples.

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import "errors"

// Error is a failure reported by libtorch or by the binding's own checks. Msg is libtorch's
// message without its C++ backtrace.
type Error struct {
	Op  string // the operation, e.g. "conv2d"
	Msg string

	freed bool  // a use of a freed tensor (matched by errors.Is(err, ErrFreed))
	err   error // an underlying Go error (e.g. from reading a file), for errors.As
}

func (e *Error) Error() string { return "torch: " + e.Op + ": " + e.Msg }

// ErrFreed is matched (errors.Is) by the error of any call on a freed tensor.
var ErrFreed = errors.New("use of a freed tensor")

// Is reports whether e is a use-after-free error (target ErrFreed), including one about an
// element of a tensor list.
func (e *Error) Is(target error) bool {
	return target == ErrFreed && (e.freed || e.Msg == ErrFreed.Error())
}

// Unwrap returns the underlying Go error, if any (Save and Load keep the file error).
func (e *Error) Unwrap() error { return e.err }

// cerr converts a shim error (NULL on success) into a Go error and frees the C string.
func cerr(op string, e C.ldt_error) error {
	callDone()
	if e == nil {
		return nil
	}
	msg := C.GoString(e)
	C.ldt_free_error(e)
	return &Error{Op: op, Msg: msg}
}

func errorf(op, msg string) error { return &Error{Op: op, Msg: msg} }

// Must returns v and panics if err is not nil. For tests and examples only: library code
// returns errors.
func Must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Chain keeps the first error of a sequence of calls, so functional model code can read as
// a sequence of ops: h := c.T(torch.Conv2d(x, w, b, opts)); ...; return h, c.Err().
// After a failure, later ops receive nil tensors and fail fast in Go without calling C.
type Chain struct{ err error }

// T records err if it is the first one and returns t.
func (c *Chain) T(t *Tensor, err error) *Tensor {
	if err != nil && c.err == nil {
		c.err = err
	}
	return t
}

// Check records err if it is the first one.
func (c *Chain) Check(err error) {
	if err != nil && c.err == nil {
		c.err = err
	}
}

// Err returns the first error recorded, or nil.
func (c *Chain) Err() error { return c.err }
