package torch

// script.go: TorchScript modules (torch.jit.save's files): loading, their named parameters
// and buffers, the types of the submodules holding them, and a functional call that runs a
// method with given tensors in place of the module's own.

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"runtime"
	"strings"
	"unsafe"

	"github.com/ldtorch/ldtorch/torch/fileio/boundedread"
)

// MaxScriptFile bounds the size of a file LoadScriptModule reads (it reads the file whole).
const MaxScriptFile = 8 << 30

// ScriptModule is a TorchScript module loaded from a file, every tensor on the CPU. Its
// methods run in TorchScript's interpreter, each operator recording its own autograd node
// (the graph executor's optimisations are off for every call: no fused or autodiff
// subgraphs), so derivatives of every order exist wherever the operators have them.
//
// A ScriptModule is used by one goroutine at a time: Call changes the module's attributes
// for its duration. Close frees it (a garbage-collector cleanup is only a backstop).
type ScriptModule struct {
	h       C.ldt_script
	path    string
	sha256  string // of the bytes loaded
	cleanup runtime.Cleanup
}

// ScriptTensor is a parameter or buffer of a ScriptModule: its name as in the module's
// state_dict ("layer1.0.conv1.weight"), the qualified type name of the submodule holding
// it ("torch.nn.modules.conv.Conv2d"; TorchScript's "__torch__." prefix and name mangling
// removed) and the tensor itself (a new handle on the module's own tensor: writing to it
// writes the module's).
type ScriptTensor struct {
	Name, Owner string
	Tensor      *Tensor
}

// LoadScriptModule reads a TorchScript file (torch.jit.save, torch.jit.script or
// torch.jit.trace) with every tensor mapped to the CPU. Every failure is an error naming
// the file: unreadable, not a TorchScript file (another zip archive, a torch.save file of
// tensors, something else), truncated or damaged (the archive's CRCs are checked before
// libtorch reads it, as LoadPickle does).
func LoadScriptModule(path string) (*ScriptModule, error) {
	const op = "load_script_module"
	fail := func(msg string, err error) (*ScriptModule, error) {
		return nil, &Error{Op: op, Msg: path + ": " + msg, err: err}
	}
	data, err := boundedread.ReadFile(path, MaxScriptFile, "TorchScript file")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return fail(pe.Err.Error(), err)
		}
		return fail(err.Error(), err)
	}
	if len(data) == 0 {
		return fail("empty file, not a TorchScript file", nil)
	}
	if err := checkZip(data); err != nil {
		return fail("not a TorchScript file, or a truncated or damaged one ("+strings.TrimPrefix(err.Error(), "not a torch.save archive: ")+")", err)
	}
	var h C.ldt_script
	e := C.ldt_script_load(&h, unsafe.Pointer(&data[0]), C.int64_t(len(data)))
	runtime.KeepAlive(data)
	if err := cerr(op, e); err != nil {
		msg := err.(*Error).Msg
		if strings.Contains(msg, "constants.pkl") || strings.Contains(msg, "file not found") || strings.Contains(msg, "code/") {
			return fail("not a TorchScript file (a zip archive without TorchScript's code and constants: a torch.save file? "+firstLine(msg)+")", err)
		}
		return fail(firstLine(msg), err)
	}
	sum := sha256.Sum256(data)
	m := &ScriptModule{h: h, path: path, sha256: hex.EncodeToString(sum[:])}
	m.cleanup = runtime.AddCleanup(m, func(h C.ldt_script) { C.ldt_script_free(h) }, h)
	return m, nil
}

// firstLine is a libtorch message's first line (TorchScript's errors add source excerpts).
func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[:i]) + " …"
	}
	return s
}

// SHA256 is the SHA-256 of the file's bytes as they were loaded (hex).
func (m *ScriptModule) SHA256() string { return m.sha256 }

// Path is the file the module was loaded from.
func (m *ScriptModule) Path() string {
	if m == nil {
		return ""
	}
	return m.path
}

// Close frees the module; it is idempotent. Tensors handed out by Parameters and Buffers
// stay valid (they hold their own references).
func (m *ScriptModule) Close() {
	if m == nil || m.h == nil {
		return
	}
	m.cleanup.Stop()
	C.ldt_script_free(m.h)
	m.h = nil
}

func (m *ScriptModule) handle(op string) (C.ldt_script, error) {
	if m == nil || m.h == nil {
		return nil, errorf(op, "use of a closed or nil TorchScript module")
	}
	return m.h, nil
}

// errorf names the module's file in a failure of op.
func (m *ScriptModule) fail(op string, err error) error {
	if err == nil {
		return nil
	}
	if e, ok := err.(*Error); ok {
		return &Error{Op: op, Msg: m.path + ": " + e.Msg, err: e.err}
	}
	return err
}

// Parameters lists the module's parameters in the order and with the names of PyTorch's
// named_parameters(), each with the type of the submodule holding it. The tensors are new
// handles, created in the innermost open Scope (or owned by the caller). Tied parameters
// (one tensor under two names) are an error.
func (m *ScriptModule) Parameters() ([]ScriptTensor, error) { return m.named("script_parameters", 0) }

// Buffers lists the module's buffers (BatchNorm's running statistics and the like) as
// Parameters lists its parameters, in named_buffers() order.
func (m *ScriptModule) Buffers() ([]ScriptTensor, error) { return m.named("script_buffers", 1) }

func (m *ScriptModule) named(op string, buffers int) ([]ScriptTensor, error) {
	h, err := m.handle(op)
	if err != nil {
		return nil, err
	}
	var n C.int
	var names, owners *C.char
	var hs *C.ldt_tensor
	if err := cerr(op, C.ldt_script_named(h, C.int(buffers), &n, &names, &owners, &hs)); err != nil {
		return nil, m.fail(op, err)
	}
	defer C.ldt_free_buffer(unsafe.Pointer(names))
	defer C.ldt_free_buffer(unsafe.Pointer(owners))
	defer C.ldt_free_buffer(unsafe.Pointer(hs))
	out := make([]ScriptTensor, int(n))
	list := unsafe.Slice(hs, int(n))
	qn, qo := names, owners
	for i := range out {
		out[i].Name = C.GoString(qn)
		owner := C.GoString(qo)
		qn = (*C.char)(unsafe.Add(unsafe.Pointer(qn), len(out[i].Name)+1))
		qo = (*C.char)(unsafe.Add(unsafe.Pointer(qo), len(owner)+1))
		out[i].Owner = DemangleScriptType(owner)
		out[i].Tensor = wrap(list[i])
	}
	return out, nil
}

var mangleRE = regexp.MustCompile(`___torch_mangle_\d+\.`)

// DemangleScriptType turns a TorchScript class name into the Python one:
// "__torch__.torch.nn.modules.conv.___torch_mangle_3.Conv2d" → "torch.nn.modules.conv.Conv2d".
func DemangleScriptType(name string) string {
	return mangleRE.ReplaceAllString(strings.TrimPrefix(name, "__torch__."), "")
}

// ModuleType is the type of the submodule at path ("" the module itself, "a.b" a nested
// one), as DemangleScriptType spells it; a path that names no submodule is an error.
func (m *ScriptModule) ModuleType(path string) (string, error) {
	const op = "script_module_type"
	h, err := m.handle(op)
	if err != nil {
		return "", err
	}
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	var t *C.char
	if err := cerr(op, C.ldt_script_module_type(h, cp, &t)); err != nil {
		return "", m.fail(op, err)
	}
	defer C.ldt_free_buffer(unsafe.Pointer(t))
	return DemangleScriptType(C.GoString(t)), nil
}

// HasMethod reports whether the module has a method of that name ("forward", "features").
func (m *ScriptModule) HasMethod(name string) (bool, error) {
	const op = "script_has_method"
	h, err := m.handle(op)
	if err != nil {
		return false, err
	}
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	var found C.int
	if err := cerr(op, C.ldt_script_has_method(h, cn, &found)); err != nil {
		return false, m.fail(op, err)
	}
	return found != 0, nil
}

// Train sets the training flag of the module and of every submodule (torch.nn.Module.train):
// BatchNorm then uses batch statistics and updates its running ones; dropout drops.
func (m *ScriptModule) Train(on bool) error {
	const op = "script_train"
	h, err := m.handle(op)
	if err != nil {
		return err
	}
	return m.fail(op, cerr(op, C.ldt_script_train(h, cbool(on))))
}

// To moves the module's own parameters and buffers to dev, its floating-point ones to dtype
// too (in place: Parameters' tensors follow). A functional Call replaces the tensors it is
// given; the module's own matter for the others (a buffer of constants, say).
func (m *ScriptModule) To(dtype DType, dev Device) error {
	const op = "script_to"
	h, err := m.handle(op)
	if err != nil {
		return err
	}
	return m.fail(op, cerr(op, C.ldt_script_to(h, C.int(dtype), C.int(dev.Type), C.int(dev.Index))))
}

// UseOwnKernels makes method run its 2-d convolutions and max-pools through the shim's own
// CPU kernels, as nets' networks do (Conv2dDirect, MaxPool2x2, MaxPool2dDirect, and
// Conv2dMaxPool2x2 / Conv2dMaxPool2d where a max-pool takes a convolution's output, or the
// ReLU of it, alone; ReLU commutes with the max exactly): the method's graph is inlined
// (the methods it calls, its submodules' included) and those operators replaced. Each falls
// back to libtorch's op where the kernels do not apply (other devices, dtypes and shapes,
// SetDirectConv("off")); values are within float rounding of libtorch's, derivatives of
// every order the kernels' own. It returns how many operators it replaced. Call it before
// the method first runs.
func (m *ScriptModule) UseOwnKernels(method string) (int, error) {
	const op = "script_use_own_kernels"
	h, err := m.handle(op)
	if err != nil {
		return 0, err
	}
	cm := C.CString(method)
	defer C.free(unsafe.Pointer(cm))
	var n C.int
	if err := cerr(op, C.ldt_script_use_own_kernels(h, cm, &n)); err != nil {
		return 0, m.fail(op, err)
	}
	return int(n), nil
}

// Run runs method on x with the module's own parameters and buffers.
func (m *ScriptModule) Run(method string, x *Tensor) (*Tensor, error) {
	return m.Call(method, nil, nil, x)
}

// Call runs method on x with values[i] in place of the parameter or buffer names[i] (names
// as Parameters and Buffers give them) for the duration of the call, then puts the module's
// own back: a functional call. The values may be tensors with a graph (θ′ = θ − α∇θ) and
// the result extends it, so gradients reach them, at any order the module's operators
// differentiate (double backward for LD included). Parameters and buffers not named keep
// the module's own tensors. In training mode, BatchNorm updates the running statistics it
// is given in place, as the module's own. The method must return one tensor; anything
// else is an error naming the file and the method. The result is created in the innermost
// open Scope.
func (m *ScriptModule) Call(method string, names []string, values []*Tensor, x *Tensor) (*Tensor, error) {
	op := "script_call"
	h, err := m.handle(op)
	if err != nil {
		return nil, err
	}
	if len(names) != len(values) {
		return nil, errorf(op, fmt.Sprintf("%d names for %d tensors", len(names), len(values)))
	}
	hx, err := x.handle(op)
	if err != nil {
		return nil, err
	}
	hs, err := handles(op, values)
	if err != nil {
		return nil, err
	}
	lens := make([]int64, len(names))
	var all strings.Builder
	for i, n := range names {
		if n == "" {
			return nil, errorf(op, fmt.Sprintf("name %d is empty", i))
		}
		lens[i] = int64(len(n))
		all.WriteString(n)
	}
	cm := C.CString(method)
	defer C.free(unsafe.Pointer(cm))
	cn := C.CString(all.String())
	defer C.free(unsafe.Pointer(cn))
	var out C.ldt_tensor
	e := C.ldt_script_call(&out, h, cm, cn, int64Ptr(lens), handlePtr(hs), C.int(len(hs)), hx)
	t, err := result(op, out, e)
	if err != nil {
		e := err.(*Error)
		return nil, &Error{Op: op, Msg: m.path + ": " + method + ": " + interpreterMessage(e.Msg)}
	}
	return t, nil
}

// interpreterMessage is the error of a failed TorchScript operator without the interpreter's
// traceback: "The following operation failed in the TorchScript interpreter. Traceback …
// RuntimeError: what went wrong" becomes "what went wrong" (followed by the first line of
// the operator's source, when the traceback names one). Other messages are kept.
func interpreterMessage(msg string) string {
	// the dispatcher's list of every backend an operator has
	if i := strings.Index(msg, " This could be because the operator doesn't exist for this backend"); i > 0 {
		msg = msg[:i]
	}
	if !strings.Contains(msg, "TorchScript interpreter") {
		return msg
	}
	lines := strings.Split(strings.TrimSpace(msg), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		for _, kind := range []string{"RuntimeError: ", "ValueError: ", "TypeError: ", "IndexError: ", "AssertionError: "} {
			if rest, ok := strings.CutPrefix(l, kind); ok {
				return strings.TrimSpace(strings.Join(append([]string{rest}, lines[i+1:]...), " "))
			}
		}
	}
	return lines[len(lines)-1]
}
