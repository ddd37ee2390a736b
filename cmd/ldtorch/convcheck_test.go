package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/torch"
)

// TestConvolutionCheck: `ldtorch version` reports the check of libtorch's oneDNN
// convolutions (passed on the machines the suite runs on, or switched off with a warning),
// LDTORCH_MKLDNN=off and =on skip it, and any other value is a usage error naming the
// variable, for commands that compute and for others.
func TestConvolutionCheck(t *testing.T) {
	t.Parallel() // the built binary in child processes only
	version := func(env ...string) (versionInfo, result) {
		t.Helper()
		r := runBinary(t, 0, env, "version", "--json")
		var v versionInfo
		if r.code != 0 {
			t.Fatalf("%v version --json: exit %d, stderr %q", env, r.code, r.stderr)
		}
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
			t.Fatalf("%v version --json: %v: %q", env, err, r.stdout)
		}
		return v, r
	}
	v, r := version("LDTORCH_MKLDNN=check") // over binaryCommand's off, where the suite's check said so
	switch {
	case !torch.MkldnnAvailable():
		if v.MkldnnOn || !strings.Contains(v.Mkldnn, "without oneDNN") {
			t.Errorf("no oneDNN: %q, enabled %v", v.Mkldnn, v.MkldnnOn)
		}
	case strings.Contains(v.Mkldnn, "checked: float32 convolutions of 8 layers agree with float64"):
		if !v.MkldnnOn || r.stderr != "" {
			t.Errorf("checked: enabled %v, stderr %q", v.MkldnnOn, r.stderr)
		}
	default: // disagreed: switched off, with a warning
		if v.MkldnnOn || !strings.Contains(v.Mkldnn, "OFF") || !strings.Contains(r.stderr, "warning") {
			t.Errorf("%q, enabled %v, stderr %q", v.Mkldnn, v.MkldnnOn, r.stderr)
		}
	}
	t.Log(v.Mkldnn)
	if torch.MkldnnAvailable() {
		if v, _ := version("LDTORCH_MKLDNN=off"); v.MkldnnOn || v.Mkldnn != "oneDNN convolutions off (LDTORCH_MKLDNN=off)" {
			t.Errorf("off: %q, enabled %v", v.Mkldnn, v.MkldnnOn)
		}
		if v, _ := version("LDTORCH_MKLDNN=on"); !v.MkldnnOn || !strings.Contains(v.Mkldnn, "unchecked") {
			t.Errorf("on: %q, enabled %v", v.Mkldnn, v.MkldnnOn)
		}
	}
	for _, args := range [][]string{{"version"}, {"distill", "--epochs", "1"}, {"data", "list"}} {
		r := runBinary(t, 0, []string{"LDTORCH_MKLDNN=sometimes"}, args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, `LDTORCH_MKLDNN="sometimes": want check (the default), on or off`) {
			t.Errorf("%v with LDTORCH_MKLDNN=sometimes: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
}
