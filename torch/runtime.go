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
const ABIVersion = 13

// Info describes the libtorch runtime in use.
type Info struct {
	ABIVersion   int    // reported by the loaded shim
	TorchVersion string // libtorch's version, e.g. "1.13.0"
	LibtorchDir  string // the folder the libtorch libraries were loaded from ("" if unknown)
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
		LibtorchDir:  C.GoString(C.ldt_libtorch_dir()),
		Build:        C.GoString(C.ldt_build_info()),
		CUDA:         CUDAIsAvailable(),
		CUDADevices:  CUDADeviceCount(),
		Threads:      NumThreads(),
	}
	return info, runtimeErr
}

// SetCPUBlockCache makes CPU tensors of 32 MiB and more come from 2 MiB-aligned mappings
// with transparent huge pages requested, and keeps up to maxBytes of freed ones for the next
// tensors of (nearly) the same size, instead of glibc's fresh mapping per tensor, unmapped on
// free, whose pages fault in again each time (docs/BENCHMARKS.md, prediction 14). Like the
// malloc settings, this is the program's choice: the ldtorch command makes it, the library
// never does. 0 stops keeping blocks; tensors of other devices are not affected.
func SetCPUBlockCache(maxBytes int64) error {
	return cerr("set_cpu_block_cache", C.ldt_set_cpu_block_cache(C.int64_t(maxBytes)))
}

// CPUBlockCacheStats reports the bytes kept now, the blocks mapped and the requests served
// from kept blocks since SetCPUBlockCache was first called (zeros before).
func CPUBlockCacheStats() (cached, maps, hits int64) {
	var c, m, h C.int64_t
	C.ldt_cpu_block_cache_stats(&c, &m, &h)
	return int64(c), int64(m), int64(h)
}

// Version returns libtorch's version string.
func Version() string { return C.GoString(C.ldt_torch_version()) }
