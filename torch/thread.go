package torch

// thread.go: libtorch's grad mode and OpenMP teams are per OS thread, so a library call that
// runs libtorch work stays on one; Guard is that entry, and the panic barrier of the API.

import (
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync/atomic"
)

// panicStacks is SetPanicStacks' setting.
var panicStacks atomic.Bool

// SetPanicStacks makes Guard append the goroutine's stack to the error of a panic it
// recovers (off by default), for the whole process. Programs call it (the ldtorch command
// when LDTORCH_DEBUG is set); the library never does.
func SetPanicStacks(on bool) { panicStacks.Store(on) }

// Guard runs f on one locked OS thread (libtorch's grad mode and OpenMP teams are per
// thread) and turns a panic in f into an error "<name>: internal error: ...", with the
// goroutine's stack appended after SetPanicStacks(true): the entry of every library call
// that runs libtorch work, so that no panic crosses the API.
func Guard[T any](name string, f func() (T, error)) (res T, err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer func() {
		if r := recover(); r != nil {
			var zero T
			msg := fmt.Sprintf("%s: internal error: %v", name, r)
			if panicStacks.Load() {
				msg += "\n" + string(debug.Stack())
			}
			res, err = zero, errors.New(msg)
		}
	}()
	return f()
}
