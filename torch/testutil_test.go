package torch

// testutil_test.go: TestMain (the ABI handshake) and the helpers every test file uses:
// Fatal-on-error unwrapping, scoped tests, deterministic float64 inputs drawn in Go, and
// gradCheck, the central-difference gradient checker.

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	info, err := RuntimeInfo()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	flag.Parse()
	// Here as in the command: libtorch's oneDNN convolutions are checked, and switched off
	// where they are wrong (mkldnn.go), unless LDTORCH_MKLDNN says on or off; every
	// comparison with Conv2d below trusts it.
	if v := os.Getenv(MkldnnEnv); SetMkldnnSetting(v) != nil {
		fmt.Fprintf(os.Stderr, "torch tests: %s=%q: want check (the default), on or off\n", MkldnnEnv, v)
		os.Exit(1)
	}
	g, err := GuardConvolutions()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if testing.Verbose() || g.TurnedOff {
		fmt.Fprintln(os.Stderr, "torch tests:", g.Summary())
	}
	if testing.Verbose() {
		fmt.Printf("libtorch %s, %s, threads %d, CUDA %v (%d devices)\n",
			info.TorchVersion, info.Build, info.Threads, info.CUDA, info.CUDADevices)
	}
	os.Exit(m.Run())
}

// need returns a function that unwraps (v, err) and stops the test on err:
//
//	T := need[*Tensor](t)
//	x := T(FromFloat64(v, 2, 3))
func need[V any](tb testing.TB) func(V, error) V {
	return func(v V, err error) V {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
		return v
	}
}

// tensors is need[*Tensor].
func tensors(tb testing.TB) func(*Tensor, error) *Tensor { return need[*Tensor](tb) }

// ok stops the test on err.
func ok(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// scoped opens a Scope that the test's cleanup closes.
func scoped(tb testing.TB) *Scope {
	s := NewScope()
	tb.Cleanup(s.Close)
	return s
}

// newRNG is a deterministic Go random source (inputs never depend on libtorch's RNG).
func newRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)) }

func numel(shape []int64) int {
	n := 1
	for _, d := range shape {
		n *= int(d)
	}
	return n
}

// randnT returns a float64 tensor of standard normal samples.
func randnT(tb testing.TB, rng *rand.Rand, shape ...int64) *Tensor {
	tb.Helper()
	v := make([]float64, numel(shape))
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	return tensors(tb)(FromFloat64(v, shape...))
}

// uniformT returns a float64 tensor of uniform samples in [lo, hi).
func uniformT(tb testing.TB, rng *rand.Rand, lo, hi float64, shape ...int64) *Tensor {
	tb.Helper()
	v := make([]float64, numel(shape))
	for i := range v {
		v[i] = lo + (hi-lo)*rng.Float64()
	}
	return tensors(tb)(FromFloat64(v, shape...))
}

// awayT returns float64 samples with |x| in [lo, hi) and a random sign: inputs kept away
// from the kinks of abs, relu, clamp and friends.
func awayT(tb testing.TB, rng *rand.Rand, lo, hi float64, shape ...int64) *Tensor {
	tb.Helper()
	v := make([]float64, numel(shape))
	for i := range v {
		v[i] = lo + (hi-lo)*rng.Float64()
		if rng.IntN(2) == 0 {
			v[i] = -v[i]
		}
	}
	return tensors(tb)(FromFloat64(v, shape...))
}

func f64T(tb testing.TB, v []float64, shape ...int64) *Tensor {
	tb.Helper()
	return tensors(tb)(FromFloat64(v, shape...))
}

func i64T(tb testing.TB, v []int64, shape ...int64) *Tensor {
	tb.Helper()
	return tensors(tb)(FromInt64(v, shape...))
}

func vals(tb testing.TB, x *Tensor) []float64 {
	tb.Helper()
	return need[[]float64](tb)(x.Float64s())
}

func item(tb testing.TB, x *Tensor) float64 {
	tb.Helper()
	return need[float64](tb)(x.Item())
}

func shapeEq(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// maxAbsDiff is max_i |a_i − b_i| (+Inf on a length mismatch or a NaN).
func maxAbsDiff(a, b []float64) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	m := 0.0
	for i := range a {
		d := math.Abs(a[i] - b[i])
		if math.IsNaN(d) {
			return math.Inf(1)
		}
		m = max(m, d)
	}
	return m
}

func maxAbs(a []float64) float64 {
	m := 0.0
	for _, v := range a {
		m = max(m, math.Abs(v))
	}
	return m
}

// ---- gradient checks -----------------------------------------------------------------------

// gcTol are gradCheck's finite-difference step and tolerances: an entry passes when
// |fd − autograd| ≤ Atol + Rtol·max|autograd| over the input.
type gcTol struct{ Eps, Atol, Rtol float64 }

var defaultGC = gcTol{Eps: 1e-6, Atol: 1e-8, Rtol: 1e-6}

// gcWorst records the worst relative error seen by gradCheck over the run (logged by
// TestGradCheck*, for the record).
var gcWorst struct {
	rel  float64
	name string
}

// gradCheck checks autograd against central finite differences for f at float64 inputs.
// The output is reduced to the scalar L = Σ out ⊙ W with a fixed pseudo-random weighting W
// (entries in [-1, 1], drawn from a fixed seed), so every output entry contributes with a
// different weight. torch.Grad gives ∂L/∂input; each input entry is then moved by ±eps
// and L re-evaluated from scratch (fresh leaves, so f may itself call Grad with
// CreateGraph: gradCheck of a gradient is a double-backward check).
func gradCheck(t *testing.T, f func(inputs []*Tensor) (*Tensor, error), inputs ...*Tensor) {
	t.Helper()
	gradCheckTol(t, defaultGC, f, inputs...)
}

func gradCheckTol(t *testing.T, tol gcTol, f func(inputs []*Tensor) (*Tensor, error), inputs ...*Tensor) {
	t.Helper()
	for _, msg := range gradMismatches(t, tol, f, inputs...) {
		t.Error(msg)
	}
}

// gradMismatches does gradCheck's work and returns one message per input whose gradient
// disagrees with finite differences (setup failures still stop the test).
func gradMismatches(t testing.TB, tol gcTol, f func(inputs []*Tensor) (*Tensor, error), inputs ...*Tensor) []string {
	t.Helper()
	var bad []string
	s := NewScope()
	defer s.Close()
	data := make([][]float64, len(inputs))
	shapes := make([][]int64, len(inputs))
	for i, x := range inputs {
		if x.DType() != Double {
			t.Fatalf("gradCheck: input %d is %s, want float64", i, x.DType())
		}
		data[i] = vals(t, x)
		shapes[i] = x.Shape()
	}
	leaves := func() []*Tensor {
		ls := make([]*Tensor, len(data))
		for i := range data {
			ls[i] = tensors(t)(FromFloat64(data[i], shapes[i]...))
			ok(t, ls[i].SetRequiresGrad(true))
		}
		return ls
	}
	var weight *Tensor
	loss := func(in []*Tensor) *Tensor {
		out, err := f(in)
		if err != nil {
			t.Fatalf("gradCheck: f: %v", err)
		}
		if out.DType() != Double {
			t.Fatalf("gradCheck: output is %s, want float64", out.DType())
		}
		if weight == nil {
			rng := newRNG(0x5eed)
			w := make([]float64, out.Numel())
			for i := range w {
				w[i] = 2*rng.Float64() - 1
			}
			weight = tensors(t)(FromFloat64(w, out.Shape()...)) // owned by s
		} else if !shapeEq(weight.Shape(), out.Shape()) {
			t.Fatalf("gradCheck: output shape changed from %v to %v", weight.Shape(), out.Shape())
		}
		T := tensors(t)
		return T(T(out.Mul(weight)).Sum())
	}
	in := leaves()
	L := loss(in)
	grads := need[[]*Tensor](t)(Grad([]*Tensor{L}, in, GradOpts{AllowUnused: true}))
	eval := func() float64 {
		es := NewScope()
		defer es.Close()
		return item(t, loss(leaves()))
	}
	eps := tol.Eps
	for i := range data {
		var ag []float64
		if grads[i] == nil {
			ag = make([]float64, len(data[i]))
		} else {
			ag = vals(t, grads[i])
		}
		fd := make([]float64, len(data[i]))
		for j := range data[i] {
			orig := data[i][j]
			data[i][j] = orig + eps
			lp := eval()
			data[i][j] = orig - eps
			lm := eval()
			data[i][j] = orig
			fd[j] = (lp - lm) / (2 * eps)
		}
		scale := maxAbs(ag)
		bound := tol.Atol + tol.Rtol*scale
		worst, at := 0.0, -1
		for j := range fd {
			if d := math.Abs(fd[j] - ag[j]); d > worst || math.IsNaN(d) {
				worst, at = d, j
			}
		}
		if rel := worst / math.Max(scale, 1e-300); scale > 0 && rel > gcWorst.rel {
			gcWorst.rel, gcWorst.name = rel, t.Name()
		}
		if !(worst <= bound) {
			bad = append(bad, fmt.Sprintf("input %d (shape %v): max |fd − autograd| = %.3e at %d (fd %.12g, autograd %.12g), bound %.3e (max|grad| %.3e)",
				i, shapes[i], worst, at, fd[at], ag[at], bound, scale))
		}
	}
	return bad
}

// testDevice is where the device-parametrised tests run: LDTORCH_TEST_DEVICE=cuda (or
// cuda:N) puts them on a GPU and skips them when CUDA is not available; cpu or unset runs
// them on the CPU, so that CI exercises them too. (The other packages' tests use
// devicetest.Device, which imports this package and so cannot serve its own tests.)
func testDevice(tb testing.TB) Device {
	tb.Helper()
	name := os.Getenv("LDTORCH_TEST_DEVICE")
	if name == "" {
		return CPU
	}
	d, err := ParseDevice(name)
	if err != nil {
		tb.Fatalf("LDTORCH_TEST_DEVICE: %v", err)
	}
	if d.IsCUDA() && (!CUDAIsAvailable() || d.Index >= CUDADeviceCount()) {
		tb.Skipf("LDTORCH_TEST_DEVICE=%s: CUDA is not available (%d devices)", name, CUDADeviceCount())
	}
	return d
}
