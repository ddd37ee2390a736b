package torch

// runtime.go: the version handshake between this package and the shim it runs against.

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"sync"
)

// ABIVersion is the shim C API version this package was written for (shim.h).
const ABIVersion = 7

// Info describes the libtorch runtime in use.
type Info struct {
	ABIVersion   int    // reported by the loaded shim
	TorchVersion string // libtorch's version, e.g. "1.13.0"
	Build        string // compiler, CUDA support, build tag of the shim
	CUDA         bool
	CUDADevices  int
	Threads      int
}

var (
	runtimeOnce sync.Once
	runtimeErr  error
)

// RuntimeInfo checks once that the loaded shim speaks this package's ABI and returns the
// runtime facts. Commands and TestMain call it first: a stale build folder fails here
// with a clear message instead of misbehaving later. It has no side effects at import.
func RuntimeInfo() (Info, error) {
	runtimeOnce.Do(func() {
		if got := int(C.ldt_abi_version()); got != ABIVersion {
			runtimeErr = fmt.Errorf("torch: the loaded shim has ABI version %d, this binary needs %d: rebuild it (cmake --build build)", got, ABIVersion)
		}
	})
	info := Info{
		ABIVersion:   int(C.ldt_abi_version()),
		TorchVersion: C.GoString(C.ldt_torch_version()),
		Build:        C.GoString(C.ldt_build_info()),
		CUDA:         CUDAIsAvailable(),
		CUDADevices:  CUDADeviceCount(),
		Threads:      NumThreads(),
	}
	return info, runtimeErr
}

// Version returns libtorch's version string.
func Version() string { return C.GoString(C.ldt_torch_version()) }
