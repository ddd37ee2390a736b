package labeldistill

// step.go: helpers shared by the meta-steps and evaluation: random index batches, top-1
// error, and the finiteness guard.

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/ldtorch/ldtorch/torch"
)

// sampleIndices returns the first k entries of a random permutation of 0..n-1 as an int64
// tensor on dev ("N_i base indices: a random permutation prefix").
func sampleIndices(rng *rand.Rand, n, k int, dev torch.Device) (*torch.Tensor, error) {
	perm := rng.Perm(n)[:k]
	idx := make([]int64, k)
	for i, p := range perm {
		idx[i] = int64(p)
	}
	return indexTensor(idx, dev)
}

func indexTensor(idx []int64, dev torch.Device) (*torch.Tensor, error) {
	t, err := torch.FromInt64(idx, int64(len(idx)))
	if err != nil || dev == torch.CPU {
		return t, err
	}
	return t.To(dev)
}

// errorPercent is the top-1 error (%) of logits (B, C) against int64 labels (B).
func errorPercent(logits, y *torch.Tensor) (float64, error) {
	var c torch.Chain
	wrong := c.T(c.T(c.T(logits.Argmax(1, false)).Ne(y)).Sum())
	if c.Err() != nil {
		return 0, c.Err()
	}
	n, err := wrong.Item()
	if err != nil {
		return 0, err
	}
	return 100 * n / float64(y.Shape()[0]), nil
}

// NonFiniteError reports a NaN or infinite quantity, naming the step and what it was.
type NonFiniteError struct {
	Step     int
	Quantity string
	Value    float64
}

func (e *NonFiniteError) Error() string {
	return fmt.Sprintf("non-finite %s (%v) at meta-step %d: stopping before it reaches the labels", e.Quantity, e.Value, e.Step)
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// stepStats is what one meta-step reports.
type stepStats struct {
	LabelLoss float64 // CE of the target batch under θ' (LD) or the ridge head (RR)
	Error     float64 // top-1 error (%) on the target batch
}

// applyThreads sets libtorch's intra-op thread count to n (0: keep libtorch's default) and,
// through the shim, OpenBLAS's to the same number: OpenBLAS otherwise keeps a pool sized by
// the core count whose idle threads spin (measured: 11.6 → 6.3 ms of CPU per evaluation step
// when it is held to one thread).
func applyThreads(n int) error {
	if n <= 0 {
		n = torch.NumThreads()
	}
	if err := torch.SetNumThreads(n); err != nil {
		return err
	}
	return nil
}
