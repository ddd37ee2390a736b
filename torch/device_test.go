package torch

// device_test.go: the device-parametrised tests. They run on testDevice: the CPU by
// default (so CI exercises them), a GPU with LDTORCH_TEST_DEVICE=cuda (skipped when CUDA
// is not available), and compare the device's results with the CPU's.

import "testing"

// onDevice runs f on dev: its float64 inputs are moved there and its output back, both
// differentiably, so gradCheck of onDevice(dev, f) checks dev's backward kernels.
func onDevice(dev Device, f func([]*Tensor) (*Tensor, error)) func([]*Tensor) (*Tensor, error) {
	return func(in []*Tensor) (*Tensor, error) {
		moved := make([]*Tensor, len(in))
		for i, x := range in {
			var err error
			if moved[i], err = x.To(dev); err != nil {
				return nil, err
			}
		}
		out, err := f(moved)
		if err != nil {
			return nil, err
		}
		return out.To(CPU)
	}
}

// TestDeviceGradChecks: every op's float64 gradient on the test device against central
// differences, and for the ops gcCases marks, the second derivative (double backward).
// A case's own constants (index tensors, running statistics) are built on its inputs'
// device.
func TestDeviceGradChecks(t *testing.T) {
	dev := testDevice(t)
	scoped(t)
	for _, tc := range gcCases() {
		t.Run(tc.name, func(t *testing.T) {
			sc := NewScope()
			defer sc.Close()
			in := tc.inputs(t)
			if _, err := onDevice(dev, tc.f)(in); err != nil {
				t.Fatal(err)
			}
			tol := defaultGC
			if tc.tol != nil {
				tol = *tc.tol
			}
			gradCheckTol(t, tol, onDevice(dev, tc.f), in...)
			if tc.gg {
				gradCheck(t, gradOf(onDevice(dev, tc.f)), in...)
			}
		})
	}
}

// TestDeviceMaxPool2x2: MaxPool2x2 on the test device (on a GPU, its fallback to
// max_pool2d) against the fused CPU kernel: values, gradient and second derivatives, bit
// for bit in float64 (ties included: both keep the first maximum).
func TestDeviceMaxPool2x2(t *testing.T) {
	dev := testDevice(t)
	scoped(t)
	T := tensors(t)
	for _, shape := range [][]int64{{3, 4, 8, 6}, {2, 3, 7, 9}} {
		x := tiedInput(t, 1, false, shape...)
		out := []int64{shape[0], shape[1], shape[2] / 2, shape[3] / 2}
		u, v := randnT(t, newRNG(2), out...), randnT(t, newRNG(3), shape...)
		want := poolDerivatives(t, MaxPool2x2, x, u, v)
		got := poolDerivatives(t, MaxPool2x2, T(x.To(dev)), T(u.To(dev)), T(v.To(dev)))
		for i, name := range []string{"values", "gradient", "d²/dx²", "d²/du dx"} {
			if (want[i] == nil) != (got[i] == nil) {
				t.Fatalf("%v %s: CPU gives %v, %s gives %v (nil = unused)", shape, name, want[i] == nil, dev, got[i] == nil)
			}
			if !sameBits(want[i], got[i]) {
				t.Errorf("%v %s on %s differ from the CPU's: max |Δ| %g", shape, name, dev, maxAbsDiff(want[i], got[i]))
			}
		}
	}
}

// TestDeviceBadClassIndex: a class index out of range is a Go error on the test device,
// and the device still works afterwards (on a GPU, a device-side assert would have left
// the CUDA context unusable).
func TestDeviceBadClassIndex(t *testing.T) {
	dev := testDevice(t)
	scoped(t)
	T := tensors(t)
	logits := T(randnT(t, newRNG(4), 3, 5).To(dev))
	for _, bad := range [][]int64{{0, 5, 1}, {0, -1, 1}} {
		y := T(FromInt64On(dev, bad, 3))
		if _, err := CrossEntropy(logits, y); err == nil {
			t.Errorf("CrossEntropy with classes %v of 5: no error", bad)
		} else {
			t.Logf("as expected: %v", err)
		}
		if _, err := OneHot(y, 5); err == nil {
			t.Errorf("OneHot with classes %v of 5: no error", bad)
		}
	}
	// The device is still usable: a correct loss matches the CPU's.
	y := T(FromInt64On(dev, []int64{0, 4, 1}, 3))
	got := item(t, T(CrossEntropy(logits, y)))
	want := item(t, T(CrossEntropy(T(logits.To(CPU)), T(y.To(CPU)))))
	if d := got - want; d > 1e-12 || d < -1e-12 {
		t.Errorf("cross-entropy on %s %v, CPU %v", dev, got, want)
	}
	ok(t, Synchronize(dev))
}
