package nets

// Gradient checks of the networks, in float64.

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/ldtorch/ldtorch/torch"
)

func indexOf(t *testing.T, specs []ParamSpec, name string) int {
	t.Helper()
	for i, s := range specs {
		if s.Name == name {
			return i
		}
	}
	t.Fatalf("no parameter %q", name)
	return -1
}

// bump adds d·dir to p in place (no graph).
func bump(t *testing.T, p, dir *torch.Tensor, d float64) {
	t.Helper()
	ok(t, torch.NoGrad(func() error { return p.AddScaled_(dir, d) }))
}

// restore copies saved back into p (no graph).
func restore(t *testing.T, p, saved *torch.Tensor) {
	t.Helper()
	ok(t, torch.NoGrad(func() error { return p.Copy_(saved) }))
}

// checkNetGrad compares torch.Grad of loss = Σ R ⊙ logits with respect to the listed
// parameters and the input x against central differences, for a few single entries (the
// largest-gradient entry and random ones) and one random unit direction per tensor.
func checkNetGrad(t *testing.T, label string, n *Net, params, bufs []*torch.Tensor, x *torch.Tensor, train bool, which []string, seed uint64) {
	t.Helper()
	s := torch.NewScope()
	defer s.Close()
	rng := newRNG(seed)
	r := randn64(t, rng, x.Shape()[0], n.Classes)
	loss := func() float64 {
		t.Helper()
		var v float64
		ok(t, torch.WithScope(func(*torch.Scope) error {
			var c torch.Chain
			logits := c.T(n.Forward(params, bufs, x, train))
			l := c.T(c.T(logits.Mul(r)).Sum())
			if c.Err() != nil {
				return c.Err()
			}
			var err error
			v, err = l.Item()
			return err
		}))
		return v
	}
	var inputs []*torch.Tensor
	var names []string
	specs := n.Params()
	for _, w := range which {
		inputs = append(inputs, params[indexOf(t, specs, w)])
		names = append(names, w)
	}
	inputs = append(inputs, x)
	names = append(names, "input")
	logits := need[*torch.Tensor](t)(n.Forward(params, bufs, x, train))
	l := need[*torch.Tensor](t)(need[*torch.Tensor](t)(logits.Mul(r)).Sum())
	grads := need[[]*torch.Tensor](t)(torch.Grad([]*torch.Tensor{l}, inputs, torch.GradOpts{}))
	// ReLU and max-pool kinks make the loss only piecewise smooth: a perturbation that
	// crosses a kink spoils one difference quotient. A gradient entry passes when the
	// central difference agrees at some step size of the ladder (the smaller steps allow
	// for float64 rounding of the loss, about 1e-14 relative); a wrong gradient fails at
	// every step size. How often the first step size was not enough is logged and bounded.
	steps := []float64{1e-5, 1e-7, 1e-8}
	worst := 0.0
	checks, retried := 0, 0
	for k, in := range inputs {
		if grads[k] == nil {
			t.Fatalf("%s: no gradient for %s", label, names[k])
		}
		g := values(t, grads[k])
		saved := need[*torch.Tensor](t)(need[*torch.Tensor](t)(in.Detach()).Clone())
		gmax := 0.0
		arg := 0
		for i, v := range g {
			if math.Abs(v) > gmax {
				gmax, arg = math.Abs(v), i
			}
		}
		if gmax == 0 {
			t.Errorf("%s: gradient of %s is identically zero", label, names[k])
		}
		entries := []int{arg}
		for j := 0; j < 3; j++ {
			entries = append(entries, rng.IntN(len(g)))
		}
		check := func(what string, dir *torch.Tensor, analytic float64) {
			checks++
			var fds []float64
			for j, h := range steps {
				bump(t, in, dir, h)
				up := loss()
				restore(t, in, saved)
				bump(t, in, dir, -h)
				down := loss()
				restore(t, in, saved)
				fd := (up - down) / (2 * h)
				tol := 1e-6 + 1e-5*math.Abs(analytic) + 1e-14*(math.Abs(up)+math.Abs(down))/h
				fds = append(fds, fd)
				if math.Abs(fd-analytic) <= tol {
					if j > 0 {
						retried++
					} else {
						worst = max(worst, math.Abs(fd-analytic)/tol)
					}
					return
				}
			}
			t.Errorf("%s: d loss/d %s %s: autograd %.10g, central differences %.10g at steps %v", label, names[k], what, analytic, fds, steps)
		}
		for _, i := range entries {
			e := make([]float64, len(g))
			e[i] = 1
			dir := need[*torch.Tensor](t)(torch.FromFloat64(e, in.Shape()...))
			check(fmt.Sprintf("[%d]", i), dir, g[i])
		}
		// A random unit direction tests the whole gradient tensor at once.
		d := make([]float64, len(g))
		var norm, dot float64
		for i := range d {
			d[i] = rng.NormFloat64()
			norm += d[i] * d[i]
		}
		norm = math.Sqrt(norm)
		for i := range d {
			d[i] /= norm
			dot += d[i] * g[i]
		}
		check("along a random direction", need[*torch.Tensor](t)(torch.FromFloat64(d, in.Shape()...)), dot)
	}
	t.Logf("%s: %d checks, worst |fd − autograd| / tolerance at the first step %.3g, %d needed a smaller step", label, checks, worst, retried)
	if retried > checks/4 {
		t.Errorf("%s: %d of %d checks needed a smaller step than %g: more than kinks explain", label, retried, checks, steps[0])
	}
}

func TestGradCheckNets(t *testing.T) {
	scoped(t)
	cases := []struct {
		arch             string
		c, h, w, classes int64
		batch            int64
		which            []string
	}{
		{"lenet", 1, 28, 28, 10, 2, []string{"conv1.weight", "conv1.bias", "conv2.weight", "fc1.weight", "fc2.bias", "fc.weight", "fc.bias"}},
		{"lenet", 3, 32, 32, 4, 2, []string{"conv1.weight", "conv2.bias", "fc1.weight", "fc.weight"}},
		{"alexnet", 3, 32, 32, 10, 2, []string{"conv1.weight", "conv1.bias", "conv2.weight", "fc1.weight", "fc2.weight", "fc.bias"}},
		{"resnet", 3, 16, 16, 10, 3, []string{"conv1.weight", "bn1.weight", "bn1.bias", "layer1.0.conv1.weight", "layer2.0.shortcut.0.weight", "layer2.0.shortcut.1.weight", "layer3.1.conv2.weight", "layer3.1.bn2.bias", "fc.weight", "fc.bias"}},
	}
	rng := newRNG(11)
	for ci, c := range cases {
		n := need[*Net](t)(New(c.arch, c.c, c.h, c.w, c.classes))
		gen := need[*torch.Generator](t)(torch.NewGenerator(uint64(100 + ci)))
		params := need[[]*torch.Tensor](t)(InitParams(n.Params(), gen, torch.CPU, torch.Double))
		bufs := need[[]*torch.Tensor](t)(NewBuffers(n.Buffers, torch.CPU, torch.Double))
		gen.Close()
		x := randn64(t, rng, c.batch, c.c, c.h, c.w)
		ok(t, x.SetRequiresGrad(true))
		name := fmt.Sprintf("%s %dx%dx%d", c.arch, c.c, c.h, c.w)
		if c.arch == "resnet" {
			// Move the running statistics away from 0/1 with a few training passes, so
			// that evaluation mode uses non-trivial statistics.
			for i := 0; i < 3; i++ {
				warm := randn64(t, rng, 4, c.c, c.h, c.w)
				ok(t, torch.NoGrad(func() error { _, err := n.Forward(params, bufs, warm, true); return err }))
			}
			rm := values(t, bufs[0])
			if rm[0] == 0 {
				t.Fatalf("resnet: running mean did not move in training mode")
			}
			before := values(t, bufs[1])
			checkNetGrad(t, name+" eval", n, params, bufs, x, false, c.which, 7)
			if !slices.Equal(before, values(t, bufs[1])) {
				t.Errorf("resnet: evaluation mode changed the running statistics")
			}
			checkNetGrad(t, name+" train", n, params, bufs, x, true, c.which, 8)
			if slices.Equal(before, values(t, bufs[1])) {
				t.Errorf("resnet: training mode did not update the running statistics")
			}
		} else {
			checkNetGrad(t, name, n, params, bufs, x, true, c.which, 9)
			// No BatchNorm: train and eval must agree exactly.
			var a, b []float64
			ok(t, torch.NoGrad(func() error {
				la, err := n.Forward(params, bufs, x, true)
				if err != nil {
					return err
				}
				lb, err := n.Forward(params, bufs, x, false)
				if err != nil {
					return err
				}
				a, b = values(t, la), values(t, lb)
				return nil
			}))
			if !slices.Equal(a, b) {
				t.Errorf("%s: train and eval outputs differ without BatchNorm", name)
			}
		}
		torch.FreeAll(params)
		torch.FreeAll(bufs)
	}
}
