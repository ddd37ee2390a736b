package nets

// device_test.go: every architecture's forward pass on the test device (testDevice: the
// CPU by default, a GPU with LDTORCH_TEST_DEVICE=cuda) against the CPU's, from the same
// initial parameters, in training mode (BatchNorm batch statistics, running statistics
// updated) and in evaluation mode.

import (
	"fmt"
	"math"
	"testing"

	"github.com/ldtorch/ldtorch/torch"
)

func TestDeviceForwardMatchesCPU(t *testing.T) {
	dev := testDevice(t)
	scoped(t)
	T := need[*torch.Tensor](t)
	for _, c := range []struct {
		arch             string
		c, h, w, classes int64
	}{
		{"lenet", 1, 28, 28, 10}, {"alexnet", 3, 32, 32, 10}, {"resnet", 3, 32, 32, 10},
	} {
		n := need[*Net](t)(New(c.arch, c.c, c.h, c.w, c.classes))
		model := func(d torch.Device) *Model {
			gen := need[*torch.Generator](t)(torch.NewGenerator(5)) // drawn on the CPU, then moved
			defer gen.Close()
			m := need[*Model](t)(NewModel(n, gen, d))
			t.Cleanup(m.Close)
			return m
		}
		cpu, other := model(torch.CPU), model(dev)
		x := T(randn64(t, newRNG(6), 8, c.c, c.h, c.w).ToDType(torch.Float))
		xd := T(x.To(dev))
		for _, train := range []bool{true, false} {
			want := values(t, T(n.Forward(cpu.Params, cpu.Buffers, x, train)))
			got := values(t, T(n.Forward(other.Params, other.Buffers, xd, train)))
			closeTo(t, fmt.Sprintf("%s train=%v logits", c.arch, train), got, want)
		}
		for i := range cpu.Buffers { // running statistics after one training pass
			closeTo(t, fmt.Sprintf("%s buffer %d", c.arch, i), values(t, other.Buffers[i]), values(t, cpu.Buffers[i]))
		}
	}
}

// closeTo requires float32 agreement: |got − want| ≤ 1e-4·max|want| + 1e-5 everywhere
// (other kernels sum in another order; TF32 is off).
func closeTo(t *testing.T, what string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	scale, worst := 0.0, 0.0
	for i := range want {
		scale = math.Max(scale, math.Abs(want[i]))
		d := math.Abs(got[i] - want[i])
		if math.IsNaN(d) {
			d = math.Inf(1)
		}
		worst = math.Max(worst, d)
	}
	if worst > 1e-4*scale+1e-5 {
		t.Errorf("%s: max |Δ| %.3g (scale %.3g)", what, worst, scale)
	}
}
