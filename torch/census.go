package torch

// census.go: counting libtorch's operator calls (census.cc).

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"strconv"
	"strings"
	"unsafe"
)

// OpCount is how often one operator (an ATen operator such as "aten::mul", or an autograd
// node such as "MulBackward0") was called during an operator census.
type OpCount struct {
	Name string `json:"name"`
	// Calls counts every call; Top the calls that no other counted call enclosed on their
	// thread (what the program, or the backward engine, asked for); Leaf the calls that
	// enclosed none: operators that did their work themselves, which on a GPU is at most one
	// kernel launch each (none for views and allocations).
	Calls int64 `json:"calls"`
	Top   int64 `json:"top"`
	Leaf  int64 `json:"leaf"`
}

// StartOpCensus starts counting every libtorch operator call and autograd node run in the
// process, on every thread, until StopOpCensus. One census runs at a time; while it runs
// every operator call costs a little more (a lock and a map update), so time nothing with it.
func StartOpCensus() error { return cerr("op_census_start", C.ldt_op_census_start()) }

// StopOpCensus ends the census and returns its counts, most called first. Operators that
// the shim's own kernels replace (LeNet's convolutions on the CPU, …) are not libtorch calls
// and are not counted; what they call of libtorch is.
func StopOpCensus() ([]OpCount, error) {
	var out *C.char
	if err := cerr("op_census_stop", C.ldt_op_census_stop(&out)); err != nil {
		return nil, err
	}
	defer C.free(unsafe.Pointer(out))
	var counts []OpCount
	for _, line := range strings.Split(strings.TrimSuffix(C.GoString(out), "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			return nil, fmt.Errorf("torch: op census: bad line %q", line)
		}
		c := OpCount{Name: f[0]}
		for i, p := range []*int64{&c.Calls, &c.Top, &c.Leaf} {
			v, err := strconv.ParseInt(f[i+1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("torch: op census: bad line %q: %w", line, err)
			}
			*p = v
		}
		counts = append(counts, c)
	}
	return counts, nil
}

// OpTotals sums a census: all calls, top-level calls and leaf calls.
func OpTotals(counts []OpCount) (calls, top, leaf int64) {
	for _, c := range counts {
		calls, top, leaf = calls+c.Calls, top+c.Top, leaf+c.Leaf
	}
	return calls, top, leaf
}
