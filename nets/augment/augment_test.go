package augment

// augment_test.go: every DSA operation's output and VJP against PyTorch 1.13 for a fixed
// parameter draw (testdata/golden/dsa.npz, three- and one-channel images), the draw's
// distributions and ranges, the same seed giving the same batches on every run, the
// per-model form of Apply, float32 and the test device, and argument errors.

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/devicetest"
)

func TestMain(m *testing.M) {
	if _, err := torch.RuntimeInfo(); err != nil {
		fmt.Fprintln(os.Stderr, "augment tests:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func need[V any](tb testing.TB) func(V, error) V {
	return func(v V, err error) V {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
		return v
	}
}

func scoped(tb testing.TB) {
	s := torch.NewScope()
	tb.Cleanup(s.Close)
}

func values(tb testing.TB, t *torch.Tensor) []float64 {
	tb.Helper()
	return need[[]float64](tb)(t.Float64s())
}

// maxRel is max |a − b| / max |b|.
func maxRel(a, b []float64) float64 {
	var d, s float64
	for i := range b {
		d = max(d, math.Abs(a[i]-b[i]))
		s = max(s, math.Abs(b[i]))
	}
	if len(a) != len(b) || math.IsNaN(d) {
		return math.Inf(1)
	}
	return d / math.Max(s, 1e-300)
}

// randImages returns (shape) values of N(0, 1) drawn from a seeded torch generator.
func randImages(tb testing.TB, seed uint64, dt torch.DType, shape ...int64) *torch.Tensor {
	g := need[*torch.Generator](tb)(torch.NewGenerator(seed))
	defer g.Close()
	return need[*torch.Tensor](tb)(torch.Randn(shape, g, torch.WithDType(dt)))
}

func TestOpsMatchPyTorch(t *testing.T) {
	scoped(t)
	fix := need[map[string]*torch.Tensor](t)(torch.Load(filepath.Join("..", "..", "testdata", "golden", "dsa.npz")))
	for _, tag := range []string{"rgb", "grey"} {
		get := func(name string) *torch.Tensor {
			x, found := fix[tag+"_"+name]
			if !found {
				t.Fatalf("dsa.npz has no %s_%s", tag, name)
			}
			return x
		}
		f64 := func(name string) []float64 { return values(t, get(name)) }
		i64 := func(name string) []int64 { return need[[]int64](t)(get(name).Int64s()) }
		var flip []bool
		for _, v := range i64("flip") {
			flip = append(flip, v != 0)
		}
		size := i64("cutsize")
		ops := map[string]func(*torch.Tensor) (*torch.Tensor, error){
			"flip":       func(x *torch.Tensor) (*torch.Tensor, error) { return Flip(x, flip) },
			"scale":      func(x *torch.Tensor) (*torch.Tensor, error) { return Scale(x, f64("sx"), f64("sy")) },
			"rotate":     func(x *torch.Tensor) (*torch.Tensor, error) { return Rotate(x, f64("angle")) },
			"brightness": func(x *torch.Tensor) (*torch.Tensor, error) { return Brightness(x, f64("bright")) },
			"saturation": func(x *torch.Tensor) (*torch.Tensor, error) { return Saturation(x, f64("sat")) },
			"contrast":   func(x *torch.Tensor) (*torch.Tensor, error) { return Contrast(x, f64("con")) },
			"color": func(x *torch.Tensor) (*torch.Tensor, error) {
				return Color(x, f64("bright"), f64("sat"), f64("con"))
			},
			"crop": func(x *torch.Tensor) (*torch.Tensor, error) { return Crop(x, i64("dh"), i64("dw")) },
			"cutout": func(x *torch.Tensor) (*torch.Tensor, error) {
				return Cutout(x, i64("cuth"), i64("cutw"), size[0], size[1])
			},
		}
		for name, op := range ops {
			t.Run(tag+"/"+name, func(t *testing.T) {
				scoped(t)
				T := need[*torch.Tensor](t)
				x := T(get("x").Clone())
				if err := x.SetRequiresGrad(true); err != nil {
					t.Fatal(err)
				}
				y := T(op(x))
				want := get(name + "_out")
				if !slices.Equal(y.Shape(), want.Shape()) {
					t.Fatalf("shape %v, want %v", y.Shape(), want.Shape())
				}
				if d := maxRel(values(t, y), values(t, want)); d > 1e-13 {
					t.Errorf("output differs from PyTorch: max rel %.3g", d)
				}
				gin := need[[]*torch.Tensor](t)(torch.Grad([]*torch.Tensor{y}, []*torch.Tensor{x}, torch.GradOpts{GradOutputs: []*torch.Tensor{get("gout")}}))
				if d := maxRel(values(t, gin[0]), values(t, get(name+"_gin"))); d > 1e-13 {
					t.Errorf("VJP differs from PyTorch: max rel %.3g", d)
				}
			})
		}
	}
}

func TestSaturationLeavesOneChannelUnchanged(t *testing.T) {
	scoped(t)
	x := randImages(t, 1, torch.Float, 5, 1, 28, 28)
	y := need[*torch.Tensor](t)(Saturation(x, []float64{0, 0.3, 1, 1.7, 2}))
	if !slices.Equal(values(t, y), values(t, x)) {
		t.Errorf("saturation changed a one-channel image")
	}
	// Three channels: factor 0 makes every pixel grey (its channels equal their mean).
	x3 := randImages(t, 2, torch.Double, 2, 3, 4, 4)
	g := values(t, need[*torch.Tensor](t)(Saturation(x3, []float64{0, 0})))
	for i := 0; i < 2*16; i++ {
		n, p := i/16, i%16
		a, b, c := g[n*48+p], g[n*48+16+p], g[n*48+32+p]
		if math.Abs(a-b) > 1e-15 || math.Abs(a-c) > 1e-15 {
			t.Fatalf("saturation 0 left pixel %d coloured: %g %g %g", i, a, b, c)
		}
	}
}

// draws returns the first k draws of d for shape from a generator seeded with seed.
func draws(t *testing.T, d DSA, seed uint64, k int, shape ...int64) []Draw {
	t.Helper()
	g := need[*torch.Generator](t)(torch.NewGenerator(seed))
	defer g.Close()
	out := make([]Draw, k)
	for i := range out {
		out[i] = need[Draw](t)(d.Draw(g, shape))
	}
	return out
}

func TestDrawRanges(t *testing.T) {
	d := Default()
	only := func(o Op) DSA { e := d; e.Ops = []Op{o}; return e }
	const n = 4000
	for _, hw := range []int64{28, 32} {
		shape := []int64{n, 3, hw, hw}
		// flip: about half the images
		f := draws(t, only(OpFlip), 1, 1, shape...)[0]
		flips := 0
		for _, b := range f.Flip {
			if b {
				flips++
			}
		}
		if len(f.Flip) != n || flips < n*45/100 || flips > n*55/100 {
			t.Errorf("%d flips of %d", flips, len(f.Flip))
		}
		within := func(what string, v []float64, lo, hi float64) {
			t.Helper()
			if len(v) != n {
				t.Fatalf("%s: %d values for %d images", what, len(v), n)
			}
			a, b := slices.Min(v), slices.Max(v)
			if a < lo || b > hi || a > lo+0.01*(hi-lo) || b < hi-0.01*(hi-lo) {
				t.Errorf("%s: values span [%g, %g], want all of [%g, %g]", what, a, b, lo, hi)
			}
		}
		s := draws(t, only(OpScale), 2, 1, shape...)[0]
		within("scale x", s.ScaleX, 1/1.2, 1.2)
		within("scale y", s.ScaleY, 1/1.2, 1.2)
		if slices.Equal(s.ScaleX, s.ScaleY) {
			t.Errorf("scale: the two axes drew the same factors")
		}
		r := draws(t, only(OpRotate), 3, 1, shape...)[0]
		within("angle", r.Angle, -15*math.Pi/180, 15*math.Pi/180)
		c := draws(t, only(OpColor), 4, 1, shape...)[0]
		within("brightness", c.Brightness, -0.5, 0.5)
		within("saturation", c.Saturation, 0, 2)
		within("contrast", c.Contrast, 0.5, 1.5)
		// crop: shifts of −4…4 pixels (int(28·0.125 + 0.5) = int(32·0.125 + 0.5) = 4), each
		// value drawn
		cr := draws(t, only(OpCrop), 5, 1, shape...)[0]
		for _, v := range [][]int64{cr.ShiftH, cr.ShiftW} {
			seen := map[int64]int{}
			for _, s := range v {
				seen[s]++
			}
			if len(seen) != 9 || seen[-4] == 0 || seen[4] == 0 || len(v) != n {
				t.Errorf("%d×%d crop shifts: %v", hw, hw, seen)
			}
		}
		// cutout: sides int(side/2 + 0.5) (14 for 28, 16 for 32, even), centres 0…side
		cu := draws(t, only(OpCutout), 6, 1, shape...)[0]
		if cu.CutSizeH != hw/2 || cu.CutSizeW != hw/2 {
			t.Errorf("%d×%d cutout side %d×%d", hw, hw, cu.CutSizeH, cu.CutSizeW)
		}
		for _, v := range [][]int64{cu.CutH, cu.CutW} {
			if slices.Min(v) != 0 || slices.Max(v) != hw {
				t.Errorf("%d×%d cutout centres span %d…%d, want 0…%d", hw, hw, slices.Min(v), slices.Max(v), hw)
			}
		}
	}
	// An odd cutout side (13·0.5 + 0.5 = 7) has centres 0…12.
	cu := draws(t, only(OpCutout), 7, 1, 2000, 1, 13, 13)[0]
	if cu.CutSizeH != 7 || slices.Max(cu.CutH) != 12 || slices.Min(cu.CutH) != 0 {
		t.Errorf("13×13 cutout: side %d, centres %d…%d", cu.CutSizeH, slices.Min(cu.CutH), slices.Max(cu.CutH))
	}
	// Every operation is drawn, about equally often.
	count := map[Op]int{}
	for _, dr := range draws(t, d, 8, 600, 2, 3, 32, 32) {
		count[dr.Op]++
	}
	for _, o := range AllOps {
		if count[o] < 60 || count[o] > 140 {
			t.Errorf("operation %v drawn %d times in 600 batches", o, count[o])
		}
	}
}

func TestSameSeedSameBatches(t *testing.T) {
	scoped(t)
	d := Default()
	x := randImages(t, 9, torch.Float, 16, 3, 32, 32)
	run := func(seed uint64) (ops []Op, out [][]float64) {
		g := need[*torch.Generator](t)(torch.NewGenerator(seed))
		defer g.Close()
		for i := 0; i < 24; i++ {
			sc := torch.NewScope()
			dr := need[Draw](t)(d.Draw(g, x.Shape()))
			ops = append(ops, dr.Op)
			out = append(out, values(t, need[*torch.Tensor](t)(dr.Apply(x))))
			sc.Close()
		}
		return ops, out
	}
	opsA, a := run(7)
	opsB, b := run(7)
	if !slices.Equal(opsA, opsB) || !reflect.DeepEqual(a, b) {
		t.Fatalf("seed 7 gave different batches on two runs")
	}
	opsC, c := run(8)
	if slices.Equal(opsA, opsC) || reflect.DeepEqual(a, c) {
		t.Errorf("seeds 7 and 8 gave the same batches")
	}
	// The draws come from libtorch's CPU generator alone (nothing seeded from the clock
	// or process state): seed 7's first operations are fixed.
	want := []Op{OpRotate, OpCutout, OpScale, OpCutout, OpFlip, OpColor}
	if !slices.Equal(opsA[:len(want)], want) {
		t.Errorf("seed 7's first operations %v, want %v", opsA[:len(want)], want)
	}
	// Apply is Draw then Draw.Apply.
	g := need[*torch.Generator](t)(torch.NewGenerator(7))
	defer g.Close()
	for i := 0; i < 6; i++ {
		y := values(t, need[*torch.Tensor](t)(d.Apply(g, x)))
		if !slices.Equal(y, a[i]) {
			t.Fatalf("batch %d: Apply differs from Draw + Draw.Apply", i)
		}
	}
}

func TestApplyPerModel(t *testing.T) {
	scoped(t)
	T := need[*torch.Tensor](t)
	d := Default()
	x := randImages(t, 10, torch.Double, 5, 4, 1, 28, 28) // 5 models' batches of 4
	g := need[*torch.Generator](t)(torch.NewGenerator(11))
	defer g.Close()
	y := T(d.Apply(g, x))
	if !slices.Equal(y.Shape(), x.Shape()) {
		t.Fatalf("shape %v, want %v", y.Shape(), x.Shape())
	}
	ref := need[*torch.Generator](t)(torch.NewGenerator(11))
	defer ref.Close()
	ops := map[Op]bool{}
	for m := int64(0); m < 5; m++ {
		xm := T(x.Select(0, m))
		dr := need[Draw](t)(d.Draw(ref, xm.Shape()))
		ops[dr.Op] = true
		if !slices.Equal(values(t, T(y.Select(0, m))), values(t, T(dr.Apply(xm)))) {
			t.Errorf("model %d: not its own draw", m)
		}
	}
	if len(ops) < 2 {
		t.Errorf("5 models all drew %v: one draw shared", ops)
	}
}

func TestDeviceFloat32(t *testing.T) {
	dev := devicetest.Device(t)
	scoped(t)
	T := need[*torch.Tensor](t)
	x64 := randImages(t, 12, torch.Double, 6, 3, 32, 32)
	x32 := T(T(x64.ToDType(torch.Float)).To(dev))
	d := Default()
	for _, o := range AllOps {
		e := d
		e.Ops = []Op{o}
		dr := draws(t, e, 13, 1, x64.Shape()...)[0]
		want := values(t, T(dr.Apply(x64)))
		y := T(dr.Apply(x32))
		if y.DType() != torch.Float || y.Device() != dev {
			t.Errorf("%v: result %v on %v, want float32 on %v", o, y.DType(), y.Device(), dev)
		}
		if r := maxRel(values(t, y), want); r > 1e-5 {
			t.Errorf("%v: float32 on %v differs from float64 by %.3g", o, dev, r)
		}
	}
}

func TestErrors(t *testing.T) {
	scoped(t)
	T := need[*torch.Tensor](t)
	x := randImages(t, 14, torch.Float, 2, 3, 8, 8)
	g := need[*torch.Generator](t)(torch.NewGenerator(1))
	defer g.Close()
	ints := T(torch.FromInt64(make([]int64, 2*3*8*8), 2, 3, 8, 8))
	freed := T(x.Clone())
	freed.Free()
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"nil generator", second(Default().Apply(nil, x)), "generator"},
		{"3-D images", second(Default().Apply(g, T(x.Select(0, 0)))), "(N, C, H, W)"},
		{"no operations", second(DSA{Ops: []Op{}}.Apply(g, x)), "no operations"},
		{"unknown operation", second(DSA{Ops: []Op{Op(9)}}.Apply(g, x)), "unknown operation"},
		{"short parameters", second(Flip(x, []bool{true})), "1 parameters for 2 images"},
		{"mismatched parameters", second(Scale(x, []float64{1, 1}, []float64{1})), "1 parameters for 2 images"},
		{"integer images", second(Brightness(ints, []float64{0, 0})), "float32 or float64"},
		{"freed images", second(Rotate(freed, []float64{0, 0})), "freed"},
		{"negative cutout", second(Cutout(x, []int64{1, 1}, []int64{1, 1}, -1, 2)), "negative"},
		{"color lengths", second(Color(x, []float64{0, 0}, []float64{1}, []float64{1, 1})), "1 parameters"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: error %v, want one mentioning %q", c.name, c.err, c.want)
		}
	}
}

func second[V any](_ V, err error) error { return err }
