package engine

import (
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/internal/testkit"
)

// TestBlameSetting: a too small epsilon is named as such; settings at their defaults and
// settings of the other method are not blamed.
func TestBlameSetting(t *testing.T) {
	c := testkit.SmallConfig(config.MethodLD)
	c.LabelEps = 1e-30
	if f, _, _ := blameSetting(c, blameLabels); f != "label_eps" {
		t.Errorf("label_eps 1e-30: blamed %q", f)
	}
	if f, _, _ := blameSetting(testkit.SmallConfig(config.MethodRR), blameLoss); f != "" {
		t.Errorf("defaults: blamed %q", f)
	}
	// A setting of the other method is never blamed.
	c = testkit.SmallConfig(config.MethodLD)
	c.ScaleInit = 1e30
	if f, _, _ := blameSetting(c, blameLoss); f != "" {
		t.Errorf("LD run with scale_init 1e30: blamed %q", f)
	}
}

func TestDescribeMember(t *testing.T) {
	for name, want := range map[string]string{
		"labels.exp_avg_sq":          "Adam second moment of the labels",
		"param.conv1.weight.exp_avg": "Adam first moment of model parameter conv1.weight",
		"rr.scale":                   "the RR scale s",
		"buffer.bn1.running_mean":    "model buffer bn1.running_mean",
	} {
		if got := describeMember(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}
