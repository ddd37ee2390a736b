package torch

// device.go: devices (CPU, CUDA), CUDA queries and intra-op thread settings.

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

// DeviceType is the kind of a device.
type DeviceType int

const (
	CPUType  DeviceType = 0
	CUDAType DeviceType = 1
)

// Device names where a tensor lives.
type Device struct {
	Type  DeviceType
	Index int
}

// CPU is the host device.
var CPU = Device{Type: CPUType}

// CUDA returns the CUDA device with the given index.
func CUDA(index int) Device { return Device{Type: CUDAType, Index: index} }

func (d Device) String() string {
	if d.Type == CUDAType {
		return "cuda:" + strconv.Itoa(d.Index)
	}
	return "cpu"
}

// IsCUDA reports whether d is a CUDA device.
func (d Device) IsCUDA() bool { return d.Type == CUDAType }

// ParseDevice reads "cpu", "cuda" or "cuda:N".
func ParseDevice(s string) (Device, error) {
	switch {
	case s == "cpu":
		return CPU, nil
	case s == "cuda":
		return CUDA(0), nil
	case strings.HasPrefix(s, "cuda:"):
		i, err := strconv.Atoi(s[5:])
		if err == nil && i >= 0 {
			return CUDA(i), nil
		}
	}
	return Device{}, fmt.Errorf("unknown device %q (want cpu, cuda or cuda:N)", s)
}

// CUDAIsAvailable reports whether libtorch was built with CUDA and sees a GPU.
func CUDAIsAvailable() bool { return C.ldt_cuda_is_available() != 0 }

// CUDADeviceCount returns the number of visible GPUs (0 without CUDA).
func CUDADeviceCount() int { return int(C.ldt_cuda_device_count()) }

// CUDASynchronize waits for all work on the given CUDA device.
func CUDASynchronize(index int) error {
	return cerr("cuda_synchronize", C.ldt_cuda_synchronize(C.int(index)))
}

// CUDAEmptyCache releases cached, unused CUDA memory to the driver. Without a GPU (a shim
// built without CUDA, or a CUDA build on a machine without one) it is an error, as
// CUDASynchronize is.
func CUDAEmptyCache() error { return cerr("cuda_empty_cache", C.ldt_cuda_empty_cache()) }

// GPU describes one CUDA device.
type GPU struct {
	Index        int
	Name         string // e.g. "NVIDIA H200"
	MemoryBytes  int64
	Major, Minor int // compute capability
}

// CUDADeviceProperties describes GPU index; an error without CUDA or for an index past
// CUDADeviceCount.
func CUDADeviceProperties(index int) (GPU, error) {
	var name *C.char
	var mem C.int64_t
	var major, minor C.int
	if err := cerr("cuda_device_properties", C.ldt_cuda_device_properties(C.int(index), &name, &mem, &major, &minor)); err != nil {
		return GPU{}, err
	}
	defer C.free(unsafe.Pointer(name))
	return GPU{Index: index, Name: C.GoString(name), MemoryBytes: int64(mem), Major: int(major), Minor: int(minor)}, nil
}

// Synchronize waits for pending work on d (a no-op on the CPU).
func Synchronize(d Device) error {
	if d.IsCUDA() {
		return CUDASynchronize(d.Index)
	}
	return nil
}

// SetAllowTF32 lets float32 matrix products (cuBLAS) and convolutions (cuDNN) use TF32
// tensor cores on Ampere and later GPUs: faster, with about 10 bits of mantissa instead of
// 23 in their inputs. Process-wide. ldtorch keeps it off (config.Config.AllowTF32) so
// that GPU results agree with the CPU's to float32 rounding; libtorch's own defaults are
// off for cuBLAS and on for cuDNN, and this sets both. On the CPU it is only a flag.
func SetAllowTF32(allow bool) error {
	a := 0
	if allow {
		a = 1
	}
	return cerr("set_allow_tf32", C.ldt_set_allow_tf32(C.int(a)))
}

// AllowTF32 reports whether either cuBLAS or cuDNN may use TF32.
func AllowTF32() bool { return C.ldt_get_allow_tf32() == 1 }

// SetNumThreads sets libtorch's intra-op thread count for the process (n ≥ 1), and
// OpenBLAS's to the same number: OpenBLAS otherwise keeps a pool sized by the core count
// whose idle threads spin (measured: 11.6 → 6.3 ms of CPU per evaluation step when it is
// held to one thread). On shared machines set OMP_WAIT_POLICY=passive before start when
// using more than one thread.
func SetNumThreads(n int) error { return cerr("set_num_threads", C.ldt_set_num_threads(C.int(n))) }

// BLASCore names the kernel set OpenBLAS chose for this CPU (OPENBLAS_CORETYPE sets it at
// process start), e.g. "SkylakeX" or "Haswell"; "" when the BLAS in use is not OpenBLAS.
func BLASCore() string { return C.GoString(C.ldt_blas_core()) }

// NumThreads returns libtorch's intra-op thread count.
func NumThreads() int { return int(C.ldt_get_num_threads()) }
