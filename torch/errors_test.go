package torch

// errors_test.go: every class of C++ failure comes back as a *torch.Error and the process
// survives; binding-side checks (nil, freed, slice length) fail fast in Go; and a source
// scan proves that every fallible export of the shim sits behind the exception barrier.

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// wantErr asserts that err is a *Error for op whose message contains every fragment
// (case-insensitive) and carries no C++ backtrace.
func wantErr(t *testing.T, err error, op string, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: expected an error, got nil", op)
	}
	var te *Error
	if !errors.As(err, &te) {
		t.Fatalf("%s: error %T (%v) is not a *torch.Error", op, err, err)
	}
	if te.Op != op {
		t.Errorf("error op = %q, want %q (%v)", te.Op, op, err)
	}
	msg := strings.ToLower(te.Msg)
	for _, f := range fragments {
		if !strings.Contains(msg, strings.ToLower(f)) {
			t.Errorf("%s: message %q lacks %q", op, te.Msg, f)
		}
	}
	for _, noise := range []string{"Exception raised from", "frame #"} {
		if strings.Contains(te.Msg, noise) {
			t.Errorf("%s: message carries a C++ backtrace: %q", op, te.Msg)
		}
	}
	if !strings.HasPrefix(err.Error(), "torch: "+op+": ") {
		t.Errorf("Error() = %q, want prefix %q", err.Error(), "torch: "+op+": ")
	}
}

func TestErrorShapeMismatch(t *testing.T) {
	scoped(t)
	T := tensors(t)
	a := T(Randn([]int64{2, 3}, nil))
	_, err := a.Mm(a)
	wantErr(t, err, "mm", "cannot be multiplied", "2x3")
	_, err = a.Matmul(T(Randn([]int64{4, 2}, nil)))
	wantErr(t, err, "matmul")
	_, err = Bmm(a, a)
	wantErr(t, err, "bmm", "3D")

	x := T(Randn([]int64{1, 3, 8, 8}, nil))
	w := T(Randn([]int64{4, 5, 3, 3}, nil))
	_, err = Conv2d(x, w, nil, Conv2dOpts{})
	wantErr(t, err, "conv2d", "expected input[1, 3, 8, 8] to have 5 channels")
	_, err = Conv2d(x, T(Randn([]int64{4, 3, 3, 3}, nil)), nil, Conv2dOpts{Groups: 2})
	wantErr(t, err, "conv2d", "groups")

	_, err = Cat([]*Tensor{a, T(Randn([]int64{2, 4}, nil))}, 0)
	wantErr(t, err, "cat", "sizes of tensors must match")
	_, err = Stack([]*Tensor{a, T(Randn([]int64{3, 2}, nil))}, 0)
	wantErr(t, err, "stack")
	_, err = Cat(nil, 0)
	wantErr(t, err, "cat", "empty tensor list")

	_, err = a.Add(T(Randn([]int64{4}, nil)))
	wantErr(t, err, "add", "must match")
	_, err = a.Reshape(7)
	wantErr(t, err, "reshape", "invalid for input of size 6")
	tr := T(a.T())
	_, err = tr.View(6)
	wantErr(t, err, "view")
	_, err = Linear(a, T(Randn([]int64{4, 5}, nil)), nil)
	wantErr(t, err, "linear")
	_, err = SoftCrossEntropy(a, T(Randn([]int64{2, 4}, nil)))
	wantErr(t, err, "soft_cross_entropy", "same shape")
	_, err = MaxPool2d(T(Randn([]int64{1, 1, 2, 2}, nil)), PoolOpts{Kernel: [2]int64{3, 3}})
	wantErr(t, err, "max_pool2d")
	_, err = BatchNorm(T(Randn([]int64{4, 3}, nil)), nil, nil, nil, nil, BatchNormOpts{Eps: 1e-5})
	wantErr(t, err, "batch_norm", "running_mean")
	_, err = LocalResponseNorm(a, 3, 1e-4, 0.75, 1)
	wantErr(t, err, "local_response_norm", "3 or more dimensions")
	_, err = a.LogSumExp()
	wantErr(t, err, "logsumexp", "needs dimensions")
	_, err = a.Prod(0, 1)
	wantErr(t, err, "prod", "one dimension")
	_, err = a.Item()
	wantErr(t, err, "item", "6 elements")
}

func TestErrorBadDType(t *testing.T) {
	scoped(t)
	T := tensors(t)
	z := T(Randn([]int64{2, 3}, nil))
	_, err := CrossEntropy(z, T(Zeros([]int64{2})))
	wantErr(t, err, "cross_entropy", "int64 class indices")
	_, err = CrossEntropy(z, T(FromInt64([]int64{0, 3}, 2)))
	wantErr(t, err, "cross_entropy", "out of bounds")
	_, err = CrossEntropy(T(Randn([]int64{6}, nil)), T(FromInt64([]int64{0}, 1)))
	wantErr(t, err, "cross_entropy", "(B, C)")

	// a dtype code the shim does not know, through every creation path that takes one
	_, err = fromData("from_data", nil, 0, DType(99), []int64{0})
	wantErr(t, err, "from_data", "unsupported dtype code 99")
	_, err = Full([]int64{2}, 1, WithDType(DType(42)))
	wantErr(t, err, "full", "unsupported dtype code 42")
	_, err = z.ToDType(DType(8)) // ComplexHalf: not in the shim's table
	wantErr(t, err, "to_dtype", "unsupported dtype code 8")
	_, err = Randn([]int64{2}, nil, WithDType(Long))
	wantErr(t, err, "randn")
	_, err = z.Mm(T(Ones([]int64{3, 2}, WithDType(Double))))
	wantErr(t, err, "mm")
	_, err = z.IndexSelect(0, T(Zeros([]int64{1})))
	wantErr(t, err, "index_select")
	if got := DType(99).String(); got != "dtype(99)" {
		t.Errorf("DType(99).String() = %q", got)
	}
}

func TestErrorIndexOutOfRange(t *testing.T) {
	scoped(t)
	T := tensors(t)
	x := T(Randn([]int64{2, 3}, nil))
	_, err := x.IndexSelect(0, T(FromInt64([]int64{0, 5}, 2)))
	wantErr(t, err, "index_select", "out of range")
	_, err = x.IndexSelect(0, T(FromInt64([]int64{-1}, 1)))
	wantErr(t, err, "index_select")
	_, err = x.IndexSelect(4, T(FromInt64([]int64{0}, 1)))
	wantErr(t, err, "index_select", "dimension")
	_, err = x.Gather(1, T(FromInt64([]int64{0, 5, 1, 1, 1, 1}, 2, 3)))
	wantErr(t, err, "gather", "out of bounds")
	_, err = x.Narrow(1, 2, 3)
	wantErr(t, err, "narrow", "exceeds dimension size")
	_, err = x.Narrow(5, 0, 1)
	wantErr(t, err, "narrow", "dimension")
	_, err = x.Select(0, 7)
	wantErr(t, err, "select", "out of range")
	_, err = x.Transpose(0, 3)
	wantErr(t, err, "transpose", "dimension")
	_, err = x.Permute(0)
	wantErr(t, err, "permute")
	_, err = x.Squeeze(9)
	wantErr(t, err, "squeeze")
	_, err = x.Sum(2)
	wantErr(t, err, "sum", "dimension")
	_, err = Softmax(x, 2)
	wantErr(t, err, "softmax", "dimension")
	_, err = OneHot(T(FromInt64([]int64{0, 4}, 2)), 3)
	wantErr(t, err, "one_hot", "class values must be smaller than num_classes")
}

func TestErrorSingularMatrix(t *testing.T) {
	scoped(t)
	T := tensors(t)
	s := T(FromFloat64([]float64{1, 2, 2, 4}, 2, 2))
	_, err := LinalgInv(s)
	wantErr(t, err, "linalg_inv", "singular")
	_, err = LinalgSolve(s, T(Ones([]int64{2, 1}, WithDType(Double))))
	wantErr(t, err, "linalg_solve", "singular")
	_, err = LinalgInv(T(Ones([]int64{2, 3}, WithDType(Double))))
	wantErr(t, err, "linalg_inv", "square")
}

func TestErrorAutograd(t *testing.T) {
	scoped(t)
	T := tensors(t)
	x := T(Ones([]int64{3}, WithRequiresGrad()))
	y := T(x.MulScalar(2))
	wantErr(t, y.Backward(), "backward", "only for scalar outputs")
	plain := T(Ones([]int64{3}))
	wantErr(t, T(plain.Sum()).Backward(), "backward", "does not require grad")

	loss := T(y.Sum())
	_, err := Grad([]*Tensor{loss}, []*Tensor{plain}, GradOpts{RetainGraph: true})
	wantErr(t, err, "grad", "does not require grad")
	unused := T(Ones([]int64{3}, WithRequiresGrad()))
	_, err = Grad([]*Tensor{loss}, []*Tensor{x, unused}, GradOpts{RetainGraph: true})
	wantErr(t, err, "grad", "allow_unused")
	g, err := Grad([]*Tensor{loss}, []*Tensor{x, unused}, GradOpts{AllowUnused: true, RetainGraph: true})
	if err != nil || g[0] == nil || g[1] != nil {
		t.Fatalf("AllowUnused: got %v, %v", g, err)
	}
	_, err = Grad([]*Tensor{loss}, []*Tensor{x}, GradOpts{GradOutputs: []*Tensor{nil, nil}})
	wantErr(t, err, "grad", "one entry per output")
	_, err = Grad(nil, []*Tensor{x}, GradOpts{})
	wantErr(t, err, "grad", "at least one output")
	_, err = Grad([]*Tensor{y}, []*Tensor{x}, GradOpts{RetainGraph: true}) // non-scalar, no grad output
	wantErr(t, err, "grad", "scalar outputs")

	// backward twice through a freed graph
	z := T(T(x.Square()).Sum())
	ok(t, z.Backward())
	wantErr(t, z.Backward(), "backward", "second time")

	// in-place ops on a leaf that requires grad
	wantErr(t, x.AddScalar_(1), "add_scalar_", "leaf variable that requires grad")
	wantErr(t, x.Zero_(), "zero_", "leaf")
	wantErr(t, x.Copy_(plain), "copy_", "leaf")
	wantErr(t, x.Clamp_(0, 1), "clamp_", "leaf")
	// ... allowed under NoGrad, as optimizers do
	ok(t, NoGrad(func() error { return x.AddScalar_(1) }))
	if v := vals(t, x); v[0] != 2 {
		t.Errorf("in-place add under NoGrad: got %v", v)
	}
	// modifying a tensor needed by backward is caught when backward runs
	a := T(Ones([]int64{3}, WithRequiresGrad(), WithDType(Double)))
	b := T(a.MulScalar(1.5))
	c := T(b.Square()) // saves b for the backward pass
	ok(t, b.MulScalar_(2))
	wantErr(t, T(c.Sum()).Backward(), "backward", "modified by an inplace operation")
	// set_requires_grad on a non-leaf
	wantErr(t, b.SetRequiresGrad(false), "set_requires_grad", "leaf variables")
	ok(t, b.SetRequiresGrad(true)) // a no-op, as in PyTorch
	_, err = Ones([]int64{2}, WithRequiresGrad(), WithDType(Long))
	wantErr(t, err, "set_requires_grad", "floating point")
}

func TestErrorUseAfterFree(t *testing.T) {
	scoped(t)
	T := tensors(t)
	a := T(Ones([]int64{2, 2}))
	b := T(Ones([]int64{2, 2}))
	a.Free()
	a.Free() // idempotent
	if !a.Freed() {
		t.Fatal("Freed() = false after Free")
	}
	checks := []struct {
		op  string
		err error
	}{}
	add := func(op string, err error) {
		checks = append(checks, struct {
			op  string
			err error
		}{op, err})
	}
	_, err := a.Add(b)
	add("add", err)
	_, err = b.Add(a)
	add("add", err)
	_, err = a.Float32s()
	add("float32s", err)
	_, err = a.Item()
	add("item", err)
	_, err = a.Reshape(4)
	add("reshape", err)
	_, err = Cat([]*Tensor{b, a}, 0)
	add("cat", err)
	_, err = Conv2d(a, b, nil, Conv2dOpts{})
	add("conv2d", err)
	_, err = a.Clone()
	add("clone", err)
	_, err = a.Alias()
	add("alias", err)
	add("backward", a.Backward())
	add("set_requires_grad", a.SetRequiresGrad(true))
	_, err = Grad([]*Tensor{b}, []*Tensor{a}, GradOpts{})
	add("grad", err)
	add("fill_", a.Fill_(1))
	for _, c := range checks {
		if !errors.Is(c.err, ErrFreed) {
			t.Errorf("%s on a freed tensor: %v, want ErrFreed", c.op, c.err)
		}
		wantErr(t, c.err, c.op, "freed")
	}
	// queries on a freed tensor are harmless
	if a.Dim() != 0 || a.Shape() != nil || a.Numel() != 0 || a.RequiresGrad() || a.IsLeaf() || a.String() != "Tensor(freed)" {
		t.Errorf("queries on a freed tensor: dim %d shape %v numel %d %s", a.Dim(), a.Shape(), a.Numel(), a)
	}
	// errors other than use-after-free do not match ErrFreed
	_, err = b.Mm(T(Ones([]int64{3, 3})))
	if errors.Is(err, ErrFreed) {
		t.Errorf("shape error matches ErrFreed: %v", err)
	}
}

func TestErrorNilTensors(t *testing.T) {
	scoped(t)
	T := tensors(t)
	var n *Tensor
	b := T(Ones([]int64{2, 2}))
	_, err := n.Add(b)
	wantErr(t, err, "add", "nil tensor")
	_, err = b.Mul(nil)
	wantErr(t, err, "mul", "nil tensor")
	_, err = Conv2d(nil, b, nil, Conv2dOpts{})
	wantErr(t, err, "conv2d", "nil tensor")
	_, err = Stack([]*Tensor{b, nil}, 0)
	wantErr(t, err, "stack", "element 1", "nil tensor")
	_, err = Grad([]*Tensor{nil}, []*Tensor{b}, GradOpts{})
	wantErr(t, err, "grad", "nil tensor")
	_, err = n.Float64s()
	wantErr(t, err, "float64s", "nil tensor")
	wantErr(t, n.Backward(), "backward", "nil tensor")
	if errors.Is(err, ErrFreed) {
		t.Error("nil tensor error matches ErrFreed")
	}
	n.Free() // harmless
	if !n.Freed() || n.String() != "Tensor(nil)" || n.Dim() != 0 {
		t.Error("nil tensor queries")
	}
	// a Chain turns the first error into the result and skips the rest without calling C
	var c Chain
	h := c.T(b.Mm(T(Ones([]int64{3, 3}))))
	h = c.T(h.Relu())
	h = c.T(h.Sum())
	if h != nil || c.Err() == nil || !strings.Contains(c.Err().Error(), "mm") {
		t.Errorf("Chain: h %v, err %v", h, c.Err())
	}
}

func TestErrorFromDataLength(t *testing.T) {
	scoped(t)
	_, err := FromFloat32([]float32{1, 2, 3}, 2, 2)
	wantErr(t, err, "from_float32", "needs 4 elements, got 3")
	_, err = FromFloat64([]float64{1, 2}, 3)
	wantErr(t, err, "from_float64", "needs 3 elements, got 2")
	_, err = FromInt64(nil, 1)
	wantErr(t, err, "from_int64", "needs 1 elements, got 0")
	_, err = FromUint8([]uint8{1, 2}, -1, -2)
	wantErr(t, err, "from_uint8", "negative dimension")
	_, err = FromFloat32([]float32{1})
	if err != nil {
		t.Errorf("one value with an empty shape is a 0-d tensor: %v", err)
	}
	_, err = FromFloat32(nil)
	wantErr(t, err, "from_float32", "needs 1 elements, got 0")
	if _, err := FromFloat32(nil, 0, 3); err != nil {
		t.Errorf("empty tensor: %v", err)
	}
}

func TestErrorThreadsAndDevices(t *testing.T) {
	scoped(t)
	T := tensors(t)
	n := NumThreads()
	wantErr(t, SetNumThreads(-1), "set_num_threads", "at least 1")
	wantErr(t, SetNumThreads(0), "set_num_threads", "at least 1")
	if NumThreads() != n {
		t.Errorf("a failed SetNumThreads changed the thread count from %d to %d", n, NumThreads())
	}
	if _, err := ParseDevice("tpu"); err == nil {
		t.Error("ParseDevice(tpu) succeeded")
	}
	if d, err := ParseDevice("cuda:1"); err != nil || d != CUDA(1) || d.String() != "cuda:1" {
		t.Errorf("ParseDevice(cuda:1) = %v, %v", d, err)
	}
	if CUDAIsAvailable() {
		t.Skip("CUDA is available: the error paths of a process without a GPU do not apply")
	}
	x := T(Randn([]int64{2, 3}, nil))
	_, err := x.To(CUDA(0))
	wantErr(t, err, "to", "CUDA is not available")
	_, err = Zeros([]int64{2}, OnDevice(CUDA(0)))
	wantErr(t, err, "full", "CUDA is not available")
	_, err = Randn([]int64{2}, nil, OnDevice(CUDA(1)))
	wantErr(t, err, "randn", "CUDA is not available")
	_, err = Randperm(4, nil, OnDevice(CUDA(0)))
	wantErr(t, err, "randperm", "CUDA")
	wantErr(t, CUDASynchronize(0), "cuda_synchronize", "not available")
	wantErr(t, CUDAEmptyCache(), "cuda_empty_cache", "CUDA is not available")
	_, err = CUDADeviceProperties(0)
	wantErr(t, err, "cuda_device_properties", "CUDA is not available")
	if err := Synchronize(CPU); err != nil {
		t.Errorf("Synchronize(CPU): %v", err)
	}
	if CUDADeviceCount() != 0 {
		t.Errorf("CUDADeviceCount() = %d without CUDA", CUDADeviceCount())
	}
}

// The process survives a long run of failures (no leaked exception state, no abort).
func TestErrorManyFailuresSurvive(t *testing.T) {
	scoped(t)
	T := tensors(t)
	a := T(Randn([]int64{2, 3}, nil))
	for i := 0; i < 2000; i++ {
		if _, err := a.Mm(a); err == nil {
			t.Fatal("no error")
		}
	}
	if got := T(T(a.Mm(T(a.T()))).Sum()); got == nil {
		t.Fatal("a valid call after failures failed")
	}
}

// TestEveryExportIsGuarded scans torch/csrc/*.cc and torch/csrc/kernels/*.cc: every
// function definition returning ldt_error must consist of LDT_TRY { ... } LDT_CATCH and
// nothing else, and every such function declared in shim.h must be defined exactly once.
// The own kernels (csrc/kernels/) export nothing: no ldt_error function, no extern "C", no
// shim.h; the binding layer wraps them.
func TestEveryExportIsGuarded(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("csrc", "*.cc"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no csrc/*.cc files (%v)", err)
	}
	kernels, err := filepath.Glob(filepath.Join("csrc", "kernels", "*.cc"))
	if err != nil || len(kernels) == 0 {
		t.Fatalf("no csrc/kernels/*.cc files (%v)", err)
	}
	kernelHeaders, err := filepath.Glob(filepath.Join("csrc", "kernels", "*.h"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(append([]string(nil), kernels...), kernelHeaders...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src := stripComments(string(b))
		for _, bad := range []string{`extern "C"`, `"shim.h"`, `"internal.h"`, `"../shim.h"`, `"../internal.h"`, "ldt_error", "LDT_TRY"} {
			if strings.Contains(src, bad) {
				t.Errorf("%s: an own kernel's file holds %s: only the binding layer (csrc/*.cc) exports and guards", f, bad)
			}
		}
	}
	files = append(files, kernels...)
	defined := map[string]int{}
	defs, guards := 0, 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d, g, names, problems := scanGuards(string(b))
		defs += d
		guards += g
		for _, n := range names {
			defined[n]++
		}
		for _, p := range problems {
			t.Errorf("%s: %s", f, p)
		}
	}
	h, err := os.ReadFile(filepath.Join("csrc", "shim.h"))
	if err != nil {
		t.Fatal(err)
	}
	declRE := regexp.MustCompile(`LDT_API\s+ldt_error\s+(ldt_\w+)\s*\(`)
	var declared []string
	for _, m := range declRE.FindAllStringSubmatch(stripComments(string(h)), -1) {
		declared = append(declared, m[1])
	}
	sort.Strings(declared)
	for _, name := range declared {
		if defined[name] != 1 {
			t.Errorf("%s is declared in shim.h and defined %d times", name, defined[name])
		}
	}
	if len(defined) != len(declared) {
		t.Errorf("%d ldt_error functions defined, %d declared in shim.h", len(defined), len(declared))
	}
	if defs != guards || defs == 0 {
		t.Errorf("%d definitions returning ldt_error, %d guarded", defs, guards)
	}
	t.Logf("%d ldt_error definitions in %d files, %d guarded; %d declared in shim.h", defs, len(files), guards, len(declared))
}

// The scanner itself must see unguarded and partly guarded bodies.
func TestGuardScannerDetectsUnguarded(t *testing.T) {
	src := `
// ldt_error ldt_commented(int x) { return nullptr; }
ldt_error ldt_declared(int x);
ldt_error ldt_good(ldt_tensor *out, const char *s /* ) { */) {
  LDT_TRY { if (s[0] == '}') throw std::invalid_argument("}"); }
  LDT_CATCH
}
ldt_error ldt_bare(int x) { return nullptr; }
ldt_error ldt_after(int x) {
  LDT_TRY { x++; }
  LDT_CATCH
  x++;
}
ldt_error ldt_before(int x) {
  x++;
  LDT_TRY { x++; }
  LDT_CATCH
}
`
	defs, guards, names, problems := scanGuards(src)
	if defs != 4 || guards != 1 || len(problems) != 3 {
		t.Fatalf("defs %d guards %d names %v problems %q", defs, guards, names, problems)
	}
}

// scanGuards finds the definitions of functions returning ldt_error in C++ source and
// counts those whose whole body is LDT_TRY { ... } LDT_CATCH.
func scanGuards(text string) (defs, guards int, names, problems []string) {
	defRE := regexp.MustCompile(`(?m)^ldt_error\s+(ldt_\w+)\s*\(`)
	src := stripComments(text)
	for _, m := range defRE.FindAllStringSubmatchIndex(src, -1) {
		name := src[m[2]:m[3]]
		i := matchParen(src, m[1]-1)
		if i < 0 {
			problems = append(problems, name+": unbalanced parameter list")
			continue
		}
		rest := strings.TrimLeft(src[i+1:], " \t\r\n")
		if strings.HasPrefix(rest, ";") {
			continue // a declaration
		}
		defs++
		names = append(names, name)
		if !strings.HasPrefix(rest, "{") {
			problems = append(problems, name+": cannot find the body")
			continue
		}
		start := len(src) - len(rest)
		end := matchBrace(src, start)
		if end < 0 {
			problems = append(problems, name+": unbalanced body")
			continue
		}
		body := strings.TrimSpace(src[start+1 : end])
		inner, found := strings.CutPrefix(body, "LDT_TRY")
		inner = strings.TrimSpace(inner)
		if !found || !strings.HasPrefix(inner, "{") {
			problems = append(problems, name+": body does not start with LDT_TRY {")
			continue
		}
		e := matchBrace(inner, 0)
		if e < 0 || strings.TrimSpace(inner[e+1:]) != "LDT_CATCH" {
			problems = append(problems, name+": LDT_TRY block is not followed by LDT_CATCH and the end of the body")
			continue
		}
		guards++
	}
	return defs, guards, names, problems
}

// stripComments removes // and /* */ comments and blanks string and char literals'
// contents, so braces inside them do not count.
func stripComments(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case strings.HasPrefix(s[i:], "//"):
			for i < len(s) && s[i] != '\n' {
				i++
			}
			b.WriteByte('\n')
		case strings.HasPrefix(s[i:], "/*"):
			j := strings.Index(s[i+2:], "*/")
			if j < 0 {
				return b.String()
			}
			b.WriteString(strings.Repeat("\n", strings.Count(s[i:i+2+j+2], "\n")))
			i += 2 + j + 1
		case s[i] == '"' || s[i] == '\'':
			q := s[i]
			b.WriteByte(q)
			for i++; i < len(s) && s[i] != q; i++ {
				if s[i] == '\\' {
					i++
				}
			}
			b.WriteByte(q)
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

func matchDelim(s string, open int, o, c byte) int {
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case o:
			depth++
		case c:
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

func matchParen(s string, open int) int { return matchDelim(s, open, '(', ')') }
func matchBrace(s string, open int) int { return matchDelim(s, open, '{', '}') }
