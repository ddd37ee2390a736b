package torch

import (
	"math"
	"testing"
)

// NonFiniteProbe is 0 for finite values however large or small, and NaN for a NaN or an
// infinity at any position of any tensor of the list, in every floating dtype, contiguous
// or not, on the test device; integer tensors are not probed.
func TestNonFiniteProbe(t *testing.T) {
	scoped(t)
	T := tensors(t)
	dev := testDevice(t)
	probe := func(ts ...*Tensor) float64 {
		t.Helper()
		p := T(NonFiniteProbe(ts...))
		if p.Dim() != 0 || p.DType() != Double || p.Device() != dev || p.RequiresGrad() {
			t.Fatalf("probe tensor: %v (want 0-dim float64 on %v, no gradient)", p, dev)
		}
		return item(t, p)
	}
	on := func(x *Tensor) *Tensor { return T(x.To(dev)) }
	ints := on(T(FromInt64([]int64{1, 2, 3}, 3)))
	for _, dt := range []DType{Float, Double, Half, BFloat16} {
		big := math.MaxFloat32
		switch dt {
		case Double:
			big = math.MaxFloat64
		case Half:
			big = 65504
		case BFloat16:
			big = 3e38
		}
		for _, n := range []int{1, 7, 16, 33, 1000} {
			finite := make([]float64, n)
			for i := range finite {
				finite[i] = float64(i%5-2) * (big / 2) // large values whose sum overflows
			}
			finite[n-1] = 1e-310 // a subnormal float64 (0 in the narrower types)
			x := func(v []float64) *Tensor { return on(T(T(FromFloat64(v, int64(n))).ToDType(dt))) }
			other := on(T(T(Full([]int64{3, 5}, 1, WithDType(dt))).Transpose(0, 1)))
			ok(t, other.SetRequiresGrad(true))
			if got := probe(x(finite), other, ints); got != 0 {
				t.Errorf("%v, n=%d: finite values probed %v, want 0", dt, n, got)
			}
			for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
				for _, at := range []int{0, n / 2, n - 1} {
					v := append([]float64(nil), finite...)
					v[at] = bad
					if got := probe(other, ints, x(v)); !math.IsNaN(got) {
						t.Errorf("%v, n=%d: %v at %d probed %v, want NaN", dt, n, bad, at, got)
					}
				}
			}
		}
		// A non-finite value in a transposed (non-contiguous) tensor.
		m := T(Full([]int64{4, 3}, 2, WithDType(dt)))
		row := T(m.Select(0, 3))
		ok(t, row.Fill_(math.Inf(1)))
		if got := probe(on(T(m.Transpose(0, 1)))); !math.IsNaN(got) {
			t.Errorf("%v: infinity in a transposed tensor probed %v, want NaN", dt, got)
		}
	}
	if got := probe(ints); got != 0 {
		t.Errorf("integers alone probed %v, want 0", got)
	}
	_, err := NonFiniteProbe()
	wantErr(t, err, "nonfinite_probe", "no tensors to probe")
	_, err = NonFiniteProbe(ints, nil)
	if err == nil {
		t.Error("a nil tensor in the list: no error")
	}
	if dev.IsCUDA() {
		_, err = NonFiniteProbe(ints, T(FromInt64([]int64{1}, 1)))
		wantErr(t, err, "nonfinite_probe", "tensors on cuda:0 and cpu in one probe")
	}
}
