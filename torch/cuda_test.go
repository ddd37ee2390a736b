package torch

// cuda_test.go: the same computations on a GPU as on the CPU. Skipped without CUDA, so CI
// (CPU) never runs it; build the test binary with `go test -c` to carry it to a GPU box.

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
)

// Every visible GPU is described (ldtorch version names them); an index past the last is
// an error naming the count.
func TestCUDADeviceProperties(t *testing.T) {
	if !CUDAIsAvailable() {
		t.Skip("CUDA not available")
	}
	n := CUDADeviceCount()
	for i := 0; i < n; i++ {
		g, err := CUDADeviceProperties(i)
		if err != nil || g.Index != i || g.Name == "" || g.MemoryBytes < 1<<30 || g.Major < 3 {
			t.Errorf("CUDADeviceProperties(%d) = %+v, %v", i, g, err)
		}
		t.Logf("%+v", g)
	}
	for _, bad := range []int{-1, n} {
		_, err := CUDADeviceProperties(bad)
		wantErr(t, err, "cuda_device_properties", fmt.Sprintf("CUDA device %d does not exist (%d device(s))", bad, n))
	}
}

func TestCUDAMatchesCPU(t *testing.T) {
	if !CUDAIsAvailable() {
		t.Skip("CUDA not available")
	}
	scoped(t)
	T := tensors(t)
	dev := CUDA(0)

	// moves, dtype and device queries, copies back
	x := randnT(t, newRNG(1), 3, 4)
	xg := T(x.To(dev))
	if xg.Device() != dev || xg.DType() != Double {
		t.Fatalf("moved tensor: %v", xg)
	}
	if !slices.Equal(vals(t, xg), vals(t, x)) {
		t.Error("round trip through the GPU changed values")
	}
	// random draws are made on the CPU and moved: the same seed gives the same numbers
	g1 := need[*Generator](t)(NewGenerator(5))
	defer g1.Close()
	g2 := need[*Generator](t)(NewGenerator(5))
	defer g2.Close()
	if !slices.Equal(vals(t, T(Randn([]int64{8}, g1, WithDType(Double)))), vals(t, T(Randn([]int64{8}, g2, WithDType(Double), OnDevice(dev))))) {
		t.Error("seeded Randn differs between CPU and GPU")
	}
	ok(t, CUDASynchronize(0))

	// the golden LeNet meta-step on the GPU (float64)
	gd := loadGolden(t, "lenet_meta.npz")
	p := make([]*Tensor, 10)
	for i := range p {
		p[i] = T(T(gd.get(fmt.Sprintf("p%d", i)).To(dev)).Detach())
		ok(t, p[i].SetRequiresGrad(true))
	}
	yb := T(T(gd.get("yb").To(dev)).Detach())
	ok(t, yb.SetRequiresGrad(true))
	m, err := metaForward(p, T(gd.get("xb").To(dev)), yb, T(gd.get("xt").To(dev)), T(gd.get("yt").To(dev)), gd.scalar("alpha"))
	ok(t, err)
	dyb := need[[]*Tensor](t)(Grad([]*Tensor{m.outer}, []*Tensor{yb}, GradOpts{}))
	gd.check("outer", m.outer, 1e-9)
	gd.check("dyb", dyb[0], 1e-7) // GPU kernels sum in another order
	gd.logErrors()

	// Save copies device tensors to the host
	path := filepath.Join(t.TempDir(), "gpu.npz")
	ok(t, Save(path, map[string]*Tensor{"x": xg}))
	back := need[map[string]*Tensor](t)(Load(path))
	if back["x"].Device() != CPU || maxAbsDiff(vals(t, back["x"]), vals(t, x)) != 0 {
		t.Error("Save/Load of a GPU tensor")
	}
	// an out-of-range device index is an error
	_, err = x.To(CUDA(CUDADeviceCount()))
	wantErr(t, err, "to", "does not exist")
	ok(t, CUDAEmptyCache())
}
