package train

import (
	"math/rand/v2"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
)

// lenetMNIST is a LeNet for 1×28×28 images and 10 classes, with the default config resolved.
func lenetMNIST(t *testing.T) (*nets.Net, config.Config) {
	t.Helper()
	net, err := nets.New("lenet", 1, 28, 28, 10)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Default().Resolved()
	if err != nil {
		t.Fatal(err)
	}
	return net, cfg
}

// randnOn is a float32 tensor of shape on dev whose values are scale·N(0, 1) drawn from rng
// (on the host, so a seed gives the same values on every device).
func randnOn(t *testing.T, rng *rand.Rand, dev torch.Device, scale float64, shape ...int64) *torch.Tensor {
	t.Helper()
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(scale * rng.NormFloat64())
	}
	x := must(t)(torch.FromFloat32(v, shape...))
	if dev == torch.CPU {
		return x
	}
	return must(t)(x.To(dev))
}

// TestLoneModelRunsItsOwnBody: models asked for in nets.BodyGrouped (a GPU's mode) run grouped,
// except one model alone (validation, the baselines' step searches), which has nothing to
// group with and runs its own body, with fewer operator calls per step.
func TestLoneModelRunsItsOwnBody(t *testing.T) {
	net, cfg := lenetMNIST(t)
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
