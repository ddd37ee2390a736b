// Package torch is a thin, error-returning Go binding over LibTorch through a small C shim
// (torch/csrc, built by CMake into build/libldtorch_shim.so.1). Every fallible call returns
// an error; no C++ exception, shape error or bad dtype can crash the process. Tensor memory
// is freed deterministically with Free or a Scope, never left to Go's garbage collector.
//
// This file holds the package's only #cgo lines. The Go binary links the shim alone (never
// libtorch): its RUNPATH looks in $ORIGIN/lib first, then the source tree's build folder,
// so one binary runs against any libtorch once the shim is rebuilt next to it.
package torch

/*
#cgo CFLAGS: -I${SRCDIR}/csrc
#cgo LDFLAGS: -L${SRCDIR}/../build -lldtorch_shim -Wl,-rpath,$ORIGIN/lib -Wl,-rpath,${SRCDIR}/../build
#include "shim.h"
*/
import "C"
