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
const ABIVersion = 21

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

// CheckABI checks once that the loaded shim speaks this package's ABI: a stale build folder
// fails here with a clear message instead of misbehaving later. Unlike RuntimeInfo it
// queries nothing else (no CUDA), so it is cheap enough for a program's first steps.
func CheckABI() error {
	runtimeOnce.Do(func() {
		if got := int(C.ldt_abi_version()); got != ABIVersion {
			runtimeErr = fmt.Errorf("torch: the loaded shim has ABI version %d, this binary needs %d: rebuild it (cmake --build build)", got, ABIVersion)
		}
	})
	return runtimeErr
}

// RuntimeInfo checks the ABI (CheckABI) and returns the runtime facts. Commands and
// TestMain call it first. It has no side effects at import.
func RuntimeInfo() (Info, error) {
	err := CheckABI()
	info := Info{
		ABIVersion:   int(C.ldt_abi_version()),
		TorchVersion: C.GoString(C.ldt_torch_version()),
		LibtorchDir:  C.GoString(C.ldt_libtorch_dir()),
		Build:        C.GoString(C.ldt_build_info()),
		CUDA:         CUDAIsAvailable(),
		CUDADevices:  CUDADeviceCount(),
		Threads:      NumThreads(),
	}
	return info, err
}

// LogLevel is a severity of libtorch's own C++ log messages.
type LogLevel int

const (
	LogInfo    LogLevel = 0
	LogWarning LogLevel = 1 // libtorch's default threshold
	LogError   LogLevel = 2
	LogFatal   LogLevel = 3
)

// SetLogLevel sets the least severe of libtorch's own C++ log messages that reach stderr
// (c10's LOG, through which c10d writes its warnings, e.g. that a peer's host name cannot
// be looked up). Like the malloc settings, this is the program's choice: the ldtorch
// command keeps libtorch's warnings off stderr unless TORCH_CPP_LOG_LEVEL is set, the
// library never calls it.
func SetLogLevel(level LogLevel) error {
	if level < LogInfo || level > LogFatal {
		return fmt.Errorf("torch: log level %d is not one of LogInfo..LogFatal", int(level))
	}
	return cerr("set_log_level", C.ldt_set_log_level(C.int(level)))
}

// SetLogLevelFromEnv sets the threshold from TORCH_CPP_LOG_LEVEL (INFO, WARNING, ERROR or
// FATAL, or 0–3), as libtorch itself reads it.
func SetLogLevelFromEnv() error { return cerr("set_log_level", C.ldt_set_log_level(-1)) }

// SetCPPBacktraces turns libtorch's C++ backtraces on or off for the whole process. libtorch
// captures and symbolises one whenever it constructs an error (milliseconds each), and this
// binding's errors never include them, so they are off from the moment the shim is loaded;
// on is for debugging libtorch itself (a debugger, or libtorch's own messages). Programs
// call it (the ldtorch command when LDTORCH_CPP_BACKTRACE is set); the library never does.
func SetCPPBacktraces(on bool) error {
	return cerr("set_cpp_backtraces", C.ldt_set_cpp_backtraces(cbool(on)))
}

// CPPBacktraces reports whether libtorch's C++ backtraces are on (SetCPPBacktraces).
func CPPBacktraces() bool { return C.ldt_cpp_backtraces() != 0 }

// SetCPUBlockCache makes CPU tensors of 32 MiB and more come from 2 MiB-aligned mappings
// with transparent huge pages requested, and keeps up to maxBytes of freed ones for the next
// tensors of (nearly) the same size, instead of glibc's fresh mapping per tensor, unmapped on
// free, whose pages fault in again each time (docs/benchmarks/allocator.md#large-blocks-kept-for-reuse). Like the
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
