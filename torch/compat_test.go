package torch

// compat_test.go: the runtime switches and the synchronisation-free variants the meta-loop
// uses: TF32, LinalgSolveEx, FromInt64On and the host-read counter.

import (
	"slices"
	"testing"
)

func TestAllowTF32(t *testing.T) {
	// Callable on every build (on the CPU only a flag); restored for the other tests.
	was := AllowTF32()
	t.Cleanup(func() { ok(t, SetAllowTF32(was)) })
	ok(t, SetAllowTF32(true))
	if !AllowTF32() {
		t.Error("SetAllowTF32(true): AllowTF32 still false")
	}
	ok(t, SetAllowTF32(false))
	if AllowTF32() {
		t.Error("SetAllowTF32(false): AllowTF32 still true")
	}
}

func TestLinalgSolveEx(t *testing.T) {
	scoped(t)
	T := tensors(t)
	a := wellConditioned(t, 11, 4)
	b := randnT(t, newRNG(12), 4, 3)
	want := T(LinalgSolve(a, b))
	x, info, err := LinalgSolveEx(a, b)
	ok(t, err)
	if !slices.Equal(vals(t, x), vals(t, want)) {
		t.Error("LinalgSolveEx differs from LinalgSolve")
	}
	if item(t, info) != 0 {
		t.Errorf("info %v for a regular system", item(t, info))
	}
	// A singular system is no error, but info says so.
	s := f64T(t, []float64{1, 2, 2, 4}, 2, 2)
	_, info, err = LinalgSolveEx(s, T(Ones([]int64{2, 1}, WithDType(Double))))
	ok(t, err)
	if item(t, info) <= 0 {
		t.Errorf("singular system: info %v, want > 0", item(t, info))
	}
	_, _, err = LinalgSolveEx(T(Ones([]int64{2, 3}, WithDType(Double))), b)
	if err == nil {
		t.Error("non-square system: no error")
	}
}

func TestFromInt64OnAndHostReads(t *testing.T) {
	scoped(t)
	dev := testDevice(t)
	x, err := FromInt64On(dev, []int64{3, 1, 2}, 3)
	ok(t, err)
	if x.Device() != dev || x.DType() != Long {
		t.Fatalf("FromInt64On: %v", x)
	}
	before := HostReads()
	got := need[[]int64](t)(x.Int64s())
	if !slices.Equal(got, []int64{3, 1, 2}) {
		t.Errorf("FromInt64On: %v", got)
	}
	item(t, firstElem(t, x))
	if n := HostReads() - before; n != 2 {
		t.Errorf("Int64s then Item: %d host reads counted, want 2", n)
	}
	if _, err := FromInt64On(dev, []int64{1, 2}, 3); err == nil {
		t.Error("shape mismatch: no error")
	}
}

// firstElem is x's first element as a one-element tensor.
func firstElem(tb testing.TB, x *Tensor) *Tensor {
	tb.Helper()
	return tensors(tb)(x.Narrow(0, 0, 1))
}
