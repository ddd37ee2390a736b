package nets

// convnet_test.go: ConvNet-3 (the nets package doc): parameter layout and feature sizes,
// forward pass and double backward (the gradient of the squared gradient norm) against
// PyTorch 1.13 in float64 (testdata/golden/convnet.npz), the grouped form against M
// one-model forms, initialisation, and the test device against the CPU.

import (
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/fileio/npz"
)

func maxAbs(v []float64) float64 {
	m := 0.0
	for _, a := range v {
		m = max(m, math.Abs(a))
	}
	return m
}

func convNetCount(c, classes, featureDim int64) int64 {
	n := int64(0)
	in := c
	for d := 0; d < 3; d++ {
		n += convCount(128, in, 3, true) + 2*128 // conv, then the instance norm's γ and β
		in = 128
	}
	return n + linCount(classes, featureDim)
}

func TestConvNetLayout(t *testing.T) {
	for _, c := range []struct {
		c, h, w, classes, featureDim int64
	}{
		{1, 28, 28, 10, 2048}, // padding 3 first: 28 → 32 → 16 → 8 → 4
		{3, 32, 32, 10, 2048}, // 32 → 16 → 8 → 4
		{3, 32, 32, 100, 2048},
		{1, 32, 32, 10, 2048}, // 32 → 36 → 18 → 9 → 4
		{3, 28, 28, 10, 1152}, // 28 → 14 → 7 → 3
	} {
		name := fmt.Sprintf("%dx%dx%d", c.c, c.h, c.w)
		n, err := New("convnet", c.c, c.h, c.w, c.classes)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if n.FeatureDim != c.featureDim || len(n.Buffers) != 0 || len(n.Body) != 12 {
			t.Errorf("%s: FeatureDim %d, %d buffers, %d body tensors; want %d, 0, 12", name, n.FeatureDim, len(n.Buffers), len(n.Body), c.featureDim)
		}
		if got, want := CountParams(n.Params()), convNetCount(c.c, c.classes, c.featureDim); got != want {
			t.Errorf("%s: %d parameters, want %d", name, got, want)
		}
		var names []string
		for _, s := range n.Params() {
			names = append(names, s.Name)
		}
		want := "conv1.weight conv1.bias norm1.weight norm1.bias conv2.weight conv2.bias norm2.weight norm2.bias conv3.weight conv3.bias norm3.weight norm3.bias fc.weight fc.bias"
		if got := strings.Join(names, " "); got != want {
			t.Errorf("%s: parameters %s", name, got)
		}
		if !slices.Equal(n.Body[0].Shape, []int64{128, c.c, 3, 3}) || !slices.Equal(n.Body[2].Shape, []int64{128}) {
			t.Errorf("%s: conv1 %v, norm1 %v", name, n.Body[0].Shape, n.Body[2].Shape)
		}
	}
	if got := convNetCount(3, 10, 2048); got != 320010 {
		t.Errorf("hand count of CIFAR ConvNet-3 = %d, want 320,010 (DC-BENCH's ConvNet-3, instance norm)", got)
	}
	for _, hw := range [][2]int64{{24, 24}, {28, 32}, {64, 64}} {
		if _, err := New("convnet", 3, hw[0], hw[1], 10); err == nil || !strings.Contains(err.Error(), "28×28 or 32×32") {
			t.Errorf("%d×%d: error %v", hw[0], hw[1], err)
		}
	}
	if _, err := New("convnet4", 3, 32, 32, 10); err == nil || !strings.Contains(err.Error(), "lenet, alexnet, resnet, convnet") {
		t.Errorf("unknown architecture: error %v, want the known names", err)
	}
}

// hashedParam is parameter k of the fixture: splitmix64 from state k+1, the top 9 bits v of
// each output, off + (2v − 511)/512 · 2^−exp (testdata/golden/README.md).
func hashedParam(k int, n int64, exp int64, off float64) []float64 {
	v := make([]float64, n)
	seed := uint64(k + 1)
	for i := range v {
		z := seed + uint64(i+1)*0x9E3779B97F4A7C15
		z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
		z = (z ^ z>>27) * 0x94D049BB133111EB
		z ^= z >> 31
		b := float64(z >> 55)
		v[i] = off + (2*b-511)/512*math.Ldexp(1, -int(exp))
	}
	return v
}

func TestConvNetMatchesPyTorchGolden(t *testing.T) {
	arc, err := npz.ReadFile(filepath.Join("..", "testdata", "golden", "convnet.npz"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tag     string
		c, size int64
	}{{"mnist", 1, 28}, {"cifar", 3, 32}} {
		t.Run(c.tag, func(t *testing.T) {
			scoped(t)
			T := need[*torch.Tensor](t)
			fix := func(name string) *torch.Tensor { return goldenTensor(t, arc, c.tag+"_"+name) }
			scalar := func(name string) float64 { return values(t, fix(name))[0] }
			check := func(what string, got *torch.Tensor, want string, tol float64) {
				t.Helper()
				w := fix(want)
				if !slices.Equal(got.Shape(), w.Shape()) {
					t.Fatalf("%s: shape %v, want %v", what, got.Shape(), w.Shape())
				}
				if d := maxRelDiff(t, got, w); !(d <= tol) {
					t.Errorf("%s differs from PyTorch: max rel diff %.3g > %.0g", what, d, tol)
				}
			}
			n := need[*Net](t)(New("convnet", c.c, c.size, c.size, 10))
			specs := n.Params()
			params := make([]*torch.Tensor, len(specs))
			for k, s := range specs {
				exp := need[[]int64](t)(fix(fmt.Sprintf("pexp%d", k)).Int64s())[0]
				v := hashedParam(k, CountParams(specs[k:k+1]), exp, scalar(fmt.Sprintf("poff%d", k)))
				params[k] = T(torch.FromFloat64(v, s.Shape...))
				var sum float64
				for _, a := range v {
					sum += a
				}
				if want := scalar(fmt.Sprintf("psum%d", k)); math.Abs(sum-want) > 1e-9*math.Max(1, math.Abs(want)) {
					t.Fatalf("%s: generated values sum to %.12g, the fixture's to %.12g", s.Name, sum, want)
				}
				ok(t, params[k].SetRequiresGrad(true))
			}
			x, y := fix("x"), fix("y")
			ok(t, x.SetRequiresGrad(true))
			ok(t, y.SetRequiresGrad(true))

			logits := T(n.Forward(params, nil, x, true))
			check("logits", logits, "logits", 1e-12)
			// And without a graph: torch.ConvNormReluPool's loops keep no statistics then.
			ok(t, torch.NoGrad(func() error {
				check("logits without a graph", T(n.Forward(params, nil, x, false)), "logits", 1e-12)
				return nil
			}))
			loss := T(torch.SoftCrossEntropy(logits, y))
			if d := math.Abs(values(t, loss)[0] - scalar("loss")); d > 1e-13 {
				t.Errorf("loss differs by %.3g", d)
			}
			g := need[[]*torch.Tensor](t)(torch.Grad([]*torch.Tensor{loss}, params, torch.GradOpts{CreateGraph: true}))
			var terms []*torch.Tensor
			for _, gk := range g {
				terms = append(terms, T(T(gk.Square()).Sum()))
			}
			r := T(torch.Stack(terms, 0))
			r = T(r.Sum())
			if d := math.Abs(values(t, r)[0]-scalar("r")) / scalar("r"); d > 1e-11 {
				t.Errorf("squared gradient norm differs: rel %.3g", d)
			}
			h := need[[]*torch.Tensor](t)(torch.Grad([]*torch.Tensor{r}, append(slices.Clone(params), x, y), torch.GradOpts{}))
			project := func(what string, v *torch.Tensor, name string, tol float64) {
				if v.Dim() == 1 {
					check(what, v, name, tol)
					return
				}
				check(what+" row 0", T(v.Select(0, 0)), name+"_row0", tol)
				check(what+" row sums", T(T(v.Flatten(1, -1)).Sum(1)), name+"_sums", tol)
			}
			for k, s := range specs {
				if strings.HasPrefix(s.Name, "conv") && strings.HasSuffix(s.Name, ".bias") {
					// Instance norm subtracts each channel's mean right after the
					// convolution: its bias has no effect, and both gradients are 0 up to
					// rounding here and in PyTorch (whose values are as tiny).
					for _, v := range []*torch.Tensor{g[k], h[k], fix(fmt.Sprintf("g%d", k)), fix(fmt.Sprintf("h%d", k))} {
						if a := maxAbs(values(t, v)); a > 1e-13 {
							t.Errorf("%s: a gradient of %.3g, want 0 up to rounding", s.Name, a)
						}
					}
					continue
				}
				project("∂loss/∂"+s.Name, g[k], fmt.Sprintf("g%d", k), 1e-10)
				project("∂r/∂"+s.Name, h[k], fmt.Sprintf("h%d", k), 1e-9)
			}
			check("∂r/∂x", h[len(specs)], "drdx", 1e-9)
			check("∂r/∂y", h[len(specs)+1], "drdy", 1e-9)
		})
	}
}

func TestConvNetGroupedMatchesOneModel(t *testing.T) {
	const m, batch = 3, 2
	for _, c := range []struct{ c, hw, classes int64 }{{1, 28, 10}, {3, 32, 7}} {
		for _, perModel := range []bool{true, false} {
			t.Run(fmt.Sprintf("%dx%d/per-model-input=%v", c.c, c.hw, perModel), func(t *testing.T) {
				scoped(t)
				T := need[*torch.Tensor](t)
				n := need[*Net](t)(New("convnet", c.c, c.hw, c.hw, c.classes))
				bn := need[*Batched](t)(NewBatched(n, m))
				bn.Mode = BodyGrouped
				p, buf, refP, refBuf := twinModels(t, n, m)
				rng := newRNG(21)
				var x *torch.Tensor
				if perModel {
					x = randn64(t, rng, m, batch, c.c, c.hw, c.hw)
				} else {
					x = randn64(t, rng, batch, c.c, c.hw, c.hw)
				}
				probs := T(torch.Softmax(randn64(t, rng, m, batch, c.classes), 2))
				out := T(bn.Forward(p, buf, x, true))
				var losses []*torch.Tensor
				for i := int64(0); i < m; i++ {
					xi := x
					if perModel {
						xi = T(x.Select(0, i))
					}
					want := T(n.Forward(refP[i], refBuf[i], xi, true))
					got := T(out.Select(0, i))
					if d := maxRel(t, got, want); d > 1e-12 {
						t.Errorf("model %d: grouped logits differ from the one-model form by %.3g", i, d)
					}
					losses = append(losses, T(torch.SoftCrossEntropy(want, T(probs.Select(0, i)))))
				}
				// Gradients of the summed loss reach every model's own parameters alike.
				var gl []*torch.Tensor
				for i := int64(0); i < m; i++ {
					gl = append(gl, T(torch.SoftCrossEntropy(T(out.Select(0, i)), T(probs.Select(0, i)))))
				}
				sum := func(ts []*torch.Tensor) *torch.Tensor { return T(T(torch.Stack(ts, 0)).Sum()) }
				var flatP, flatRef []*torch.Tensor
				for i := 0; i < m; i++ {
					flatP = append(flatP, p[i]...)
					flatRef = append(flatRef, refP[i]...)
				}
				got := need[[]*torch.Tensor](t)(torch.Grad([]*torch.Tensor{sum(gl)}, flatP, torch.GradOpts{}))
				want := need[[]*torch.Tensor](t)(torch.Grad([]*torch.Tensor{sum(losses)}, flatRef, torch.GradOpts{}))
				// The convolutions' biases feed instance norms, which take out any shift of a
				// channel: their gradients are zero but for rounding, which differs between
				// the two forms. Differences are measured against the largest gradient entry.
				scale, worst := 0.0, 0.0
				for j := range want {
					for _, v := range values(t, want[j]) {
						scale = max(scale, math.Abs(v))
					}
				}
				for j := range got {
					g, w := values(t, got[j]), values(t, want[j])
					for k := range g {
						worst = max(worst, math.Abs(g[k]-w[k])/scale)
					}
				}
				if worst > 1e-12 {
					t.Errorf("gradients differ from the one-model form by %.3g of the largest gradient entry", worst)
				}
				// No running statistics: evaluation mode computes the same logits.
				eval := T(bn.Forward(p, buf, x, false))
				if d := maxRel(t, eval, out); d != 0 {
					t.Errorf("evaluation mode differs from training mode by %.3g", d)
				}
			})
		}
	}
}

func TestConvNetInit(t *testing.T) {
	scoped(t)
	n := need[*Net](t)(New("convnet", 3, 32, 32, 10))
	gen := need[*torch.Generator](t)(torch.NewGenerator(3))
	defer gen.Close()
	p := need[[]*torch.Tensor](t)(InitParams(n.Params(), gen, torch.CPU, torch.Double))
	defer torch.FreeAll(p)
	for k, s := range n.Params() {
		v := values(t, p[k])
		switch {
		case strings.HasPrefix(s.Name, "norm") && strings.HasSuffix(s.Name, ".weight"):
			for _, a := range v {
				if a != 1 {
					t.Fatalf("%s starts at %g, want 1", s.Name, a)
				}
			}
		case strings.HasPrefix(s.Name, "norm"):
			for _, a := range v {
				if a != 0 {
					t.Fatalf("%s starts at %g, want 0", s.Name, a)
				}
			}
		default: // U(±1/√fan_in): in·3·3 for a convolution (in = 3, then 128), 2048 for the head
			fan := 2048.0
			if strings.HasPrefix(s.Name, "conv1.") {
				fan = 3 * 9
			} else if strings.HasPrefix(s.Name, "conv") {
				fan = 128 * 9
			}
			bound, top := 1/math.Sqrt(fan), 0.0
			for _, a := range v {
				top = max(top, math.Abs(a))
			}
			if top > bound || top < 0.9*bound {
				t.Errorf("%s: max |value| %.4g, want just under 1/√%g = %.4g", s.Name, top, fan, bound)
			}
		}
	}
}

func TestConvNetDeviceMatchesCPU(t *testing.T) {
	dev := testDevice(t)
	scoped(t)
	T := need[*torch.Tensor](t)
	for _, c := range []struct{ c, hw int64 }{{1, 28}, {3, 32}} {
		n := need[*Net](t)(New("convnet", c.c, c.hw, c.hw, 10))
		model := func(d torch.Device) *Model {
			gen := need[*torch.Generator](t)(torch.NewGenerator(5))
			defer gen.Close()
			m := need[*Model](t)(NewModel(n, gen, d))
			t.Cleanup(m.Close)
			return m
		}
		cpu, other := model(torch.CPU), model(dev)
		x := T(randn64(t, newRNG(6), 8, c.c, c.hw, c.hw).ToDType(torch.Float))
		want := values(t, T(n.Forward(cpu.Params, cpu.Buffers, x, true)))
		got := values(t, T(n.Forward(other.Params, other.Buffers, T(x.To(dev)), true)))
		closeTo(t, fmt.Sprintf("convnet %dx%d on %v", c.c, c.hw, dev), got, want)
	}
}
