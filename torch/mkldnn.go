package torch

// mkldnn.go: libtorch's oneDNN (mkldnn) convolutions, and a check of them.
//
// libtorch computes float32 CPU convolutions with oneDNN wherever it was built with it
// (float64 ones always with its own im2col and BLAS code). A oneDNN that computes wrong
// gradients on some CPU would make every float32 run there silently wrong, so
// CheckConvolutions compares libtorch's float32 convolutions with its float64 ones on the
// layers our networks have, and GuardConvolutions switches oneDNN off when they disagree.

// #include "csrc/shim.h"
import "C"

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
)

// MkldnnAvailable reports whether libtorch was built with oneDNN (mkldnn).
func MkldnnAvailable() bool { return C.ldt_mkldnn_state() != 0 }

// MkldnnEnabled reports whether libtorch computes float32 CPU convolutions with oneDNN
// (torch.backends.mkldnn.enabled, in a build that has it).
func MkldnnEnabled() bool { return C.ldt_mkldnn_state() == 2 }

// SetMkldnn switches libtorch's oneDNN convolutions on or off for the whole process
// (torch.backends.mkldnn.enabled); off, float32 convolutions run libtorch's own code, as
// float64 ones always do. On, in a build without oneDNN, is an error.
func SetMkldnn(enabled bool) error { return cerr("set_mkldnn", C.ldt_set_mkldnn(cbool(enabled))) }

// ConvCheck is what CheckConvolutions found.
type ConvCheck struct {
	Layers  int   // layers compared
	Threads []int // at these libtorch thread counts each
	// Worst is the largest float32 error of any value or gradient, in units of the rounding
	// bound of its sums (2·n·2⁻²⁴·scale, n the number of terms): at most 1 is float32 rounding.
	Worst     float64
	WorstCase string // which convolution and quantity, e.g. "1→6 channels, 5×5, 1 thread: d/dx"
}

// OK reports whether every value and gradient was within float32 rounding of float64.
func (c ConvCheck) OK() bool { return c.Layers > 0 && len(c.Threads) > 0 && c.Worst <= 1 }

func (c ConvCheck) String() string {
	if c.OK() {
		return fmt.Sprintf("float32 convolutions of %d layers agree with float64 at %s (worst %.2g of the rounding bound)", c.Layers, threadCounts(c.Threads), c.Worst)
	}
	return fmt.Sprintf("float32 convolutions disagree with float64: %s off by %.3g times the rounding bound", c.WorstCase, c.Worst)
}

// convCheckCase is one layer: input and weight shapes, padding, groups, bias.
type convCheckCase struct {
	x, w   []int64
	pad    [2]int64
	groups int64
	bias   bool
}

// convCheckCases are the first layers of LeNet, ConvNet-3 and AlexCifarNet (few input or
// output channels: the gradient with respect to the input sums over the output channels),
// odd sizes, and AlexCifarNet's first two layers grouped over two models, as batched training
// runs them.
var convCheckCases = []convCheckCase{
	{[]int64{3, 1, 28, 28}, []int64{6, 1, 5, 5}, [2]int64{2, 2}, 1, true},
	{[]int64{3, 6, 14, 14}, []int64{16, 6, 5, 5}, [2]int64{0, 0}, 1, true},
	{[]int64{11, 2, 5, 13}, []int64{7, 2, 5, 5}, [2]int64{4, 0}, 1, false},
	{[]int64{2, 2, 12, 12}, []int64{3, 2, 5, 5}, [2]int64{2, 2}, 1, true},
	{[]int64{3, 3, 32, 32}, []int64{10, 3, 3, 3}, [2]int64{1, 1}, 1, true},
	{[]int64{2, 3, 32, 32}, []int64{32, 3, 3, 3}, [2]int64{1, 1}, 1, true},
	{[]int64{2, 6, 16, 16}, []int64{64, 3, 5, 5}, [2]int64{2, 2}, 2, true},
	{[]int64{2, 64, 6, 6}, []int64{64, 32, 5, 5}, [2]int64{2, 2}, 2, true},
}

func (c convCheckCase) String() string {
	g := ""
	if c.groups > 1 {
		g = fmt.Sprintf(" in %d groups", c.groups)
	}
	return fmt.Sprintf("%d→%d channels%s, %d×%d", c.x[1], c.w[0], g, c.w[2], c.w[3])
}

// CheckConvolutions computes libtorch's conv2d (without and with a graph) and its gradients
// with respect to the input, weight and bias, in float32 and in float64 from the same
// float32 values, for a few layers of the networks here, on the CPU, at the thread count in
// use and at one, with whatever backend libtorch picks now (see SetMkldnn), and reports how
// far the float32 results are from the float64 ones. It takes a few tens of milliseconds
// and leaves no tensor behind.
func CheckConvolutions() (ConvCheck, error) { return checkConvolutions(Conv2d) }

// checkConvolutions is CheckConvolutions with conv in place of Conv2d (tests give it a
// wrong one).
func checkConvolutions(conv func(x, w, b *Tensor, o Conv2dOpts) (*Tensor, error)) (ConvCheck, error) {
	// Grad mode is per OS thread: keep this goroutine on one that has it on.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	prev := C.ldt_set_grad_enabled(1)
	defer C.ldt_set_grad_enabled(prev)
	var res ConvCheck
	// At the thread count in use and at one thread (runs pin their own --threads later):
	// oneDNN's kernels and blockings can depend on it.
	threads := []int{NumThreads()}
	if threads[0] > 1 {
		threads = append(threads, 1)
		defer func() { _ = SetNumThreads(threads[0]) }()
	}
	for _, n := range threads {
		if err := SetNumThreads(n); err != nil {
			return res, err
		}
		if err := checkConvolutionsAt(conv, n, &res); err != nil {
			return res, err
		}
		res.Threads = append(res.Threads, n)
	}
	res.Layers = len(convCheckCases)
	return res, nil
}

// threadCounts is "1 thread" or "2 and 1 threads".
func threadCounts(n []int) string {
	if len(n) == 1 && n[0] == 1 {
		return "1 thread"
	}
	s := ""
	for i, k := range n {
		if i > 0 {
			s += " and "
		}
		s += fmt.Sprint(k)
	}
	return s + " threads"
}

// checkConvolutionsAt runs every case at the current thread count n, into res.
func checkConvolutionsAt(conv func(x, w, b *Tensor, o Conv2dOpts) (*Tensor, error), n int, res *ConvCheck) error {
	sc := NewScope()
	defer sc.Close()
	rng := rand.New(rand.NewPCG(2718, 2818))
	for _, c := range convCheckCases {
		// The same float32 values in both precisions: inputs, weights, bias and the
		// gradient of the output.
		ho := c.x[2] + 2*c.pad[0] - c.w[2] + 1
		wo := c.x[3] + 2*c.pad[1] - c.w[3] + 1
		shapes := [][]int64{c.x, c.w, {c.x[0], c.w[0], ho, wo}}
		if c.bias {
			shapes = append(shapes, []int64{c.w[0]})
		}
		var in32, in64 []*Tensor
		for _, s := range shapes {
			n := int64(1)
			for _, d := range s {
				n *= d
			}
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(rng.NormFloat64())
			}
			t32, err := FromFloat32(v, s...)
			if err != nil {
				return err
			}
			t64, err := t32.ToDType(Double)
			if err != nil {
				return err
			}
			in32, in64 = append(in32, t32), append(in64, t64)
		}
		got, err := convAndGradients(conv, c, in32)
		if err != nil {
			return err
		}
		want, err := convAndGradients(Conv2d, c, in64)
		if err != nil {
			return err
		}
		// The longest sum: an output's (over cin/groups · kh · kw products), an input
		// gradient's (over cout/groups · kh · kw) or a weight's and bias's (over the batch
		// and the output positions).
		terms := max(c.w[1]*c.w[2]*c.w[3], c.w[0]/c.groups*c.w[2]*c.w[3], c.x[0]*ho*wo)
		for i, name := range []string{"values without a graph", "values", "d/dx", "d/dw", "d/db"}[:len(got)] {
			e := roundingBounds(got[i], want[i], terms)
			if math.IsNaN(e) {
				e = math.Inf(1)
			}
			if e > res.Worst {
				res.Worst, res.WorstCase = e, fmt.Sprintf("%v, %s: %s", c, threadCounts([]int{n}), name)
			}
		}
	}
	return nil
}

// convAndGradients returns conv's output, computed without and with a graph, and the
// gradients of Σ y·u with respect to x, w and the bias, as float64s; in holds x, w, u and the
// bias (if any). Grad mode is on when it is called.
func convAndGradients(conv func(x, w, b *Tensor, o Conv2dOpts) (*Tensor, error), c convCheckCase, in []*Tensor) ([][]float64, error) {
	leaves := []*Tensor{in[0], in[1]}
	var bias *Tensor
	if c.bias {
		bias = in[3]
		leaves = append(leaves, bias)
	}
	for _, l := range leaves {
		if err := l.SetRequiresGrad(true); err != nil {
			return nil, err
		}
	}
	opts := Conv2dOpts{Padding: c.pad, Groups: c.groups}
	// Without a graph first (evaluation's forward; libtorch may pick another kernel).
	C.ldt_set_grad_enabled(0)
	y0, err := conv(in[0], in[1], bias, opts)
	C.ldt_set_grad_enabled(1)
	if err != nil {
		return nil, err
	}
	y, err := conv(in[0], in[1], bias, opts)
	if err != nil {
		return nil, err
	}
	g, err := Grad([]*Tensor{y}, leaves, GradOpts{GradOutputs: []*Tensor{in[2]}})
	if err != nil {
		return nil, err
	}
	var out [][]float64
	for _, t := range append([]*Tensor{y0, y}, g...) {
		v, err := t.Float64s()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// roundingBounds is max |got − want| over the rounding bound of float32 sums of terms
// products of O(1) values, 2·terms·2⁻²⁴·(max|want| + 1); NaN where either has a NaN.
func roundingBounds(got, want []float64, terms int64) float64 {
	scale := 0.0
	for _, w := range want {
		scale = math.Max(scale, math.Abs(w))
	}
	bound := 2 * float64(terms) * 0x1p-24 * (scale + 1)
	worst := 0.0
	for i := range want {
		d := math.Abs(got[i] - want[i])
		if math.IsNaN(d) {
			return math.NaN()
		}
		worst = math.Max(worst, d/bound)
	}
	return worst
}

// MkldnnEnv names the environment variable the ldtorch command reads at start and passes
// to SetMkldnnSetting (the library itself reads no environment): "off" switches oneDNN's
// convolutions off unchecked, "on" keeps them unchecked; unset or "check", they are checked.
const MkldnnEnv = "LDTORCH_MKLDNN"

// mkldnnSetting is SetMkldnnSetting's value: "check" (the default), "on" or "off".
var mkldnnSetting atomic.Pointer[string]

// SetMkldnnSetting sets what GuardConvolutions does, for the whole process: "check" (or "",
// the default: compare oneDNN's convolutions with float64 and switch oneDNN off where they
// disagree), "on" (keep oneDNN, unchecked) or "off" (switch it off, unchecked). Any other
// value is an error and leaves the setting as it was. Programs call it (the ldtorch command
// from LDTORCH_MKLDNN); the library never does.
func SetMkldnnSetting(s string) error {
	switch s {
	case "":
		s = "check"
	case "check", "on", "off":
	default:
		return fmt.Errorf("torch: oneDNN setting %q: want check (the default), on or off", s)
	}
	mkldnnSetting.Store(&s)
	return nil
}

// MkldnnSetting is the setting SetMkldnnSetting made: "check" (the default), "on" or
// "off". The error is always nil (it is there for callers written when the setting came
// from the environment).
func MkldnnSetting() (string, error) {
	if s := mkldnnSetting.Load(); s != nil {
		return *s, nil
	}
	return "check", nil
}

// ConvGuard is what GuardConvolutions did.
type ConvGuard struct {
	Available bool      // libtorch has oneDNN
	Setting   string    // SetMkldnnSetting's (the command's LDTORCH_MKLDNN): "check", "on" or "off"
	Checked   bool      // oneDNN's convolutions were compared with float64
	Check     ConvCheck // that comparison
	TurnedOff bool      // they disagreed, and oneDNN is now off
	After     ConvCheck // with oneDNN off, the same comparison (when TurnedOff)
	Enabled   bool      // oneDNN computes float32 convolutions after the guard
}

// Summary is one line on the guard's outcome, for `ldtorch version` and logs.
func (g ConvGuard) Summary() string {
	switch {
	case !g.Available:
		return "libtorch built without oneDNN: its own convolutions"
	case g.Setting == "off":
		return "oneDNN convolutions off (" + MkldnnEnv + "=off)"
	case g.Setting == "on":
		return "oneDNN convolutions, unchecked (" + MkldnnEnv + "=on)"
	case g.TurnedOff:
		return fmt.Sprintf("oneDNN convolutions OFF: on this CPU its %s; libtorch's own: %s", g.Check, g.After)
	case !g.Enabled:
		return "oneDNN convolutions off (switched off by the program: torch.SetMkldnn)"
	default:
		return "oneDNN convolutions, checked: " + g.Check.String()
	}
}

// GuardConvolutions applies MkldnnSetting and, unless it says on or off, checks libtorch's
// oneDNN convolutions (CheckConvolutions) and switches oneDNN off for the whole process
// when they disagree with float64 beyond rounding. It returns an error for an unknown
// setting or a failed computation, never for a disagreement: that is in the result (its
// Summary says what happened). Programs call it once, before training; the library never
// calls it by itself.
func GuardConvolutions() (g ConvGuard, err error) {
	g = ConvGuard{Available: MkldnnAvailable()}
	if g.Setting, err = MkldnnSetting(); err != nil {
		return g, err
	}
	if !g.Available {
		return g, nil
	}
	defer func() { g.Enabled = MkldnnEnabled() }()
	if g.Setting != "check" {
		return g, SetMkldnn(g.Setting == "on")
	}
	if !MkldnnEnabled() {
		return g, nil // switched off already (SetMkldnn): nothing of oneDNN's runs
	}
	if g.Check, err = CheckConvolutions(); err != nil {
		return g, err
	}
	g.Checked = true
	if g.Check.OK() {
		return g, nil
	}
	if err = SetMkldnn(false); err != nil {
		return g, err
	}
	g.TurnedOff = true
	g.After, err = CheckConvolutions()
	return g, err
}
