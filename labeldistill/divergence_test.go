package labeldistill

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/internal/testkit"
	"github.com/ldtorch/ldtorch/labeldistill/rundir"
)

// divergence_test.go: a diverging run stops at the meta-step where a non-finite value first
// appears, naming the setting most likely at fault, even without checkpoints, and its
// history holds nothing of that step or later.

// TestDivergenceCaughtAtTheStep: settings that make a run diverge end it at the meta-step
// where a non-finite value first appears, naming the setting most likely at fault, even
// without checkpoints (where the checkpoint writer used to be the only check beyond the
// label loss and the labels, and a run whose Adam state had overflowed was scored like any
// other: 9.8 %, exit 0).
func TestDivergenceCaughtAtTheStep(t *testing.T) {
	testkit.RestoreThreads(t)
	ds := testkit.SmallDataset(t)
	for _, tc := range []struct {
		name, method, setting string
		set                   func(*config.Config)
		quantity              string
		maxStep               int
	}{
		{"rr scale_init", config.MethodRR, "scale_init", func(c *config.Config) { c.ScaleInit = 1e30 }, "Adam state of the labels", 1},
		{"rr scale_lr", config.MethodRR, "scale_lr", func(c *config.Config) { c.ScaleLR = 1e30 }, "", 3},
		{"ld inner_lr", config.MethodLD, "inner_lr", func(c *config.Config) { c.InnerLR = 1e30 }, "label loss", 1},
		{"ld model_lr", config.MethodLD, "model_lr", func(c *config.Config) { c.ModelLR = 1e30 }, "", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testkit.SmallConfig(tc.method)
			cfg.CheckpointEvery = -1
			tc.set(&cfg)
			hist := filepath.Join(t.TempDir(), rundir.HistoryFile)
			res, err := Distill(context.Background(), cfg, WithData(ds), WithHistory(hist))
			var nf *NonFiniteError
			if res != nil || !errors.As(err, &nf) {
				t.Fatalf("result %v, error %v: want a NonFiniteError and no result", res != nil, err)
			}
			t.Logf("%v", err)
			if nf.Step < 1 || nf.Step > tc.maxStep || nf.Setting != tc.setting || !nf.Diverged {
				t.Fatalf("step %d (want 1 to %d), setting %q (want %q)", nf.Step, tc.maxStep, nf.Setting, tc.setting)
			}
			if tc.quantity != "" && nf.Quantity != tc.quantity {
				t.Errorf("quantity %q, want %q", nf.Quantity, tc.quantity)
			}
			// Nothing of the diverged step or later is recorded (the steps after it may
			// have been queued: their outputs are read in batches).
			recs, herr := rundir.ReadHistory(hist)
			if herr != nil {
				t.Fatal(herr)
			}
			for _, r := range recs {
				if r.Kind != rundir.HistoryStart && r.Step >= nf.Step {
					t.Errorf("history holds a %s line of meta-step %d, at or after the diverged step %d", r.Kind, r.Step, nf.Step)
				}
			}
			if !strings.Contains(err.Error(), tc.setting+" 1e+30 is too large") {
				t.Errorf("message does not name %s: %v", tc.setting, err)
			}
		})
	}
}
