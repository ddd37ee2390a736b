package train

import (
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
)

// TestLoneModelRunsItsOwnBody: models asked for in nets.BodyGrouped (a GPU's mode) run grouped,
// except one model alone (validation, the baselines' step searches), which has nothing to
// group with and runs its own body, with fewer operator calls per step.
func TestLoneModelRunsItsOwnBody(t *testing.T) {
	net, err := nets.New("lenet", 1, 28, 28, 10)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Default().Resolved()
	if err != nil {
		t.Fatal(err)
	}
	for _, rr := range []bool{false, true} {
		for seeds, want := range map[int]nets.BodyMode{1: nets.BodyPerModel, 2: nets.BodyGrouped} {
			ss := make([]uint64, seeds)
			for i := range ss {
				ss[i] = uint64(i + 1)
			}
			l, err := NewModels(net, rr, cfg, AdamSpec(1e-3), ss, torch.CPU, torch.Float, nets.BodyGrouped)
			if err != nil {
				t.Fatal(err)
			}
			if got := l.Batched.Mode; got != want {
				t.Errorf("rr %v, %d models asked for grouped: mode %v, want %v", rr, seeds, got, want)
			}
			l.Close()
		}
	}
}
