package torch

// script_test.go: TorchScript modules (testdata/torchscript, written by
// scripts/export_torchscript.py --fixtures): refused files, named parameters and buffers with
// their owners' types, the functional call (replacements, a graph through them, second
// order, restoring the module's own tensors after failures), the own-kernel rewrite, the
// training flag and moves.

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var scriptDir = filepath.Join("..", "testdata", "torchscript")

func loadScript(t *testing.T, file string) *ScriptModule {
	t.Helper()
	m, err := LoadScriptModule(filepath.Join(scriptDir, file))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

// tensorDiff is the largest absolute difference of two tensors' values.
func tensorDiff(t *testing.T, a, b *Tensor) float64 {
	t.Helper()
	x, y := vals(t, a), vals(t, b)
	if len(x) != len(y) {
		t.Fatalf("%d values against %d", len(x), len(y))
	}
	return maxAbsDiff(x, y)
}

// Files that are not TorchScript, cut short, damaged, missing or a folder are errors naming
// the file; none crashes.
func TestScriptModuleLoadErrors(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile(filepath.Join(scriptDir, "lenet.pt"))
	ok(t, err)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		ok(t, os.WriteFile(p, b, 0o644))
		return p
	}
	flipped := slices.Clone(good)
	flipped[len(flipped)/3] ^= 0x10
	cases := map[string]string{
		filepath.Join(dir, "missing.pt"):               "no such file",
		dir:                                            "folder",
		write("empty.pt", nil):                         "empty file",
		write("text.pt", []byte("hello\n")):            "not a TorchScript file",
		filepath.Join(scriptDir, "notscript.pt"):       "not a TorchScript file",
		filepath.Join(scriptDir, "fixture_modules.py"): "not a TorchScript file",
		write("flipped.pt", flipped):                   "damaged",
	}
	for _, cut := range []int{10, 100, len(good) / 2, len(good) - 30, len(good) - 1} {
		cases[write("cut"+strings.Repeat("x", cut%7)+string(rune('a'+cut%26))+".pt", good[:cut])] = "truncated"
	}
	for path, want := range cases {
		m, err := LoadScriptModule(path)
		if err == nil {
			m.Close()
			t.Errorf("%s: loaded", path)
			continue
		}
		if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v (want the file and %q)", path, err, want)
		}
	}
	// a good file still loads after the failures
	loadScript(t, "lenet.pt")
}

// Parameters and buffers come in named_parameters / named_buffers order with state_dict
// names and their owners' Python type names; submodule types and methods are reported.
func TestScriptModuleNamed(t *testing.T) {
	scoped(t)
	m := loadScript(t, "lenet.pt")
	ps := need[[]ScriptTensor](t)(m.Parameters())
	var got []string
	for _, p := range ps {
		got = append(got, p.Name+" "+p.Owner)
	}
	want := []string{
		"conv1.weight torch.nn.modules.conv.Conv2d", "conv1.bias torch.nn.modules.conv.Conv2d",
		"conv2.weight torch.nn.modules.conv.Conv2d", "conv2.bias torch.nn.modules.conv.Conv2d",
		"fc1.weight torch.nn.modules.linear.Linear", "fc1.bias torch.nn.modules.linear.Linear",
		"fc2.weight torch.nn.modules.linear.Linear", "fc2.bias torch.nn.modules.linear.Linear",
		"head.weight torch.nn.modules.linear.Linear", "head.bias torch.nn.modules.linear.Linear",
	}
	if !slices.Equal(got, want) || !shapeEq(ps[2].Tensor.Shape(), []int64{16, 6, 5, 5}) || ps[0].Tensor.DType() != Float {
		t.Errorf("parameters %q (conv2 %v)", got, ps[2].Tensor.Shape())
	}
	if bs := need[[]ScriptTensor](t)(m.Buffers()); len(bs) != 0 {
		t.Errorf("LeNet's buffers: %v", bs)
	}
	for path, want := range map[string]string{"": "LeNet", "head": "torch.nn.modules.linear.Linear", "conv2": "torch.nn.modules.conv.Conv2d"} {
		if got, err := m.ModuleType(path); err != nil || !strings.HasSuffix(got, want) {
			t.Errorf("ModuleType(%q) = %q, %v; want …%s", path, got, err, want)
		}
	}
	if _, err := m.ModuleType("conv2.nothing"); err == nil || !strings.Contains(err.Error(), "lenet.pt") {
		t.Errorf("ModuleType of no submodule: %v", err)
	}
	for name, want := range map[string]bool{"forward": true, "features": true, "backward": false} {
		if got := need[bool](t)(m.HasMethod(name)); got != want {
			t.Errorf("HasMethod(%s) = %v", name, got)
		}
	}
	bn := loadScript(t, "bn.pt")
	bs := need[[]ScriptTensor](t)(bn.Buffers())
	got = got[:0]
	for _, b := range bs {
		got = append(got, b.Name+" "+b.Owner+" "+b.Tensor.DType().String())
	}
	if want := []string{
		"bn.running_mean torch.nn.modules.batchnorm.BatchNorm2d float32",
		"bn.running_var torch.nn.modules.batchnorm.BatchNorm2d float32",
		"bn.num_batches_tracked torch.nn.modules.batchnorm.BatchNorm2d int64",
	}; !slices.Equal(got, want) {
		t.Errorf("buffers %q", got)
	}
	if got := DemangleScriptType("__torch__.torch.nn.modules.conv.___torch_mangle_12.Conv2d"); got != "torch.nn.modules.conv.Conv2d" {
		t.Errorf("DemangleScriptType: %q", got)
	}
}

// mlp is wrapped.pt's network written with torch ops: flatten, Linear(16, 8), ReLU (the
// features), then the head Linear(8, 3).
func mlp(t *testing.T, p []*Tensor, x *Tensor, head bool) *Tensor {
	T := tensors(t)
	f := T(T(Linear(T(x.Flatten(1, -1)), p[0], p[1])).Relu())
	if !head {
		return f
	}
	return T(Linear(f, p[2], p[3]))
}

// The functional call: the module computes with the given tensors (float64, and θ′ = θ −
// α∇θ with its graph, through first and second derivatives) exactly what the same network
// written with torch ops does, and its own tensors are back afterwards, after failures too.
func TestScriptModuleCall(t *testing.T) {
	scoped(t)
	T := tensors(t)
	m := loadScript(t, "wrapped.pt")
	names := []string{"body.net.1.weight", "body.net.1.bias", "head.weight", "head.bias"}
	rng := newRNG(3)
	x := randnT(t, rng, 5, 1, 4, 4)
	theta := []*Tensor{randnT(t, rng, 8, 16), randnT(t, rng, 8), randnT(t, rng, 3, 8), randnT(t, rng, 3)}
	for _, p := range theta {
		ok(t, p.SetRequiresGrad(true))
	}
	own32 := T(m.Run("forward", T(x.ToDType(Float))))
	for _, c := range []struct {
		method string
		n      int
		head   bool
	}{{"forward", 4, true}, {"features", 2, false}} {
		got := T(m.Call(c.method, names[:c.n], theta[:c.n], x))
		if d := tensorDiff(t, got, mlp(t, theta, x, c.head)); d != 0 {
			t.Errorf("%s with float64 parameters: %.3g from the same network in torch ops", c.method, d)
		}
	}
	// θ′ = θ − α∇θ L carries a graph: the second-order gradient through the module is the
	// one through the torch-ops network
	z := randnT(t, rng, 5, 3)
	ok(t, z.SetRequiresGrad(true))
	labelGrad := func(f func(p []*Tensor) *Tensor) *Tensor {
		li := T(SoftCrossEntropy(f(theta), T(Softmax(z, 1))))
		g := need[[]*Tensor](t)(Grad([]*Tensor{li}, theta, GradOpts{CreateGraph: true, RetainGraph: true}))
		moved := make([]*Tensor, len(theta))
		for i := range theta {
			moved[i] = T(theta[i].Sub(T(g[i].MulScalar(0.5))))
		}
		lo := T(T(f(moved).Square()).Sum())
		return need[[]*Tensor](t)(Grad([]*Tensor{lo}, []*Tensor{z}, GradOpts{}))[0]
	}
	viaModule := labelGrad(func(p []*Tensor) *Tensor { return T(m.Call("forward", names, p, x)) })
	viaOps := labelGrad(func(p []*Tensor) *Tensor { return mlp(t, p, x, true) })
	if d := tensorDiff(t, viaModule, viaOps); d > 1e-14 {
		t.Errorf("second-order gradient through the module: %.3g from the torch-ops network's", d)
	}
	// failures leave the module's own tensors in place
	wrong := []*Tensor{theta[0], theta[1], randnT(t, rng, 3, 7), theta[3]}
	for _, c := range []struct {
		names []string
		vals  []*Tensor
		want  string
	}{
		{names, wrong, "wrapped.pt: forward: "},
		{[]string{"body.net.1.weight", "nothing.weight"}, theta[:2], "no parameter or buffer \"nothing.weight\""},
		{[]string{"body.net.7.weight"}, theta[:1], "no parameter or buffer \"body.net.7.weight\" (no submodule \"body.net.7\")"},
		{names[:2], theta[:1], "2 names for 1 tensors"},
		{[]string{""}, theta[:1], "empty"},
		{names[:1], []*Tensor{nil}, "nil tensor"},
	} {
		if _, err := m.Call("forward", c.names, c.vals, x); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Call(%v): %v; want %q", c.names, err, c.want)
		}
	}
	if _, err := m.Call("backward", nil, nil, x); err == nil || !strings.Contains(err.Error(), "no method backward") {
		t.Errorf("an unknown method: %v", err)
	}
	if d := tensorDiff(t, T(m.Run("forward", T(x.ToDType(Float)))), own32); d != 0 {
		t.Errorf("after the calls the module computes %.3g away from its own weights' output", d)
	}
	tup := loadScript(t, "tupleout.pt")
	if _, err := tup.Run("features", T(x.ToDType(Float))); err == nil || !strings.Contains(err.Error(), "tupleout.pt: features: method features returned Tuple, not one tensor") {
		t.Errorf("a method returning a tuple: %v", err)
	}
	m.Close()
	m.Close()
	if _, err := m.Run("forward", x); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("a closed module: %v", err)
	}
}

// UseOwnKernels moves a method's convolutions and max-pools onto the shim's kernels (fused
// where a pool takes a convolution's output or its ReLU alone): the same values and first-
// and second-order gradients as libtorch's ops to float64 rounding, in fewer operators.
func TestScriptModuleOwnKernels(t *testing.T) {
	scoped(t)
	T := tensors(t)
	for _, c := range []struct {
		file     string
		replaced int
		shape    []int64
	}{{"convpools.pt", 3, []int64{3, 1, 8, 8}}, {"lenet.pt", 2, []int64{3, 1, 28, 28}}, {"bn.pt", 1, []int64{3, 1, 8, 8}}} {
		plain, own := loadScript(t, c.file), loadScript(t, c.file)
		if n := need[int](t)(own.UseOwnKernels("forward")); n != c.replaced {
			t.Errorf("%s: %d operators replaced, want %d", c.file, n, c.replaced)
		}
		ok(t, plain.To(Double, CPU))
		ok(t, own.To(Double, CPU))
		ps := need[[]ScriptTensor](t)(plain.Parameters())
		var names []string
		var theta []*Tensor
		for _, p := range ps {
			names = append(names, p.Name)
			q := T(p.Tensor.Detach())
			ok(t, q.SetRequiresGrad(true))
			theta = append(theta, q)
		}
		x := randnT(t, newRNG(8), c.shape...)
		grads := func(m *ScriptModule) []*Tensor {
			y := T(m.Call("forward", names, theta, x))
			l := T(T(y.Square()).Sum())
			g := need[[]*Tensor](t)(Grad([]*Tensor{l}, theta, GradOpts{CreateGraph: true, RetainGraph: true}))
			l2 := T(T(g[0].Square()).Sum())
			g2 := need[[]*Tensor](t)(Grad([]*Tensor{l2}, theta[:1], GradOpts{}))
			return append([]*Tensor{y}, append(g, g2...)...)
		}
		a, b := grads(plain), grads(own)
		for i := range a {
			scale := math.Max(1, slices.Max(vals(t, T(a[i].Abs()))))
			if d := tensorDiff(t, a[i], b[i]); d > 1e-12*scale {
				t.Errorf("%s: result %d (output, gradients, second order) %.3g apart", c.file, i, d)
			}
		}
	}
}

// Train sets the training flag of every submodule (BatchNorm updates its running mean only
// then); To converts the module's own floating-point tensors and leaves the integer ones.
func TestScriptModuleTrainTo(t *testing.T) {
	scoped(t)
	T := tensors(t)
	m := loadScript(t, "bn.pt")
	mean := func() []float64 { return vals(t, need[[]ScriptTensor](t)(m.Buffers())[0].Tensor) }
	x := T(randnT(t, newRNG(4), 4, 1, 8, 8).ToDType(Float))
	start := mean()
	ok(t, NoGrad(func() error { _, err := m.Run("forward", x); return err }))
	if !slices.Equal(mean(), start) {
		t.Error("an evaluation-mode run moved the running mean")
	}
	ok(t, m.Train(true))
	ok(t, NoGrad(func() error { _, err := m.Run("forward", x); return err }))
	if slices.Equal(mean(), start) {
		t.Error("a training-mode run left the running mean")
	}
	ok(t, m.Train(false))
	ok(t, m.To(Double, CPU))
	ps := need[[]ScriptTensor](t)(m.Parameters())
	bs := need[[]ScriptTensor](t)(m.Buffers())
	if ps[0].Tensor.DType() != Double || bs[0].Tensor.DType() != Double || bs[2].Tensor.DType() != Long {
		t.Errorf("after To(Double): %v, %v, %v", ps[0].Tensor.DType(), bs[0].Tensor.DType(), bs[2].Tensor.DType())
	}
	if y := T(m.Run("forward", T(x.ToDType(Double)))); y.DType() != Double {
		t.Errorf("float64 run: %v", y)
	}
	if err := m.To(Long, CPU); err == nil {
		t.Error("To(Long): no error")
	}
}
