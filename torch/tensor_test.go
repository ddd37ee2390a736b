package torch

// tensor_test.go: the runtime handshake, creation, copies and conversions, queries,
// forward values of the non-differentiable ops (comparisons, logic, argmax, one-hot),
// in-place updates, autograd plumbing (Backward, .grad, GradOutputs, NoGrad) and
// generators.

import (
	"math"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestRuntimeInfo(t *testing.T) {
	info, err := RuntimeInfo()
	ok(t, err)
	if info.ABIVersion != ABIVersion || info.TorchVersion == "" || info.TorchVersion != Version() || info.Threads < 1 {
		t.Errorf("RuntimeInfo %+v", info)
	}
	if !strings.Contains(info.Build, "compiler=") {
		t.Errorf("build info %q", info.Build)
	}
	// OpenBLAS names its kernel set exactly when it is the BLAS mapped into the process.
	maps, _ := os.ReadFile("/proc/self/maps")
	if openblas := strings.Contains(string(maps), "openblas"); openblas != (BLASCore() != "") {
		t.Errorf("OpenBLAS mapped: %v, but BLASCore() = %q", openblas, BLASCore())
	}
	t.Logf("%+v", info)
}

func TestSetLogLevel(t *testing.T) {
	defer SetLogLevel(LogWarning) // libtorch's default, for the tests after this one
	for _, l := range []LogLevel{LogInfo, LogWarning, LogError, LogFatal} {
		ok(t, SetLogLevel(l))
	}
	for _, l := range []LogLevel{-1, 4} {
		if err := SetLogLevel(l); err == nil {
			t.Errorf("SetLogLevel(%d) accepted", l)
		}
	}
	t.Setenv("TORCH_CPP_LOG_LEVEL", "ERROR")
	ok(t, SetLogLevelFromEnv())
}

func TestCreationAndCopies(t *testing.T) {
	scoped(t)
	T := tensors(t)
	x := T(FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3))
	if x.Dim() != 2 || !shapeEq(x.Shape(), []int64{2, 3}) || x.Numel() != 6 || x.DType() != Float || x.Device() != CPU {
		t.Fatalf("queries: %v", x)
	}
	if s := x.String(); s != "Tensor(float32, [2 3], cpu)" {
		t.Errorf("String() = %q", s)
	}
	if v := need[[]int64](t)(x.Int64s()); !slices.Equal(v, []int64{1, 2, 3, 4, 5, 6}) {
		t.Errorf("Int64s %v", v)
	}
	if v := need[[]uint8](t)(x.Uint8s()); !slices.Equal(v, []uint8{1, 2, 3, 4, 5, 6}) {
		t.Errorf("Uint8s %v", v)
	}
	// the input slice is copied: changing it later does not change the tensor
	data := []float64{1, 2}
	y := T(FromFloat64(data, 2))
	data[0] = 99
	if v := vals(t, y); v[0] != 1 {
		t.Error("FromFloat64 aliases Go memory")
	}
	// 0-d tensors and Item
	s := T(FromFloat64([]float64{2.5}))
	if s.Dim() != 0 || item(t, s) != 2.5 {
		t.Errorf("0-d: dim %d item %v", s.Dim(), item(t, s))
	}
	// empty tensors
	e := T(FromFloat32(nil, 0, 4))
	if e.Numel() != 0 || len(need[[]float32](t)(e.Float32s())) != 0 {
		t.Error("empty tensor")
	}
	if v := vals(t, T(Full([]int64{2, 2}, -1.5, WithDType(Double)))); !slices.Equal(v, []float64{-1.5, -1.5, -1.5, -1.5}) {
		t.Errorf("Full %v", v)
	}
	if v := vals(t, T(Eye(2))); !slices.Equal(v, []float64{1, 0, 0, 1}) {
		t.Errorf("Eye %v", v)
	}
	if v := need[[]int64](t)(T(Arange(0, 5, 2, WithDType(Long))).Int64s()); !slices.Equal(v, []int64{0, 2, 4}) {
		t.Errorf("Arange %v", v)
	}
	// dtype conversions
	d := T(x.ToDType(Double))
	if d.DType() != Double || vals(t, d)[5] != 6 {
		t.Error("ToDType(Double)")
	}
	h := T(x.ToDType(Half))
	if h.DType() != Half || vals(t, h)[2] != 3 {
		t.Error("ToDType(Half)")
	}
	// To(CPU) of a CPU tensor is the same tensor's data
	c := T(x.To(CPU))
	if c.Device() != CPU || !slices.Equal(vals(t, c), vals(t, x)) {
		t.Error("To(CPU)")
	}
	// Alias shares storage and autograd identity; Clone copies; Detach shares storage
	al := T(x.Alias())
	cl := T(x.Clone())
	de := T(x.Detach())
	ok(t, x.Fill_(7))
	if vals(t, al)[0] != 7 || vals(t, de)[0] != 7 || vals(t, cl)[0] != 1 {
		t.Errorf("alias %v detach %v clone %v", vals(t, al)[0], vals(t, de)[0], vals(t, cl)[0])
	}
	for _, dt := range []DType{Uint8, Int8, Int16, Int, Long, Half, Float, Double, Bool, BFloat16} {
		if strings.HasPrefix(dt.String(), "dtype(") {
			t.Errorf("DType %d has no name", dt)
		}
	}
}

func TestComparisonsAndLogic(t *testing.T) {
	scoped(t)
	T := tensors(t)
	a := T(FromFloat64([]float64{1, 2, 3, math.NaN()}, 4))
	b := T(FromFloat64([]float64{3, 2, 1, 0}, 4))
	bools := func(x *Tensor) []uint8 { return need[[]uint8](t)(x.Uint8s()) }
	cases := []struct {
		name string
		got  *Tensor
		want []uint8
	}{
		{"eq", T(a.Eq(b)), []uint8{0, 1, 0, 0}},
		{"ne", T(a.Ne(b)), []uint8{1, 0, 1, 1}},
		{"lt", T(a.Lt(b)), []uint8{1, 0, 0, 0}},
		{"le", T(a.Le(b)), []uint8{1, 1, 0, 0}},
		{"gt", T(a.Gt(b)), []uint8{0, 0, 1, 0}},
		{"ge", T(a.Ge(b)), []uint8{0, 1, 1, 0}},
		{"eq_scalar", T(a.EqScalar(2)), []uint8{0, 1, 0, 0}},
		{"ne_scalar", T(a.NeScalar(2)), []uint8{1, 0, 1, 1}},
		{"lt_scalar", T(a.LtScalar(2)), []uint8{1, 0, 0, 0}},
		{"le_scalar", T(a.LeScalar(2)), []uint8{1, 1, 0, 0}},
		{"gt_scalar", T(a.GtScalar(2)), []uint8{0, 0, 1, 0}},
		{"ge_scalar", T(a.GeScalar(2)), []uint8{0, 1, 1, 0}},
		{"isnan", T(a.IsNaN()), []uint8{0, 0, 0, 1}},
		{"isfinite", T(a.IsFinite()), []uint8{1, 1, 1, 0}},
		{"logical_not", T(T(a.IsNaN()).LogicalNot()), []uint8{1, 1, 1, 0}},
		{"logical_and", T(T(a.GtScalar(1)).LogicalAnd(T(b.GtScalar(0)))), []uint8{0, 1, 1, 0}},
		{"logical_or", T(T(a.GtScalar(2)).LogicalOr(T(b.GtScalar(2)))), []uint8{1, 0, 1, 0}},
		{"all", T(T(b.GeScalar(0)).All()), []uint8{1}},
		{"any", T(T(b.LtScalar(0)).Any()), []uint8{0}},
		{"all_dim", T(T(T(b.GeScalar(1)).Reshape(2, 2)).All(1)), []uint8{1, 0}},
		{"any_dim", T(T(T(b.GeScalar(3)).Reshape(2, 2)).Any(1)), []uint8{1, 0}},
	}
	for _, c := range cases {
		if c.got.DType() != Bool {
			t.Errorf("%s: dtype %s, want bool", c.name, c.got.DType())
		}
		if g := bools(c.got); !slices.Equal(g, c.want) {
			t.Errorf("%s = %v, want %v", c.name, g, c.want)
		}
	}
	if v := vals(t, T(b.Sign())); !slices.Equal(v, []float64{1, 1, 1, 0}) {
		t.Errorf("sign %v", v)
	}
	m := T(FromFloat64([]float64{1, 5, 2, 7, 0, 3}, 2, 3))
	if v := need[[]int64](t)(T(m.Argmax(1, false)).Int64s()); !slices.Equal(v, []int64{1, 0}) {
		t.Errorf("argmax %v", v)
	}
	if am := T(m.Argmax(0, true)); !shapeEq(am.Shape(), []int64{1, 3}) {
		t.Errorf("argmax keepdim shape %v", am.Shape())
	}
	oh := T(OneHot(T(FromInt64([]int64{2, 0}, 2)), 3))
	if v := need[[]int64](t)(oh.Int64s()); !slices.Equal(v, []int64{0, 0, 1, 1, 0, 0}) || oh.DType() != Long {
		t.Errorf("one_hot %v %s", v, oh.DType())
	}
	w := T(Where(T(m.GtScalar(2)), m, T(Zeros([]int64{1}, WithDType(Double)))))
	if v := vals(t, w); !slices.Equal(v, []float64{0, 5, 0, 7, 0, 3}) {
		t.Errorf("where %v", v)
	}
	if v := vals(t, T(m.Amin())); v[0] != 0 {
		t.Errorf("amin %v", v)
	}
}

func TestInPlace(t *testing.T) {
	scoped(t)
	T := tensors(t)
	x := T(FromFloat64([]float64{1, 2, 3}, 3))
	o := T(FromFloat64([]float64{10, 20, 30}, 3))
	ok(t, x.AddScaled_(o, -0.5)) // [-4 -8 -12]
	ok(t, x.Mul_(T(FromFloat64([]float64{-1}, 1))))
	ok(t, x.AddScalar_(1)) // [5 9 13]
	ok(t, x.MulScalar_(2)) // [10 18 26]
	ok(t, x.Clamp_(11, 20))
	if v := vals(t, x); !slices.Equal(v, []float64{11, 18, 20}) {
		t.Errorf("in-place chain %v", v)
	}
	ok(t, x.Copy_(T(FromFloat32([]float32{7}, 1)))) // broadcasting, dtype conversion
	if v := vals(t, x); !slices.Equal(v, []float64{7, 7, 7}) {
		t.Errorf("copy_ %v", v)
	}
	ok(t, x.Zero_())
	if v := vals(t, x); !slices.Equal(v, []float64{0, 0, 0}) {
		t.Errorf("zero_ %v", v)
	}
	wantErr(t, x.Copy_(T(Ones([]int64{2}))), "copy_")
}

func TestAutogradPlumbing(t *testing.T) {
	scoped(t)
	T := tensors(t)
	x := T(FromFloat64([]float64{1, 2, 3}, 3))
	ok(t, x.SetRequiresGrad(true))
	if !x.RequiresGrad() || !x.IsLeaf() {
		t.Fatal("leaf flags")
	}
	if g := T(x.Grad()); g != nil {
		t.Fatal("a fresh leaf has a gradient")
	}
	y := T(x.Square())
	if y.IsLeaf() || !y.RequiresGrad() {
		t.Fatal("non-leaf flags")
	}
	// backward twice accumulates with RetainGraph
	loss := T(y.Sum())
	ok(t, loss.BackwardWith(nil, true, false))
	ok(t, loss.Backward())
	if v := vals(t, T(x.Grad())); !slices.Equal(v, []float64{4, 8, 12}) {
		t.Errorf("accumulated grad %v", v)
	}
	ok(t, x.ClearGrad())
	if T(x.Grad()) != nil {
		t.Error("ClearGrad")
	}
	// a non-scalar backward with an explicit upstream gradient
	y = T(x.Square()) // the first graph was freed by the last backward
	ok(t, y.BackwardWith(T(FromFloat64([]float64{1, 0, -1}, 3)), false, false))
	if v := vals(t, T(x.Grad())); !slices.Equal(v, []float64{2, 0, -6}) {
		t.Errorf("backward with a gradient %v", v)
	}
	ok(t, x.ClearGrad())
	// Grad with several outputs and GradOutputs (nil entries mean ones for scalars)
	z := T(x.Exp())
	s := T(x.Sum())
	gs := need[[]*Tensor](t)(Grad([]*Tensor{z, s}, []*Tensor{x}, GradOpts{
		GradOutputs: []*Tensor{T(FromFloat64([]float64{1, 1, 1}, 3)), nil}, RetainGraph: true}))
	for i, v := range vals(t, gs[0]) {
		if want := math.Exp(float64(i+1)) + 1; math.Abs(v-want) > 1e-12 {
			t.Errorf("grad[%d] = %v, want %v", i, v, want)
		}
	}
	if T(x.Grad()) != nil {
		t.Error("Grad touched .grad")
	}
	// CreateGraph: the gradient is differentiable again (d²/dx² Σx³ = 6x)
	c := T(T(x.PowScalar(3)).Sum())
	g1 := need[[]*Tensor](t)(Grad([]*Tensor{c}, []*Tensor{x}, GradOpts{CreateGraph: true}))
	if !g1[0].RequiresGrad() {
		t.Fatal("CreateGraph result does not require grad")
	}
	g2 := need[[]*Tensor](t)(Grad([]*Tensor{T(g1[0].Sum())}, []*Tensor{x}, GradOpts{}))
	if v := vals(t, g2[0]); !slices.Equal(v, []float64{6, 12, 18}) {
		t.Errorf("second derivative %v", v)
	}
	// BackwardWith createGraph: .grad itself has a graph
	ok(t, T(T(x.PowScalar(3)).Sum()).BackwardWith(nil, false, true))
	gx := T(x.Grad())
	if !gx.RequiresGrad() {
		t.Error("backward(create_graph) gave a .grad without graph")
	}
	ok(t, x.ClearGrad())
	// NoGrad: results do not require grad, and the mode is restored
	if !IsGradEnabled() {
		t.Fatal("grad mode off at start")
	}
	var inside *Tensor
	ok(t, NoGrad(func() error {
		if IsGradEnabled() {
			t.Error("NoGrad did not disable grad mode")
		}
		var err error
		inside, err = x.MulScalar(2)
		return err
	}))
	if inside.RequiresGrad() || !IsGradEnabled() {
		t.Errorf("NoGrad: result requires grad %v, mode restored %v", inside.RequiresGrad(), IsGradEnabled())
	}
	// Detach cuts the graph
	if T(x.Detach()).RequiresGrad() {
		t.Error("Detach kept requires_grad")
	}
	ok(t, x.SetRequiresGrad(false))
	if x.RequiresGrad() {
		t.Error("SetRequiresGrad(false)")
	}
}

func TestGeneratorsAndSeeds(t *testing.T) {
	scoped(t)
	T := tensors(t)
	g := need[*Generator](t)(NewGenerator(42))
	defer g.Close()
	st := T(g.State())
	a := vals(t, T(Randn([]int64{5}, g, WithDType(Double))))
	ok(t, g.SetState(st))
	b := vals(t, T(Randn([]int64{5}, g, WithDType(Double))))
	if !slices.Equal(a, b) {
		t.Error("restoring the generator state did not repeat the samples")
	}
	g2 := need[*Generator](t)(NewGenerator(42))
	defer g2.Close()
	if c := vals(t, T(Randn([]int64{5}, g2, WithDType(Double)))); !slices.Equal(a, c) {
		t.Error("same seed, different samples")
	}
	u := vals(t, T(Rand([]int64{1000}, g)))
	for _, v := range u {
		if v < 0 || v >= 1 {
			t.Fatalf("Rand sample %v outside [0, 1)", v)
		}
	}
	perm := need[[]int64](t)(T(Randperm(10, g)).Int64s())
	sorted := slices.Clone(perm)
	slices.Sort(sorted)
	for i, v := range sorted {
		if v != int64(i) {
			t.Fatalf("Randperm %v is not a permutation", perm)
		}
	}
	ok(t, ManualSeed(7))
	d := vals(t, T(Randn([]int64{3}, nil)))
	ok(t, ManualSeed(7))
	if e := vals(t, T(Randn([]int64{3}, nil))); !slices.Equal(d, e) {
		t.Error("ManualSeed does not repeat the default generator")
	}
	r := T(Randn([]int64{2}, g, WithRequiresGrad()))
	if !r.RequiresGrad() {
		t.Error("WithRequiresGrad")
	}
	g.Close()
	g.Close() // idempotent
	_, err := Randn([]int64{2}, g)
	wantErr(t, err, "randn", "closed generator")
	_, err = g.State()
	wantErr(t, err, "generator_state", "closed generator")
	var ng *Generator
	_, err = ng.State()
	wantErr(t, err, "generator_state", "nil generator")
	wantErr(t, g2.SetState(T(Zeros([]int64{3}))), "generator_set_state")
}
