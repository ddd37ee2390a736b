package nets

// torchscript_test.go: networks from TorchScript files (testdata/torchscript, written by
// scripts/export_torchscript.py --fixtures): the LeNet export against nets' LeNet in
// float64 (forward, features, first- and second-order gradients), against PyTorch's own
// outputs, BatchNorm's training and evaluation behaviour and running statistics, an
// operator without a double backward, every contract check at load, initialisation and
// batched evaluation.

import (
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/fileio/npz"
)

var tsDir = filepath.Join("..", "testdata", "torchscript")

// tsNet builds the network of a fixture, closed when the test ends.
func tsNet(t testing.TB, file string, c, h, w, classes int64) *Net {
	t.Helper()
	n, err := New(TorchScriptPrefix+filepath.Join(tsDir, file), c, h, w, classes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	return n
}

// ownParams are the module's own parameters of a fixture (the file's weights) in dtype.
func ownParams(t *testing.T, file string, dtype torch.DType) []*torch.Tensor {
	t.Helper()
	m := need[*torch.ScriptModule](t)(torch.LoadScriptModule(filepath.Join(tsDir, file)))
	defer m.Close()
	ps := need[[]torch.ScriptTensor](t)(m.Parameters())
	out := make([]*torch.Tensor, len(ps))
	for i, p := range ps {
		out[i] = need[*torch.Tensor](t)(p.Tensor.ToDType(dtype))
		ok(t, out[i].SetRequiresGrad(true))
	}
	return out
}

func fixture(t *testing.T, file string) *npz.Archive {
	t.Helper()
	arc, err := npz.ReadFile(filepath.Join(tsDir, file))
	if err != nil {
		t.Fatal(err)
	}
	return arc
}

// metaStep is LD's meta-step through n in float64: the soft cross-entropy of the base
// batch xb against softmax(z) at θ, θ′ = θ − α∇θ (with its graph), the cross-entropy of
// the target batch at θ′, and its gradient with respect to z (second order). It returns
// the inner gradient, the target loss and the label gradient.
func metaStep(t *testing.T, n *Net, theta []*torch.Tensor, xb, z, xt, yt *torch.Tensor) (inner []*torch.Tensor, outer, dz *torch.Tensor) {
	t.Helper()
	T := need[*torch.Tensor](t)
	yb := T(torch.Softmax(z, 1))
	li := T(torch.SoftCrossEntropy(T(n.Forward(theta, nil, xb, true)), yb))
	g := need[[]*torch.Tensor](t)(torch.Grad([]*torch.Tensor{li}, theta, torch.GradOpts{CreateGraph: true, RetainGraph: true}))
	moved := make([]*torch.Tensor, len(theta))
	for i := range theta {
		moved[i] = T(theta[i].Sub(T(g[i].MulScalar(0.1))))
	}
	outer = T(torch.CrossEntropy(T(n.Forward(moved, nil, xt, true)), yt))
	dz = need[[]*torch.Tensor](t)(torch.Grad([]*torch.Tensor{outer}, []*torch.Tensor{z}, torch.GradOpts{}))[0]
	return g, outer, dz
}

// TestTorchScriptLeNetMatchesNets: the exported LeNet, run with nets' LeNet's float64
// parameters, gives nets' LeNet's logits, features, inner gradients and second-order label
// gradient to 1e-10 of their largest value (the two differ only in the order of the sums of
// the shim's own convolution and pooling kernels against ATen's), and a central difference
// confirms the TorchScript path's label gradient to 1e-6; the two networks describe the
// same parameters, and the same seed initialises them alike.
func TestTorchScriptLeNetMatchesNets(t *testing.T) {
	scoped(t)
	T := need[*torch.Tensor](t)
	ln := need[*Net](t)(New("lenet", 1, 28, 28, 10))
	ts := tsNet(t, "lenet.pt", 1, 28, 28, 10)
	a, b := ln.Params(), ts.Params()
	if len(a) != len(b) || ts.FeatureDim != 84 || len(ts.Buffers) != 0 {
		t.Fatalf("%d and %d parameters, feature dim %d, %d buffers", len(a), len(b), ts.FeatureDim, len(ts.Buffers))
	}
	for i := range a {
		want := strings.Replace(a[i].Name, "fc.", "head.", 1)
		if b[i].Name != want || !slices.Equal(a[i].Shape, b[i].Shape) || a[i].Init != b[i].Init || a[i].FanIn != b[i].FanIn {
			t.Errorf("parameter %d: %+v, nets' LeNet %+v", i, b[i], a[i])
		}
	}
	gen := func() *torch.Generator {
		g := need[*torch.Generator](t)(torch.NewGenerator(7))
		t.Cleanup(g.Close)
		return g
	}
	theta := need[[]*torch.Tensor](t)(InitParams(a, gen(), torch.CPU, torch.Double))
	t.Cleanup(func() { torch.FreeAll(theta) })
	same := need[[]*torch.Tensor](t)(InitParams(b, gen(), torch.CPU, torch.Double))
	t.Cleanup(func() { torch.FreeAll(same) })
	for i := range theta {
		if d := maxRelDiff(t, same[i], theta[i]); d != 0 {
			t.Errorf("%s: initialised %g apart from nets' LeNet with the same seed", b[i].Name, d)
		}
	}

	rng := newRNG(11)
	xb, xt := randn64(t, rng, 6, 1, 28, 28), randn64(t, rng, 8, 1, 28, 28)
	z := randn64(t, rng, 6, 10)
	ok(t, z.SetRequiresGrad(true))
	yt := T(torch.FromInt64([]int64{3, 1, 4, 1, 5, 9, 2, 6}, 8))
	const tol = 1e-10
	for _, c := range []struct {
		what string
		f    func(n *Net) (*torch.Tensor, error)
	}{
		{"logits", func(n *Net) (*torch.Tensor, error) { return n.Forward(theta, nil, xt, false) }},
		{"features", func(n *Net) (*torch.Tensor, error) { return n.Features(theta, nil, xt, false) }},
	} {
		d := maxRelDiff(t, T(c.f(ts)), T(c.f(ln)))
		if !(d <= tol) {
			t.Errorf("%s: %.3g apart", c.what, d)
		}
		t.Logf("%s within %.2g of nets' LeNet's", c.what, d)
	}
	gi, lo, dz := metaStep(t, ts, theta, xb, z, xt, yt)
	wi, wo, wz := metaStep(t, ln, theta, xb, z, xt, yt)
	worst := 0.0
	for i := range gi {
		d := maxRelDiff(t, gi[i], wi[i])
		if !(d <= tol) {
			t.Errorf("inner gradient of %s: %.3g apart", b[i].Name, d)
		}
		worst = math.Max(worst, d)
	}
	t.Logf("inner gradients within %.2g", worst)
	if d := maxRelDiff(t, lo, wo); !(d <= tol) {
		t.Errorf("target loss: %.3g apart", d)
	}
	if d := maxRelDiff(t, dz, wz); !(d <= tol) {
		t.Errorf("second-order label gradient: %.3g apart", d)
	}
	t.Logf("label gradient within %.2g of nets' LeNet's", maxRelDiff(t, dz, wz))

	// central difference of the target loss along a direction v of the labels' logits
	v := randn64(t, rng, 6, 10)
	const eps = 1e-5
	at := func(s float64) float64 {
		zs := T(T(z.Add(T(v.MulScalar(s)))).Detach())
		ok(t, zs.SetRequiresGrad(true))
		_, l, _ := metaStep(t, ts, theta, xb, zs, xt, yt)
		return need[float64](t)(l.Item())
	}
	fd := (at(eps) - at(-eps)) / (2 * eps)
	an := need[float64](t)(T(T(dz.Mul(v)).Sum()).Item())
	if math.Abs(fd-an) > 1e-6*math.Max(1, math.Abs(an)) {
		t.Errorf("label gradient along v: %.10g, central difference %.10g", an, fd)
	}
	t.Logf("label gradient along v %.12g, central difference %.12g", an, fd)
}

// TestTorchScriptLeNetMatchesPyTorch: with the file's own weights, nets' LeNet, the
// TorchScript network (float64) and PyTorch (eager, float64; lenet_expected.npz) give the
// same logits and features to 1e-12.
func TestTorchScriptLeNetMatchesPyTorch(t *testing.T) {
	scoped(t)
	T := need[*torch.Tensor](t)
	arc := fixture(t, "lenet_expected.npz")
	x := goldenTensor(t, arc, "x")
	own := ownParams(t, "lenet.pt", torch.Double)
	ts := tsNet(t, "lenet.pt", 1, 28, 28, 10)
	ln := need[*Net](t)(New("lenet", 1, 28, 28, 10))
	for _, n := range []*Net{ts, ln} {
		if d := maxRelDiff(t, T(n.Forward(own, nil, x, false)), goldenTensor(t, arc, "logits")); !(d <= 1e-12) {
			t.Errorf("%s: logits %.3g from PyTorch's", n.Arch, d)
		}
		if d := maxRelDiff(t, T(n.Features(own, nil, x, false)), goldenTensor(t, arc, "features")); !(d <= 1e-12) {
			t.Errorf("%s: features %.3g from PyTorch's", n.Arch, d)
		}
	}
}

// TestTorchScriptBatchNorm: a scripted conv–BatchNorm network in training mode normalises
// with the batch's statistics and updates the running statistics it is given (running
// mean and variance with momentum 0.1, the batch count), and in evaluation mode uses them,
// as PyTorch does (bn_expected.npz: from fresh statistics 0, 1, 0); the module's own
// buffers are not touched by calls with the caller's.
func TestTorchScriptBatchNorm(t *testing.T) {
	scoped(t)
	T := need[*torch.Tensor](t)
	arc := fixture(t, "bn_expected.npz")
	n := tsNet(t, "bn.pt", 1, 8, 8, 3)
	var names []string
	for _, b := range n.Buffers {
		names = append(names, b.Name)
	}
	if !slices.Equal(names, []string{"bn.running_mean", "bn.running_var", "bn.num_batches_tracked"}) || !n.BatchCoupled() {
		t.Fatalf("buffers %v, coupled %v", names, n.BatchCoupled())
	}
	p := ownParams(t, "bn.pt", torch.Double)
	buf := need[[]*torch.Tensor](t)(NewBuffers(n.Buffers, torch.CPU, torch.Double))
	t.Cleanup(func() { torch.FreeAll(buf) })
	x := goldenTensor(t, arc, "x")
	y := T(n.Forward(p, buf, x, true))
	if d := maxRelDiff(t, y, goldenTensor(t, arc, "train_logits")); !(d <= 1e-12) {
		t.Errorf("training-mode logits %.3g from PyTorch's", d)
	}
	for i, name := range names {
		if d := maxRelDiff(t, buf[i], goldenTensor(t, arc, "after."+name)); !(d <= 1e-12) {
			t.Errorf("%s after one training pass: %.3g from PyTorch's", name, d)
		}
	}
	if d := maxRelDiff(t, T(n.Forward(p, buf, x, false)), goldenTensor(t, arc, "eval_logits_after")); !(d <= 1e-12) {
		t.Errorf("evaluation-mode logits %.3g from PyTorch's", d)
	}
	// evaluation leaves the statistics; features and forward agree through the head
	before := values(t, buf[0])
	f := T(n.Features(p, buf, x, false))
	if !slices.Equal(values(t, buf[0]), before) {
		t.Error("an evaluation-mode call changed the running mean")
	}
	if d := maxRelDiff(t, T(torch.Linear(f, p[4], p[5])), T(n.Forward(p, buf, x, false))); !(d <= 1e-14) {
		t.Errorf("head(features) %.3g from forward", d)
	}
	// the module's own buffers stayed as the file has them (mean 0, variance 1)
	m := need[*torch.ScriptModule](t)(torch.LoadScriptModule(filepath.Join(tsDir, "bn.pt")))
	defer m.Close()
	own := need[[]torch.ScriptTensor](t)(m.Buffers())
	if v := values(t, own[1].Tensor); v[0] != 1 {
		t.Errorf("the file's running variance is %v", v)
	}
	// a training pass with a gradient reaches the parameters through the batch statistics
	loss := T(T(n.Forward(p, buf, x, true)).Sum())
	g := need[[]*torch.Tensor](t)(torch.Grad([]*torch.Tensor{loss}, p, torch.GradOpts{}))
	if s := values(t, T(T(g[0].Abs()).Sum())); !(s[0] > 0) {
		t.Errorf("conv weight gradient %v", s)
	}
}

// TestTorchScriptNoDoubleBackward: grid sampling has a first derivative but no second in
// libtorch: a meta-step's first-order gradient works through such a module, its
// second-order label gradient fails with an error that says so, and nothing crashes.
func TestTorchScriptNoDoubleBackward(t *testing.T) {
	scoped(t)
	T := need[*torch.Tensor](t)
	n := tsNet(t, "nodouble.pt", 1, 6, 6, 3)
	g := need[*torch.Generator](t)(torch.NewGenerator(3))
	defer g.Close()
	theta := need[[]*torch.Tensor](t)(InitParams(n.Params(), g, torch.CPU, torch.Double))
	defer torch.FreeAll(theta)
	rng := newRNG(5)
	x := randn64(t, rng, 4, 1, 6, 6)
	z := randn64(t, rng, 4, 3)
	ok(t, z.SetRequiresGrad(true))
	li := T(torch.SoftCrossEntropy(T(n.Forward(theta, nil, x, true)), T(torch.Softmax(z, 1))))
	first := need[[]*torch.Tensor](t)(torch.Grad([]*torch.Tensor{li}, theta, torch.GradOpts{CreateGraph: true, RetainGraph: true}))
	if s := values(t, T(T(first[0].Abs()).Sum())); !(s[0] > 0) {
		t.Fatalf("first-order gradient of the convolution's weight: %v", s)
	}
	second := T(T(first[0].Mul(first[0])).Sum())
	_, err := torch.Grad([]*torch.Tensor{second}, []*torch.Tensor{z}, torch.GradOpts{})
	if err == nil || !strings.Contains(err.Error(), "grid_sampler_2d_backward") || !strings.Contains(err.Error(), "not implemented") {
		t.Fatalf("second order through grid_sample: %v", err)
	}
	t.Log(err)
}

// TestTorchScriptContract: every check at load is an error naming the file and what is
// wrong; none crashes, and a network that loaded keeps working after the failures.
func TestTorchScriptContract(t *testing.T) {
	scoped(t)
	dir := t.TempDir()
	lenet, err := os.ReadFile(filepath.Join(tsDir, "lenet.pt"))
	ok(t, err)
	truncated := filepath.Join(dir, "truncated.pt")
	ok(t, os.WriteFile(truncated, lenet[:len(lenet)/2], 0o644))
	text := filepath.Join(dir, "model.txt")
	ok(t, os.WriteFile(text, []byte("not a model\n"), 0o644))
	fix := func(f string) string { return filepath.Join(tsDir, f) }
	for _, c := range []struct {
		file             string
		c, h, w, classes int64
		want             []string
	}{
		{fix("missing.pt"), 1, 28, 28, 10, []string{"no such file"}},
		{text, 1, 28, 28, 10, []string{"not a TorchScript file"}},
		{truncated, 1, 28, 28, 10, []string{"truncated"}},
		{fix("notscript.pt"), 1, 8, 8, 3, []string{"not a TorchScript file"}},
		{fix("nofeatures.pt"), 1, 4, 4, 3, []string{"no method features", "the contract"}},
		{fix("convhead.pt"), 1, 4, 4, 3, []string{"head is a torch.nn.modules.conv.Conv2d, not a torch.nn.modules.linear.Linear"}},
		{fix("unknownlayer.pt"), 1, 4, 4, 3, []string{"parameter scale.gain belongs to fixture_modules.Scale", "does not know"}},
		{fix("intparam.pt"), 1, 4, 4, 3, []string{"parameter steps is int64, not floating point"}},
		{fix("tupleout.pt"), 1, 4, 4, 3, []string{"features returned Tuple, not one tensor"}},
		{fix("cudaonly.pt"), 1, 4, 4, 3, []string{"only on CUDA"}},
		{fix("fixedbatch.pt"), 1, 4, 4, 3, []string{"a batch of 5 fails where one of 2 works", "fixed batch size"}},
		{fix("lenet.pt"), 1, 28, 28, 5, []string{"head has 10 outputs, the data has 5 classes"}},
		{fix("lenet.pt"), 3, 28, 28, 10, []string{"probe batch of the data's shape (2, 3, 28, 28) fails"}},
		{fix("lenet.pt"), 1, 32, 32, 10, []string{"probe batch of the data's shape (2, 1, 32, 32) fails"}},
		{"", 1, 28, 28, 10, []string{"names no file"}},
	} {
		n, err := New(TorchScriptPrefix+c.file, c.c, c.h, c.w, c.classes)
		if err == nil {
			n.Close()
			t.Errorf("%s for (%d, %d, %d), %d classes: loaded", c.file, c.c, c.h, c.w, c.classes)
			continue
		}
		msg := err.Error()
		for _, w := range append(c.want, c.file) {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: error %q lacks %q", c.file, msg, w)
			}
		}
	}
	n := tsNet(t, "wrapped.pt", 1, 4, 4, 3)
	var names []string
	for _, p := range n.Params() {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{"body.net.1.weight", "body.net.1.bias", "head.weight", "head.bias"}) || n.FeatureDim != 8 {
		t.Fatalf("the wrapped module's parameters %v, feature dim %d", names, n.FeatureDim)
	}
	tn, _ := n.TorchNames()
	if !slices.Equal(tn, names) {
		t.Errorf("TorchNames %v", tn)
	}
	arc := fixture(t, "wrapped_expected.npz")
	own := ownParams(t, "wrapped.pt", torch.Double)
	if d := maxRelDiff(t, need[*torch.Tensor](t)(n.Forward(own, nil, goldenTensor(t, arc, "x"), false)), goldenTensor(t, arc, "logits")); !(d <= 1e-12) {
		t.Errorf("wrapped module's logits %.3g from PyTorch's", d)
	}
	// wrong inputs of a loaded network are errors too
	if _, err := n.Forward(own[:3], nil, goldenTensor(t, arc, "x"), false); err == nil {
		t.Error("three parameters for four: no error")
	}
	if _, err := n.Forward(own, nil, need[*torch.Tensor](t)(torch.Zeros([]int64{2, 1, 5, 5}, torch.WithDType(torch.Double))), false); err == nil {
		t.Error("a 5×5 batch for 4×4 inputs: no error")
	}
	n.Close()
	if _, err := n.Forward(own, nil, goldenTensor(t, arc, "x"), false); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("after Close: %v", err)
	}
}

// TestTorchScriptInitAndBatched: fresh parameters of a TorchScript network follow PyTorch's
// per-layer defaults (BatchNorm weight 1 and bias 0, convolution and linear weights within
// ±1/√fan_in); Batched runs its M models one by one in either mode, each as its own
// Forward; Reinit redraws in place.
func TestTorchScriptInitAndBatched(t *testing.T) {
	scoped(t)
	T := need[*torch.Tensor](t)
	n := tsNet(t, "bn.pt", 1, 8, 8, 3)
	g := need[*torch.Generator](t)(torch.NewGenerator(9))
	defer g.Close()
	models := make([]*Model, 2)
	for i := range models {
		models[i] = need[*Model](t)(NewModel(n, g, torch.CPU))
		defer models[i].Close()
	}
	specs := n.Params()
	for i, s := range specs {
		v := values(t, models[0].Params[i])
		switch s.Init {
		case InitOnes, InitZeros:
			want := 0.0
			if s.Init == InitOnes {
				want = 1
			}
			for _, e := range v {
				if e != want {
					t.Fatalf("%s: %v, want all %v", s.Name, v, want)
				}
			}
		case InitUniformFanIn:
			bound := 1 / math.Sqrt(float64(s.FanIn))
			lo, hi := slices.Min(v), slices.Max(v)
			if lo < -bound || hi > bound || hi-lo < bound/2 {
				t.Errorf("%s: values in [%g, %g], want U(±%g)", s.Name, lo, hi, bound)
			}
		default:
			t.Errorf("%s: init %v", s.Name, s.Init)
		}
	}
	if want := []string{"conv.weight", "conv.bias", "bn.weight", "bn.bias", "head.weight", "head.bias"}; !slices.Equal(names(specs), want) {
		t.Errorf("parameters %v, want %v", names(specs), want)
	}
	if specs[0].FanIn != 9 || specs[1].FanIn != 9 || specs[4].FanIn != 64 {
		t.Errorf("fan-ins %d, %d, %d; want 9, 9, 64", specs[0].FanIn, specs[1].FanIn, specs[4].FanIn)
	}
	x := T(torch.Rand([]int64{5, 1, 8, 8}, g))
	for _, mode := range []BodyMode{BodyPerModel, BodyGrouped} {
		b := need[*Batched](t)(NewBatched(n, 2))
		b.Mode = mode
		p := [][]*torch.Tensor{models[0].Params, models[1].Params}
		bufs := [][]*torch.Tensor{models[0].Buffers, models[1].Buffers}
		out := T(b.Forward(p, bufs, x, false))
		for m := range models {
			want := T(n.Forward(models[m].Params, models[m].Buffers, x, false))
			if d := maxRelDiff(t, T(out.Select(0, int64(m))), want); d != 0 {
				t.Errorf("%v: model %d %.3g from its own Forward", mode, m, d)
			}
		}
	}
	before := values(t, models[0].Params[0])
	ok(t, Reinit(models[0].Params, specs, g))
	if slices.Equal(values(t, models[0].Params[0]), before) {
		t.Error("Reinit left the convolution's weight")
	}
}

func names(specs []ParamSpec) []string {
	var s []string
	for _, p := range specs {
		s = append(s, p.Name)
	}
	return s
}

// BenchmarkMetaStepTorchScript: one second-order LD meta-step (float32: 100 base images with
// soft labels, an inner step with its graph, the target loss on 1024 images, its gradient to
// the labels) through nets' LeNet and through the exported LeNet (lenet.pt): the ratio of
// the two is the cost of bringing a network through TorchScript. Besides wall time it
// reports the CPU time of the benchmark's thread (cpu-ms/op: libtorch runs on it, one
// thread under OMP_NUM_THREADS=1), which other load on the machine barely moves.
func BenchmarkMetaStepTorchScript(b *testing.B) {
	for _, arch := range []string{"lenet", TorchScriptPrefix + filepath.Join(tsDir, "lenet.pt")} {
		name := "nets"
		if IsTorchScript(arch) {
			name = "torchscript"
		}
		b.Run(name, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			s := torch.NewScope()
			defer s.Close()
			n := need[*Net](b)(New(arch, 1, 28, 28, 10))
			defer n.Close()
			g := need[*torch.Generator](b)(torch.NewGenerator(1))
			defer g.Close()
			theta := need[[]*torch.Tensor](b)(InitParams(n.Params(), g, torch.CPU, torch.Float))
			defer torch.FreeAll(theta)
			T := need[*torch.Tensor](b)
			xb := T(torch.Randn([]int64{100, 1, 28, 28}, g))
			xt := T(torch.Randn([]int64{1024, 1, 28, 28}, g))
			z := T(torch.Randn([]int64{100, 10}, g))
			ok(b, z.SetRequiresGrad(true))
			yt := T(T(T(torch.Rand([]int64{1024}, g)).MulScalar(10)).ToDType(torch.Long))
			step := func() error {
				return torch.WithScope(func(*torch.Scope) error {
					var c torch.Chain
					li := c.T(torch.SoftCrossEntropy(c.T(n.Forward(theta, nil, xb, true)), c.T(torch.Softmax(z, 1))))
					if c.Err() != nil {
						return c.Err()
					}
					gr, err := torch.Grad([]*torch.Tensor{li}, theta, torch.GradOpts{CreateGraph: true, RetainGraph: true})
					if err != nil {
						return err
					}
					moved := make([]*torch.Tensor, len(theta))
					for i := range theta {
						moved[i] = c.T(theta[i].Sub(c.T(gr[i].MulScalar(0.01))))
					}
					lo := c.T(torch.CrossEntropy(c.T(n.Forward(moved, nil, xt, true)), yt))
					if c.Err() != nil {
						return c.Err()
					}
					_, err = torch.Grad([]*torch.Tensor{lo}, []*torch.Tensor{z}, torch.GradOpts{})
					return err
				})
			}
			ok(b, step()) // warm-up
			b.ResetTimer()
			cpu := threadCPU()
			for i := 0; i < b.N; i++ {
				if err := step(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric((threadCPU()-cpu)*1e3/float64(b.N), "cpu-ms/op")
		})
	}
}

// threadCPU is the CPU time (s) of the calling OS thread (CLOCK_THREAD_CPUTIME_ID).
func threadCPU() float64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return float64(ts.Nano()) / 1e9
}
