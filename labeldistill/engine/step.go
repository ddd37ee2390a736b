package engine

// step.go: helpers shared by the meta-steps and evaluation: random index batches, top-1
// error, and the finiteness guard.

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/torch"
)

// sampleIndices returns the first k entries of a random permutation of 0..n-1 as an int64
// tensor on dev ("N_i base indices: a random permutation prefix").
func sampleIndices(rng *rand.Rand, n, k int, dev torch.Device) (*torch.Tensor, error) {
	return indexTensor(int64s(rng.Perm(n)[:k]), dev)
}

func int64s(v []int) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

// indexTensor uploads idx to dev without waiting for the GPU (torch.FromInt64On).
func indexTensor(idx []int64, dev torch.Device) (*torch.Tensor, error) {
	return torch.FromInt64On(dev, idx, int64(len(idx)))
}

// NonFiniteError reports a NaN or infinite quantity, naming the step and what it was. In
// the meta-loop (Diverged) it also names the setting most likely at fault (a config json
// name; "" when none stands out).
type NonFiniteError struct {
	Step     int
	Quantity string
	Value    float64
	// Diverged: found by the meta-loop's per-step guard; Setting, SettingValue and
	// SettingDefault name the suspect, SmallIsRisky says it is too small (an epsilon).
	Diverged                     bool
	Setting                      string
	SettingValue, SettingDefault float64
	SmallIsRisky                 bool
	dd                           bool // found in a method dd run
}

func (e *NonFiniteError) Error() string {
	if e.Diverged {
		return fmt.Sprintf("non-finite %s (%v) at meta-step %d: the run diverged; stopped there, before any checkpoint or validation of it%s",
			e.Quantity, e.Value, e.Step, e.cause())
	}
	return fmt.Sprintf("non-finite %s (%v) at meta-step %d: stopping before it reaches the labels", e.Quantity, e.Value, e.Step)
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// StepStats is what one meta-step reports.
type StepStats struct {
	LabelLoss float64 // CE of the target batch under θ' (LD) or the ridge head (RR)
	Error     float64 // top-1 error (%) on the target batch
}

// stepOutputs is what a meta-step leaves on the device for the meta-loop to read later,
// with other steps' outputs, in one device→host copy (a GPU synchronisation): the label
// loss (a scalar), the number of wrong top-1 predictions on the target batch (an int64
// scalar) and, for LD RR, the ridge solve's status (0 = solved; nil for LD). They belong to
// the scope that was open when the step was called.
type stepOutputs struct {
	loss, wrong, info *torch.Tensor
	batch             int64
}

// read reads o back (one copy) and checks what the meta-loop checks: the solve, then a
// finite label loss. For tests and callers outside the meta-loop.
func (o stepOutputs) read() (StepStats, error) {
	s := torch.NewScope()
	defer s.Close()
	v, err := o.vector(nil)
	if err != nil {
		return StepStats{}, err
	}
	vals, err := v.Float64s()
	if err != nil {
		return StepStats{}, err
	}
	return checkReading(vals, o.batch)
}

// The layout of one meta-step's reading vector (float64, exact for every entry: float32
// losses and sums, integer counts and statuses): the label loss, the wrong count, the ridge
// status, then the sum of each learnt parameter after the step.
const (
	readLoss = iota
	readWrong
	readInfo
	readSums
)

// vector stacks the outputs, and sums (each learnt parameter's sum after the step), into
// one float64 vector of readSums+len(sums) entries (absent outputs are 0).
func (o stepOutputs) vector(sums []*torch.Tensor) (*torch.Tensor, error) {
	var c torch.Chain
	zero := c.T(torch.Zeros([]int64{}, torch.WithDType(torch.Double), torch.OnDevice(o.loss.Device())))
	all := append([]*torch.Tensor{readLoss: o.loss, readWrong: o.wrong, readInfo: o.info}, sums...)
	parts := make([]*torch.Tensor, len(all))
	for i, t := range all {
		if t == nil {
			parts[i] = zero
			continue
		}
		parts[i] = c.T(c.T(t.Reshape()).ToDType(torch.Double))
	}
	if c.Err() != nil {
		return nil, c.Err()
	}
	return torch.Stack(parts, 0)
}

// checkReading turns one step's reading vector into its stats, with the checks the step
// itself made when it read each value at once: the ridge solve (LD RR), a finite label loss.
func checkReading(v []float64, batch int64) (StepStats, error) {
	if info := v[readInfo]; info != 0 {
		return StepStats{}, fmt.Errorf("ridge solve: the system is singular (linalg_solve info %v)", info)
	}
	st := StepStats{LabelLoss: v[readLoss], Error: train.PercentWrong(v[readWrong], batch)}
	if !finite(st.LabelLoss) {
		return st, &NonFiniteError{Quantity: "label loss", Value: st.LabelLoss}
	}
	return st, nil
}
