package torch

import (
	"math"
	"strings"
	"testing"
)

// TestCheckConvolutionsAgree: after TestMain's GuardConvolutions, libtorch's float32
// convolutions are within rounding of float64 on every layer of the check, with oneDNN and
// without it (libtorch's own code, which float64 always runs).
func TestCheckConvolutionsAgree(t *testing.T) {
	threads := NumThreads()
	c, err := CheckConvolutions()
	ok(t, err)
	if NumThreads() != threads {
		t.Errorf("%d threads after the check, %d before", NumThreads(), threads)
	}
	if !c.OK() || c.Layers != len(convCheckCases) || len(c.Threads) != min(NumThreads(), 2) || c.Threads[len(c.Threads)-1] != 1 {
		t.Fatalf("%d layers at %v threads: %v", c.Layers, c.Threads, c)
	}
	t.Logf("oneDNN enabled %v: %v", MkldnnEnabled(), c)
	if !MkldnnEnabled() {
		return
	}
	ok(t, SetMkldnn(false))
	defer func() { ok(t, SetMkldnn(true)) }()
	off, err := CheckConvolutions()
	ok(t, err)
	if !off.OK() {
		t.Fatalf("oneDNN off: %v", off)
	}
	t.Logf("oneDNN off: %v", off)
}

// TestCheckConvolutionsFindsWrongGradients: a convolution with the right values and every
// gradient 1 % too large, one with NaN, and one with the right gradients but values off by
// 0.01 are each caught, and what is wrong named.
func TestCheckConvolutionsFindsWrongGradients(t *testing.T) {
	scoped(t)
	need := tensors(t)
	// y = z + k·(z − detach(z)): z's values, k+1 times z's gradients.
	scaledGrads := func(k float64) func(x, w, b *Tensor, o Conv2dOpts) (*Tensor, error) {
		return func(x, w, b *Tensor, o Conv2dOpts) (*Tensor, error) {
			z := need(Conv2d(x, w, b, o))
			d := need(z.Sub(need(z.Detach())))
			return z.Add(need(d.MulScalar(k)))
		}
	}
	offValue := func(x, w, b *Tensor, o Conv2dOpts) (*Tensor, error) {
		z := need(Conv2d(x, w, b, o))
		return z.AddScalar(1e-2)
	}
	for _, tc := range []struct {
		name string
		conv func(x, w, b *Tensor, o Conv2dOpts) (*Tensor, error)
		want string
	}{
		{"gradients 1 % off", scaledGrads(0.01), ": d/d"},
		{"NaN", scaledGrads(math.NaN()), ": values"}, // 0·NaN: the values are NaN too
		{"values off", offValue, ": values"},
	} {
		c, err := checkConvolutions(tc.conv)
		ok(t, err)
		if tc.name == "NaN" && !math.IsInf(c.Worst, 1) {
			t.Errorf("NaN: worst %g, want +Inf", c.Worst)
		}
		if c.OK() || !strings.Contains(c.WorstCase, tc.want) || !strings.Contains(c.String(), "disagree") {
			t.Errorf("%s: %v (worst %q)", tc.name, c, c.WorstCase)
		}
	}
	c, err := checkConvolutions(Conv2d)
	ok(t, err)
	if !c.OK() {
		t.Errorf("Conv2d itself: %v", c)
	}
}

// TestSetMkldnn: the switch, both ways, and an error for on in a build without oneDNN.
func TestSetMkldnn(t *testing.T) {
	was := MkldnnEnabled()
	defer func() {
		if MkldnnAvailable() {
			ok(t, SetMkldnn(was))
		}
	}()
	ok(t, SetMkldnn(false))
	if MkldnnEnabled() {
		t.Error("still enabled after SetMkldnn(false)")
	}
	err := SetMkldnn(true)
	if MkldnnAvailable() != (err == nil) || MkldnnEnabled() != MkldnnAvailable() {
		t.Errorf("SetMkldnn(true) in a build with oneDNN %v: %v, enabled %v", MkldnnAvailable(), err, MkldnnEnabled())
	}
}

// TestGuardConvolutionsSettings: SetMkldnnSetting's values, and an error for others that
// leaves the setting as it was.
func TestGuardConvolutionsSettings(t *testing.T) {
	was := MkldnnEnabled()
	defer func() {
		ok(t, SetMkldnnSetting("check"))
		if MkldnnAvailable() {
			ok(t, SetMkldnn(was))
		}
	}()
	if s, err := MkldnnSetting(); s != "check" || err != nil {
		t.Fatalf("default setting %q, %v; want check", s, err)
	}
	ok(t, SetMkldnnSetting("off"))
	if err := SetMkldnnSetting("sometimes"); err == nil || !strings.Contains(err.Error(), `"sometimes": want check (the default), on or off`) {
		t.Errorf("SetMkldnnSetting(sometimes): %v", err)
	}
	if s, _ := MkldnnSetting(); s != "off" {
		t.Errorf("after a refused value the setting is %q, want off (unchanged)", s)
	}
	g, err := GuardConvolutions()
	ok(t, err)
	if MkldnnEnabled() || g.Enabled || g.Checked || g.Setting != "off" {
		t.Errorf("off: enabled %v, guard %+v", MkldnnEnabled(), g)
	}
	// Off already: the check has nothing of oneDNN's to check.
	ok(t, SetMkldnnSetting(""))
	g, err = GuardConvolutions()
	ok(t, err)
	if g.Checked || g.Enabled || g.Setting != "check" || (g.Available && !strings.Contains(g.Summary(), "switched off by the program")) {
		t.Errorf("after off, unset: %+v", g)
	}
	if !MkldnnAvailable() {
		return
	}
	ok(t, SetMkldnnSetting("on"))
	g, err = GuardConvolutions()
	ok(t, err)
	if !MkldnnEnabled() || !g.Enabled || g.Checked || !strings.Contains(g.Summary(), "unchecked") {
		t.Errorf("on: enabled %v, guard %+v", MkldnnEnabled(), g)
	}
	ok(t, SetMkldnnSetting("check"))
	g, err = GuardConvolutions()
	ok(t, err)
	if !g.Checked || g.Enabled != g.Check.OK() || MkldnnEnabled() != g.Enabled || (g.TurnedOff && !g.After.OK()) {
		t.Errorf("check: enabled %v, guard %+v", MkldnnEnabled(), g)
	}
	t.Log(g.Summary())
}
