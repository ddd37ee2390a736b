package nets

// nets_test.go: parameter counts against hand-computed layer formulas, output shapes,
// float64 central-difference gradient checks of every network (ResNet in training and
// evaluation mode) with respect to parameters and the input, input-shape errors, Reinit,
// and the statistics of the default initialisations.

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/torch"
)

// Layer parameter counts, written out independently of the package's spec builders.
func convCount(out, in, k int64, bias bool) int64 {
	n := out * in * k * k
	if bias {
		n += out
	}
	return n
}

func linCount(out, in int64) int64 { return out*in + out }

func bnCount(ch int64) int64 { return 2 * ch }

func lenetCount(c, classes int64) int64 {
	return convCount(6, c, 5, true) + convCount(16, 6, 5, true) + linCount(120, 400) + linCount(84, 120) + linCount(classes, 84)
}

func alexCount(classes int64) int64 {
	return convCount(64, 3, 5, true) + convCount(64, 64, 5, true) + linCount(384, 4096) + linCount(192, 384) + linCount(classes, 192)
}

func resnetCount(c, classes int64) int64 {
	n := convCount(16, c, 3, false) + bnCount(16)
	in := int64(16)
	for s, w := range []int64{16, 32, 64} {
		for b := 0; b < 2; b++ {
			n += convCount(w, in, 3, false) + bnCount(w) + convCount(w, w, 3, false) + bnCount(w)
			if s > 0 && b == 0 {
				n += convCount(w, in, 1, false) + bnCount(w)
			}
			in = w
		}
	}
	return n + linCount(classes, 64)
}

func TestParamCounts(t *testing.T) {
	cases := []struct {
		arch              string
		c, h, w, classes  int64
		want              int64
		tensors, buffers  int
		featureDim, heads int64
	}{
		{"lenet", 1, 28, 28, 10, lenetCount(1, 10), 10, 0, 84, 10},
		{"lenet", 1, 28, 28, 26, lenetCount(1, 26), 10, 0, 84, 26},
		{"lenet", 3, 32, 32, 10, lenetCount(3, 10), 10, 0, 84, 10},
		{"alexnet", 3, 32, 32, 10, alexCount(10), 10, 0, 192, 10},
		{"alexnet", 3, 32, 32, 100, alexCount(100), 10, 0, 192, 100},
		{"resnet", 3, 32, 32, 10, resnetCount(3, 10), 47, 30, 64, 10},
		{"resnet", 1, 28, 28, 10, resnetCount(1, 10), 47, 30, 64, 10},
	}
	// The figures quoted by docs/ALGORITHM.md §2 and hand sums of the layer formulas.
	if got := lenetCount(1, 10); got != 61706 {
		t.Fatalf("hand count of MNIST LeNet = %d, want 61706 (docs/ALGORITHM.md §2)", got)
	}
	if got := lenetCount(3, 10); got != 62006 {
		t.Fatalf("hand count of 3-channel LeNet = %d, want 62006", got)
	}
	if got := alexCount(10); got != 1756426 {
		t.Fatalf("hand count of AlexCifarNet = %d, want 1756426", got)
	}
	if got := resnetCount(3, 10); got != 175258 {
		t.Fatalf("hand count of the CIFAR ResNet = %d, want 175258", got)
	}
	for _, c := range cases {
		name := fmt.Sprintf("%s-%dx%dx%d-C%d", c.arch, c.c, c.h, c.w, c.classes)
		n, err := New(c.arch, c.c, c.h, c.w, c.classes)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := CountParams(n.Params()); got != c.want {
			t.Errorf("%s: CountParams(Params()) = %d, want %d", name, got, c.want)
		}
		if got, want := CountParams(n.Body), c.want-linCount(c.classes, c.featureDim); got != want {
			t.Errorf("%s: body has %d parameters, want %d", name, got, want)
		}
		if len(n.Params()) != c.tensors || len(n.Buffers) != c.buffers {
			t.Errorf("%s: %d parameter tensors and %d buffers, want %d and %d", name, len(n.Params()), len(n.Buffers), c.tensors, c.buffers)
		}
		if n.FeatureDim != c.featureDim || n.Classes != c.heads {
			t.Errorf("%s: FeatureDim %d, Classes %d; want %d, %d", name, n.FeatureDim, n.Classes, c.featureDim, c.heads)
		}
		head := n.Head()
		if len(head) != 2 || !slices.Equal(head[0].Shape, []int64{c.classes, c.featureDim}) || !slices.Equal(head[1].Shape, []int64{c.classes}) {
			t.Errorf("%s: head specs %+v", name, head)
		}
		// The materialised tensors agree with the specs.
		if c.arch != "alexnet" {
			gen := need[*torch.Generator](t)(torch.NewGenerator(1))
			p := need[[]*torch.Tensor](t)(InitParams(n.Params(), gen, torch.CPU, torch.Float))
			var total int64
			for i, x := range p {
				total += x.Numel()
				if !slices.Equal(x.Shape(), n.Params()[i].Shape) {
					t.Errorf("%s: parameter %s has shape %v, spec %v", name, n.Params()[i].Name, x.Shape(), n.Params()[i].Shape)
				}
			}
			if total != c.want {
				t.Errorf("%s: InitParams made %d scalars, want %d", name, total, c.want)
			}
			torch.FreeAll(p)
			gen.Close()
		}
	}
}

func TestOutputShapes(t *testing.T) {
	scoped(t)
	cases := []struct {
		arch             string
		c, h, w, classes int64
	}{
		{"lenet", 1, 28, 28, 10}, {"lenet", 3, 32, 32, 7}, {"alexnet", 3, 32, 32, 10},
		{"resnet", 3, 32, 32, 10}, {"resnet", 1, 28, 28, 5},
	}
	rng := newRNG(3)
	for _, c := range cases {
		n := need[*Net](t)(New(c.arch, c.c, c.h, c.w, c.classes))
		gen := need[*torch.Generator](t)(torch.NewGenerator(2))
		m := need[*Model](t)(NewModel(n, gen, torch.CPU))
		x := need[*torch.Tensor](t)(randn64(t, rng, 3, c.c, c.h, c.w).ToDType(torch.Float))
		for _, train := range []bool{true, false} {
			out, err := n.Forward(m.Params, m.Buffers, x, train)
			if err != nil {
				t.Fatalf("%s train=%v: %v", c.arch, train, err)
			}
			if !slices.Equal(out.Shape(), []int64{3, c.classes}) || out.DType() != torch.Float {
				t.Errorf("%s train=%v: logits %v %v, want [3 %d] float32", c.arch, train, out.Shape(), out.DType(), c.classes)
			}
			f, err := n.Features(m.Params, m.Buffers, x, train)
			if err != nil {
				t.Fatalf("%s features: %v", c.arch, err)
			}
			if !slices.Equal(f.Shape(), []int64{3, n.FeatureDim}) {
				t.Errorf("%s train=%v: features %v, want [3 %d]", c.arch, train, f.Shape(), n.FeatureDim)
			}
			// Features accept the body alone.
			if _, err := n.Features(m.Params[:len(n.Body)], m.Buffers, x, train); err != nil {
				t.Errorf("%s: Features with the body parameters only: %v", c.arch, err)
			}
			for _, v := range values(t, out) {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("%s: non-finite logit %v", c.arch, v)
				}
			}
		}
		m.Close()
		gen.Close()
	}
}

// noPanic runs f and turns a panic into a test failure.
func noPanic(t *testing.T, what string, f func() error) error {
	t.Helper()
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("%s panicked: %v", what, r)
			}
		}()
		err = f()
	}()
	return err
}

func TestInputErrors(t *testing.T) {
	scoped(t)
	for _, c := range []struct {
		arch             string
		c, h, w, classes int64
	}{{"lenet", 1, 30, 30, 10}, {"lenet", 1, 28, 32, 10}, {"alexnet", 3, 28, 28, 10}, {"resnet", 3, 4, 4, 10}, {"lenet", 1, 28, 28, 1}, {"vgg", 3, 32, 32, 10}} {
		if n, err := New(c.arch, c.c, c.h, c.w, c.classes); err == nil {
			t.Errorf("New(%s, %d, %d, %d, %d) = %v, want an error", c.arch, c.c, c.h, c.w, c.classes, n.Arch)
		}
	}
	gen := need[*torch.Generator](t)(torch.NewGenerator(5))
	defer gen.Close()
	rng := newRNG(4)
	for _, c := range []struct {
		arch    string
		c, h, w int64
		bad     [][]int64
	}{
		{"lenet", 1, 28, 28, [][]int64{{2, 1, 32, 32}, {2, 3, 28, 28}, {1, 28, 28}, {2, 784}, {2, 1, 28, 27}}},
		{"lenet", 3, 32, 32, [][]int64{{2, 1, 32, 32}, {2, 3, 28, 28}}},
		{"alexnet", 3, 32, 32, [][]int64{{2, 3, 28, 28}, {2, 1, 32, 32}, {3, 32, 32}}},
		{"resnet", 3, 32, 32, [][]int64{{2, 1, 32, 32}, {2, 3, 16, 32}, {3, 32, 32}}},
	} {
		n := need[*Net](t)(New(c.arch, c.c, c.h, c.w, 10))
		m := need[*Model](t)(NewModel(n, gen, torch.CPU))
		for _, shape := range c.bad {
			x := need[*torch.Tensor](t)(torch.Zeros(shape))
			for _, train := range []bool{true, false} {
				err := noPanic(t, "Forward", func() error { _, err := n.Forward(m.Params, m.Buffers, x, train); return err })
				if err == nil {
					t.Errorf("%s %v: Forward(x %v) succeeded, want an error", c.arch, c.c, shape)
				}
				err = noPanic(t, "Features", func() error { _, err := n.Features(m.Params, m.Buffers, x, train); return err })
				if err == nil {
					t.Errorf("%s: Features(x %v) succeeded, want an error", c.arch, shape)
				}
			}
		}
		good := need[*torch.Tensor](t)(randn64(t, rng, 2, c.c, c.h, c.w).ToDType(torch.Float))
		// Wrong parameter / buffer lists and a dtype mismatch are errors too.
		if err := noPanic(t, "Forward", func() error { _, err := n.Forward(m.Params[:len(n.Body)], m.Buffers, good, true); return err }); err == nil {
			t.Errorf("%s: Forward with the body parameters only succeeded", c.arch)
		}
		if err := noPanic(t, "Features", func() error { _, err := n.Features(m.Params[:2], m.Buffers, good, true); return err }); err == nil {
			t.Errorf("%s: Features with 2 parameters succeeded", c.arch)
		}
		badBuf := append(append([]*torch.Tensor{}, m.Buffers...), need[*torch.Tensor](t)(torch.Zeros([]int64{3})))
		if err := noPanic(t, "Forward", func() error { _, err := n.Forward(m.Params, badBuf, good, true); return err }); err == nil {
			t.Errorf("%s: Forward with an extra buffer succeeded", c.arch)
		}
		double := randn64(t, rng, 2, c.c, c.h, c.w)
		if err := noPanic(t, "Forward", func() error { _, err := n.Forward(m.Params, m.Buffers, double, true); return err }); err == nil {
			t.Errorf("%s: float64 input with float32 parameters succeeded", c.arch)
		}
		// The model still works after the failures.
		if _, err := n.Forward(m.Params, m.Buffers, good, false); err != nil {
			t.Errorf("%s: Forward after errors: %v", c.arch, err)
		}
		m.Close()
	}
}

// ---- Reinit and initial distributions -----------------------------------------------------

func TestReinit(t *testing.T) {
	scoped(t)
	for _, arch := range []string{"lenet", "resnet"} {
		c, hw := int64(1), int64(28)
		if arch == "resnet" {
			c, hw = 3, 32
		}
		n := need[*Net](t)(New(arch, c, hw, hw, 10))
		specs := n.Params()
		gen := need[*torch.Generator](t)(torch.NewGenerator(21))
		params := need[[]*torch.Tensor](t)(InitParams(specs, gen, torch.CPU, torch.Float))
		gen.Close()
		orig := slices.Clone(params)
		var before [][]float64
		var aliases []*torch.Tensor
		for _, p := range params {
			before = append(before, values(t, p))
			aliases = append(aliases, need[*torch.Tensor](t)(p.Alias()))
		}
		// Disturb a BatchNorm γ so that its reset to 1 is visible.
		var bnIdx = -1
		if arch == "resnet" {
			bnIdx = indexOf(t, specs, "bn1.weight")
			ok(t, torch.NoGrad(func() error { return params[bnIdx].Fill_(5) }))
		}
		gen2 := need[*torch.Generator](t)(torch.NewGenerator(22))
		ok(t, Reinit(params, specs, gen2))
		gen2.Close()
		for i, p := range params {
			if p != orig[i] {
				t.Fatalf("%s: Reinit replaced parameter %s", arch, specs[i].Name)
			}
			if !p.RequiresGrad() || !p.IsLeaf() || p.DType() != torch.Float || !slices.Equal(p.Shape(), specs[i].Shape) {
				t.Errorf("%s: %s lost its leaf/requires-grad/dtype/shape after Reinit", arch, specs[i].Name)
			}
			now := values(t, p)
			if !slices.Equal(now, values(t, aliases[i])) {
				t.Errorf("%s: %s was not redrawn in place (an alias taken before Reinit disagrees)", arch, specs[i].Name)
			}
			switch specs[i].Init {
			case InitUniformFanIn, InitNormalConv:
				same := 0
				for j := range now {
					if now[j] == before[i][j] {
						same++
					}
				}
				if same > len(now)/100 {
					t.Errorf("%s: %s: %d of %d values unchanged by Reinit", arch, specs[i].Name, same, len(now))
				}
			case InitOnes:
				for _, v := range now {
					if v != 1 {
						t.Fatalf("%s: %s = %v after Reinit, want 1", arch, specs[i].Name, v)
					}
				}
			case InitZeros:
				for _, v := range now {
					if v != 0 {
						t.Fatalf("%s: %s = %v after Reinit, want 0", arch, specs[i].Name, v)
					}
				}
			}
		}
		// Reinit from the original seed reproduces the original draw exactly.
		gen3 := need[*torch.Generator](t)(torch.NewGenerator(21))
		ok(t, Reinit(params, specs, gen3))
		gen3.Close()
		for i, p := range params {
			if i == bnIdx {
				continue
			}
			if !slices.Equal(values(t, p), before[i]) {
				t.Errorf("%s: Reinit with the same seed as InitParams gave different %s", arch, specs[i].Name)
			}
		}
		if err := Reinit(params[:len(params)-1], specs, gen3); err == nil {
			t.Errorf("%s: Reinit with a short parameter list succeeded", arch)
		}
		torch.FreeAll(aliases)
		torch.FreeAll(params)
	}
}

func meanStd(v []float64) (mean, std float64) {
	for _, x := range v {
		mean += x
	}
	mean /= float64(len(v))
	for _, x := range v {
		std += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(std / float64(len(v)))
}

func TestInitDistribution(t *testing.T) {
	scoped(t)
	wantFanIn := map[string]map[string]int64{
		"lenet":   {"conv1.weight": 25, "conv1.bias": 25, "conv2.weight": 150, "conv2.bias": 150, "fc1.weight": 400, "fc2.weight": 120, "fc.weight": 84, "fc.bias": 84},
		"alexnet": {"conv1.weight": 75, "conv2.weight": 1600, "fc1.weight": 4096, "fc1.bias": 4096, "fc2.weight": 384, "fc.weight": 192},
	}
	for _, c := range []struct {
		arch  string
		c, hw int64
		big   string // a large layer whose sample statistics are checked
	}{{"lenet", 1, 28, "fc1.weight"}, {"alexnet", 3, 32, "fc1.weight"}} {
		n := need[*Net](t)(New(c.arch, c.c, c.hw, c.hw, 10))
		specs := n.Params()
		gen := need[*torch.Generator](t)(torch.NewGenerator(31))
		params := need[[]*torch.Tensor](t)(InitParams(specs, gen, torch.CPU, torch.Float))
		gen.Close()
		for i, s := range specs {
			if s.Init != InitUniformFanIn {
				t.Errorf("%s: %s init %d, want uniform fan-in", c.arch, s.Name, s.Init)
				continue
			}
			if f, ok := wantFanIn[c.arch][s.Name]; ok && s.FanIn != f {
				t.Errorf("%s: %s fan-in %d, want %d", c.arch, s.Name, s.FanIn, f)
			}
			bound := 1 / math.Sqrt(float64(s.FanIn))
			v := values(t, params[i])
			for _, x := range v {
				if math.Abs(x) > bound*(1+1e-6) {
					t.Fatalf("%s: %s has |w| = %v above the bound 1/√%d = %v", c.arch, s.Name, math.Abs(x), s.FanIn, bound)
				}
			}
			if s.Name != c.big {
				continue
			}
			mean, std := meanStd(v)
			want := bound / math.Sqrt(3)
			nf := float64(len(v))
			if math.Abs(std/want-1) > 0.02 {
				t.Errorf("%s: %s std %.6g, want bound/√3 = %.6g (±2%%)", c.arch, s.Name, std, want)
			}
			if math.Abs(mean) > 5*want/math.Sqrt(nf) {
				t.Errorf("%s: %s mean %.3g, want ≈ 0 (|mean| ≤ %.3g)", c.arch, s.Name, mean, 5*want/math.Sqrt(nf))
			}
			var absMax float64
			var outer int
			for _, x := range v {
				absMax = max(absMax, math.Abs(x))
				if math.Abs(x) > bound/2 {
					outer++
				}
			}
			if absMax < 0.99*bound {
				t.Errorf("%s: %s max |w| %.6g does not reach the bound %.6g", c.arch, s.Name, absMax, bound)
			}
			if frac := float64(outer) / nf; math.Abs(frac-0.5) > 0.02 {
				t.Errorf("%s: %s: %.3f of |w| above bound/2, want 0.5 for a uniform law", c.arch, s.Name, frac)
			}
		}
		torch.FreeAll(params)
	}

	// ResNet: normal convolutions with std √(2/(k·k·out)), BatchNorm γ = 1, β = 0, running
	// statistics 0 and 1.
	n := need[*Net](t)(New("resnet", 3, 32, 32, 10))
	specs := n.Params()
	gen := need[*torch.Generator](t)(torch.NewGenerator(32))
	params := need[[]*torch.Tensor](t)(InitParams(specs, gen, torch.CPU, torch.Float))
	gen.Close()
	bufs := need[[]*torch.Tensor](t)(NewBuffers(n.Buffers, torch.CPU, torch.Float))
	for i, s := range specs {
		v := values(t, params[i])
		switch {
		case s.Name == "layer3.1.conv2.weight":
			if s.Init != InitNormalConv || s.FanIn != 3*3*64 {
				t.Errorf("resnet: %s init %d fan %d, want normal with k·k·out = 576", s.Name, s.Init, s.FanIn)
			}
			mean, std := meanStd(v)
			want := math.Sqrt(2.0 / (3 * 3 * 64))
			if math.Abs(std/want-1) > 0.03 || math.Abs(mean) > 5*want/math.Sqrt(float64(len(v))) {
				t.Errorf("resnet: %s mean %.3g std %.5g, want 0 and %.5g", s.Name, mean, std, want)
			}
		case s.Name == "layer2.0.shortcut.0.weight":
			if s.Init != InitNormalConv || s.FanIn != 1*1*32 {
				t.Errorf("resnet: %s init %d fan %d, want normal with k·k·out = 32", s.Name, s.Init, s.FanIn)
			}
		case s.Name == "fc.weight" || s.Name == "fc.bias":
			if s.Init != InitUniformFanIn || s.FanIn != 64 {
				t.Errorf("resnet: %s init %d fan %d, want uniform fan-in 64", s.Name, s.Init, s.FanIn)
			}
		case len(s.Shape) == 1 && s.Init == InitOnes:
			for _, x := range v {
				if x != 1 {
					t.Fatalf("resnet: %s = %v, want 1", s.Name, x)
				}
			}
		case len(s.Shape) == 1 && s.Init == InitZeros:
			for _, x := range v {
				if x != 0 {
					t.Fatalf("resnet: %s = %v, want 0", s.Name, x)
				}
			}
		case len(s.Shape) == 4:
			if s.Init != InitNormalConv {
				t.Errorf("resnet: conv %s init %d, want normal", s.Name, s.Init)
			}
		default:
			t.Errorf("resnet: unexpected parameter %s %v init %d", s.Name, s.Shape, s.Init)
		}
	}
	for i, b := range n.Buffers {
		want := 0.0
		if strings.HasSuffix(b.Name, ".running_var") {
			want = 1
		} else if !strings.HasSuffix(b.Name, ".running_mean") {
			t.Errorf("resnet: unexpected buffer %s", b.Name)
		}
		for _, x := range values(t, bufs[i]) {
			if x != want {
				t.Fatalf("resnet: buffer %s = %v, want %v", b.Name, x, want)
			}
		}
	}
	torch.FreeAll(params)
	torch.FreeAll(bufs)
}

// TestXavierInit: XavierInit's LeNet starts with Xavier-normal weights, std
// √(2/(fan_in + fan_out)) from the shape (conv: in·k·k and out·k·k), and zero biases; the
// network it came from keeps PyTorch's default.
func TestXavierInit(t *testing.T) {
	scoped(t)
	n := need[*Net](t)(New("lenet", 1, 28, 28, 10))
	x := n.XavierInit()
	if n.Params()[0].Init != InitUniformFanIn || n.Head()[0].Init != InitUniformFanIn {
		t.Fatal("XavierInit changed the original network's specs")
	}
	specs := x.Params()
	gen := need[*torch.Generator](t)(torch.NewGenerator(33))
	params := need[[]*torch.Tensor](t)(InitParams(specs, gen, torch.CPU, torch.Float))
	gen.Close()
	defer torch.FreeAll(params)
	wantStd := map[string]float64{
		"conv1.weight": math.Sqrt(2.0 / (25 + 150)), "conv2.weight": math.Sqrt(2.0 / (150 + 400)),
		"fc1.weight": math.Sqrt(2.0 / (400 + 120)), "fc2.weight": math.Sqrt(2.0 / (120 + 84)), "fc.weight": math.Sqrt(2.0 / (84 + 10)),
	}
	for i, s := range specs {
		v := values(t, params[i])
		if strings.HasSuffix(s.Name, ".bias") {
			if s.Init != InitZeros || slices.Max(v) != 0 || slices.Min(v) != 0 {
				t.Errorf("%s: init %d, values in [%v, %v]; want zeros", s.Name, s.Init, slices.Min(v), slices.Max(v))
			}
			continue
		}
		want, ok := wantStd[s.Name]
		if !ok || s.Init != InitXavierNormal {
			t.Errorf("%s: init %d", s.Name, s.Init)
			continue
		}
		mean, std := meanStd(v)
		tol := 4 / math.Sqrt(2*float64(len(v))) // ±4 standard errors of a sample std
		if math.Abs(std/want-1) > tol || math.Abs(mean) > 4*want/math.Sqrt(float64(len(v))) {
			t.Errorf("%s: mean %.3g, std %.5g; want 0 and %.5g (±%.1f%%)", s.Name, mean, std, want, 100*tol)
		}
	}
}
