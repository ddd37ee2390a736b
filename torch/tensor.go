package torch

// tensor.go: the Tensor handle, its deterministic lifetime, queries, creation from Go
// slices and constants, random tensors, and copies back into Go memory.

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"unsafe"
)

// Tensor is one libtorch tensor. Free it with Free, or create it inside a Scope. A Tensor
// is not safe for concurrent use; several Tensors may be used from different goroutines.
type Tensor struct {
	h       C.ldt_tensor
	scope   *Scope          // the scope that will free it, or nil
	cleanup runtime.Cleanup // GC backstop for tensors outside any scope
	gc      bool
}

func freeHandle(h C.ldt_tensor) { C.ldt_tensor_free(h) }

// wrap takes ownership of a new handle: the innermost open scope frees it, or, outside any
// scope, Free (with a garbage-collector cleanup only as a backstop).
func wrap(h C.ldt_tensor) *Tensor {
	t := &Tensor{h: h}
	if !register(t) {
		t.setCleanup()
	}
	return t
}

func (t *Tensor) setCleanup() {
	t.cleanup = runtime.AddCleanup(t, freeHandle, t.h)
	t.gc = true
}

// Free releases the tensor now. It is idempotent; any later use returns ErrFreed.
func (t *Tensor) Free() {
	if t == nil || t.h == nil {
		return
	}
	if t.gc {
		t.cleanup.Stop()
		t.gc = false
	}
	C.ldt_tensor_free(t.h)
	t.h = nil
}

// Freed reports whether the tensor was freed.
func (t *Tensor) Freed() bool { return t == nil || t.h == nil }

// handle returns the C handle, or an error for a nil or freed tensor.
func (t *Tensor) handle(op string) (C.ldt_tensor, error) {
	if t == nil {
		return nil, errorf(op, "nil tensor")
	}
	if t.h == nil {
		return nil, &Error{Op: op, Msg: ErrFreed.Error(), freed: true}
	}
	return t.h, nil
}

// handles converts a list; every element must be live.
func handles(op string, ts []*Tensor) ([]C.ldt_tensor, error) {
	hs := make([]C.ldt_tensor, len(ts))
	for i, t := range ts {
		h, err := t.handle(op)
		if err != nil {
			e := err.(*Error)
			return nil, &Error{Op: op, Msg: fmt.Sprintf("element %d: %s", i, e.Msg), freed: e.freed}
		}
		hs[i] = h
	}
	return hs, nil
}

// optHandle is NULL for a nil tensor (an absent optional argument).
func optHandle(op string, t *Tensor) (C.ldt_tensor, error) {
	if t == nil {
		return nil, nil
	}
	return t.handle(op)
}

func int64Ptr(s []int64) *C.int64_t {
	if len(s) == 0 {
		return nil
	}
	return (*C.int64_t)(unsafe.Pointer(&s[0]))
}

func handlePtr(s []C.ldt_tensor) *C.ldt_tensor {
	if len(s) == 0 {
		return nil
	}
	return &s[0]
}

// result wraps a shim call that produced one tensor.
func result(op string, out C.ldt_tensor, e C.ldt_error) (*Tensor, error) {
	if err := cerr(op, e); err != nil {
		return nil, err
	}
	return wrap(out), nil
}

// Dim returns the number of dimensions (0 for a freed tensor).
func (t *Tensor) Dim() int {
	if t.Freed() {
		return 0
	}
	return int(C.ldt_tensor_dim(t.h))
}

// Shape returns the sizes (nil for a freed tensor).
func (t *Tensor) Shape() []int64 {
	if t.Freed() {
		return nil
	}
	s := make([]int64, t.Dim())
	if len(s) > 0 {
		C.ldt_tensor_shape(t.h, int64Ptr(s))
	}
	return s
}

// Numel returns the number of elements.
func (t *Tensor) Numel() int64 {
	if t.Freed() {
		return 0
	}
	return int64(C.ldt_tensor_numel(t.h))
}

// DType returns the element type.
func (t *Tensor) DType() DType {
	if t.Freed() {
		return DType(-1)
	}
	return DType(C.ldt_tensor_dtype(t.h))
}

// Device returns where the tensor lives.
func (t *Tensor) Device() Device {
	if t.Freed() {
		return CPU
	}
	var typ, idx C.int
	C.ldt_tensor_device(t.h, &typ, &idx)
	return Device{Type: DeviceType(typ), Index: int(idx)}
}

// RequiresGrad reports whether autograd records operations on the tensor.
func (t *Tensor) RequiresGrad() bool { return !t.Freed() && C.ldt_tensor_requires_grad(t.h) != 0 }

// IsLeaf reports whether the tensor is a leaf of the autograd graph.
func (t *Tensor) IsLeaf() bool { return !t.Freed() && C.ldt_tensor_is_leaf(t.h) != 0 }

func (t *Tensor) String() string {
	if t == nil {
		return "Tensor(nil)"
	}
	if t.h == nil {
		return "Tensor(freed)"
	}
	dims := make([]string, 0, t.Dim())
	for _, d := range t.Shape() {
		dims = append(dims, fmt.Sprint(d))
	}
	return fmt.Sprintf("Tensor(%s, [%s], %s)", t.DType(), strings.Join(dims, " "), t.Device())
}

// Alias returns a new handle to the same tensor (same storage, same autograd identity),
// owned separately: useful to keep a tensor past a scope that owns the original.
func (t *Tensor) Alias() (*Tensor, error) {
	h, err := t.handle("alias")
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_tensor_alias(&out, h)
	return result("alias", out, e)
}

// ---- creation from Go memory ---------------------------------------------------------------

func checkShape(op string, shape []int64, n int) error {
	count := int64(1)
	for _, d := range shape {
		if d < 0 {
			return errorf(op, fmt.Sprintf("negative dimension in shape %v", shape))
		}
		count *= d
	}
	if count != int64(n) {
		return errorf(op, fmt.Sprintf("shape %v needs %d elements, got %d", shape, count, n))
	}
	return nil
}

func fromData(op string, p unsafe.Pointer, n int, dt DType, shape []int64) (*Tensor, error) {
	return fromDataOn(op, p, n, dt, CPU, shape)
}

func fromDataOn(op string, p unsafe.Pointer, n int, dt DType, dev Device, shape []int64) (*Tensor, error) {
	if err := checkShape(op, shape, n); err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_from_data(&out, p, C.int(dt), int64Ptr(shape), C.int(len(shape)), C.int(dev.Type), C.int(dev.Index))
	return result(op, out, e)
}

func dataPtr[T any](s []T) unsafe.Pointer {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Pointer(&s[0])
}

// FromFloat32 copies data into a new CPU tensor of the given shape.
func FromFloat32(data []float32, shape ...int64) (*Tensor, error) {
	return fromData("from_float32", dataPtr(data), len(data), Float, shape)
}

// FromFloat64 copies data into a new CPU tensor of the given shape.
func FromFloat64(data []float64, shape ...int64) (*Tensor, error) {
	return fromData("from_float64", dataPtr(data), len(data), Double, shape)
}

// FromInt64 copies data into a new CPU tensor of the given shape.
func FromInt64(data []int64, shape ...int64) (*Tensor, error) {
	return fromData("from_int64", dataPtr(data), len(data), Long, shape)
}

// FromInt64On copies data into a new tensor of the given shape on dev. For a GPU the data
// is staged in page-locked host memory and the copy is queued without waiting for it (the
// GPU's later work on the tensor runs after the copy), unlike FromInt64 followed by To,
// which waits for the GPU to finish everything queued before it.
func FromInt64On(dev Device, data []int64, shape ...int64) (*Tensor, error) {
	return fromDataOn("from_int64", dataPtr(data), len(data), Long, dev, shape)
}

// FromUint8 copies data into a new CPU tensor of the given shape.
func FromUint8(data []uint8, shape ...int64) (*Tensor, error) {
	return fromData("from_uint8", dataPtr(data), len(data), Uint8, shape)
}

// ---- copies back to Go memory ---------------------------------------------------------------

// hostReads counts reads of tensor values into Go memory (Item, Float32s, ...).
var hostReads atomic.Uint64

// HostReads returns how many times this process has read tensor values into Go memory
// (Item, Float32s, Float64s, Int64s, Uint8s). On a GPU each such read waits until all work
// queued before it is done (a device→host synchronisation), so the count is what the
// meta-loop and evaluation keep low; on the CPU it is just a count.
func HostReads() uint64 { return hostReads.Load() }

func copyOut(op string, t *Tensor, dt DType, dst unsafe.Pointer, n int) error {
	h, err := t.handle(op)
	if err != nil {
		return err
	}
	hostReads.Add(1)
	return cerr(op, C.ldt_copy_to(h, dst, C.int(dt), C.int64_t(n)))
}

// Float32s returns the elements converted to float32, in row-major order.
func (t *Tensor) Float32s() ([]float32, error) {
	out := make([]float32, t.Numel())
	return out, copyOut("float32s", t, Float, dataPtr(out), len(out))
}

// Float64s returns the elements converted to float64, in row-major order.
func (t *Tensor) Float64s() ([]float64, error) {
	out := make([]float64, t.Numel())
	return out, copyOut("float64s", t, Double, dataPtr(out), len(out))
}

// Int64s returns the elements converted to int64, in row-major order.
func (t *Tensor) Int64s() ([]int64, error) {
	out := make([]int64, t.Numel())
	return out, copyOut("int64s", t, Long, dataPtr(out), len(out))
}

// Uint8s returns the elements converted to uint8, in row-major order.
func (t *Tensor) Uint8s() ([]uint8, error) {
	out := make([]uint8, t.Numel())
	return out, copyOut("uint8s", t, Uint8, dataPtr(out), len(out))
}

// Item returns the value of a one-element tensor.
func (t *Tensor) Item() (float64, error) {
	h, err := t.handle("item")
	if err != nil {
		return 0, err
	}
	hostReads.Add(1)
	var v C.double
	if err := cerr("item", C.ldt_item(h, &v)); err != nil {
		return 0, err
	}
	return float64(v), nil
}

// ---- constants and random tensors --------------------------------------------------------------

type options struct {
	dtype        DType
	device       Device
	requiresGrad bool
}

// Option sets the dtype, device or requires-grad flag of a new tensor (default float32, CPU).
type Option func(*options)

// WithDType sets the element type.
func WithDType(d DType) Option { return func(o *options) { o.dtype = d } }

// OnDevice sets the device.
func OnDevice(d Device) Option { return func(o *options) { o.device = d } }

// WithRequiresGrad makes the new tensor a leaf that records gradients.
func WithRequiresGrad() Option { return func(o *options) { o.requiresGrad = true } }

func makeOptions(opts []Option) options {
	o := options{dtype: Float, device: CPU}
	for _, f := range opts {
		f(&o)
	}
	return o
}

func finish(op string, out C.ldt_tensor, e C.ldt_error, o options) (*Tensor, error) {
	t, err := result(op, out, e)
	if err != nil || !o.requiresGrad {
		return t, err
	}
	if err := t.SetRequiresGrad(true); err != nil {
		t.Free()
		return nil, err
	}
	return t, nil
}

// Full returns a tensor of the given shape filled with v.
func Full(shape []int64, v float64, opts ...Option) (*Tensor, error) {
	o := makeOptions(opts)
	var out C.ldt_tensor
	e := C.ldt_full(&out, int64Ptr(shape), C.int(len(shape)), C.double(v), C.int(o.dtype), C.int(o.device.Type), C.int(o.device.Index))
	return finish("full", out, e, o)
}

// Zeros returns a tensor of zeros.
func Zeros(shape []int64, opts ...Option) (*Tensor, error) { return Full(shape, 0, opts...) }

// Ones returns a tensor of ones.
func Ones(shape []int64, opts ...Option) (*Tensor, error) { return Full(shape, 1, opts...) }

// Eye returns the n×n identity matrix.
func Eye(n int64, opts ...Option) (*Tensor, error) {
	o := makeOptions(opts)
	var out C.ldt_tensor
	e := C.ldt_eye(&out, C.int64_t(n), C.int(o.dtype), C.int(o.device.Type), C.int(o.device.Index))
	return finish("eye", out, e, o)
}

// Arange returns start, start+step, … below end.
func Arange(start, end, step float64, opts ...Option) (*Tensor, error) {
	o := makeOptions(opts)
	var out C.ldt_tensor
	e := C.ldt_arange(&out, C.double(start), C.double(end), C.double(step), C.int(o.dtype), C.int(o.device.Type), C.int(o.device.Index))
	return finish("arange", out, e, o)
}

func random(op string, kind int, shape []int64, g *Generator, opts []Option) (*Tensor, error) {
	o := makeOptions(opts)
	gh, err := g.handle(op)
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_rand(&out, C.int(kind), int64Ptr(shape), C.int(len(shape)), gh, C.int(o.dtype), C.int(o.device.Type), C.int(o.device.Index))
	return finish(op, out, e, o)
}

// Rand returns uniform [0, 1) samples drawn from g (nil: libtorch's default generator,
// seeded by ManualSeed). Samples are drawn on the CPU and moved, so a seed gives the same
// values on every device.
func Rand(shape []int64, g *Generator, opts ...Option) (*Tensor, error) {
	return random("rand", 0, shape, g, opts)
}

// Randn returns standard normal samples drawn from g (see Rand).
func Randn(shape []int64, g *Generator, opts ...Option) (*Tensor, error) {
	return random("randn", 1, shape, g, opts)
}

// Randperm returns a random permutation of 0..n-1 (int64) drawn from g (see Rand).
func Randperm(n int64, g *Generator, opts ...Option) (*Tensor, error) {
	o := makeOptions(opts)
	gh, err := g.handle("randperm")
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_randperm(&out, C.int64_t(n), gh, C.int(o.device.Type), C.int(o.device.Index))
	return result("randperm", out, e)
}

// ---- conversion and movement ----------------------------------------------------------------------

func (t *Tensor) to(op string, dt int, dev *Device) (*Tensor, error) {
	h, err := t.handle(op)
	if err != nil {
		return nil, err
	}
	dtyp, didx := C.int(-1), C.int(0)
	if dev != nil {
		dtyp, didx = C.int(dev.Type), C.int(dev.Index)
	}
	var out C.ldt_tensor
	e := C.ldt_to(&out, h, C.int(dt), dtyp, didx)
	return result(op, out, e)
}

// To returns the tensor on device d (the same tensor's data when already there).
func (t *Tensor) To(d Device) (*Tensor, error) { return t.to("to", -1, &d) }

// ToDType returns the tensor converted to dtype dt.
func (t *Tensor) ToDType(dt DType) (*Tensor, error) { return t.to("to_dtype", int(dt), nil) }

// Clone returns a copy that stays in the autograd graph.
func (t *Tensor) Clone() (*Tensor, error) {
	h, err := t.handle("clone")
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_clone(&out, h)
	return result("clone", out, e)
}

// Detach returns a tensor sharing storage, cut from the autograd graph.
func (t *Tensor) Detach() (*Tensor, error) {
	h, err := t.handle("detach")
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_detach(&out, h)
	return result("detach", out, e)
}
