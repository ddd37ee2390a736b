package nets

// golden_test.go: nets.LeNet against PyTorch's (testdata/golden, written by
// scripts/golden/make_fixtures.py with conv → relu → pool order): logits, the inner
// gradients and the second-order label gradient must agree to float64 rounding.

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/fileio/npz"
)

func goldenTensor(t *testing.T, arc *npz.Archive, name string) *torch.Tensor {
	t.Helper()
	a := arc.Get(name)
	if a == nil {
		t.Fatalf("fixture has no %q", name)
	}
	shape := make([]int64, len(a.Shape))
	for i, d := range a.Shape {
		shape[i] = int64(d)
	}
	switch d := a.Data.(type) {
	case []float64:
		return torch.Must(torch.FromFloat64(d, shape...))
	case []int64:
		return torch.Must(torch.FromInt64(d, shape...))
	}
	t.Fatalf("%s: unexpected dtype %s", name, a.DType)
	return nil
}

func maxRelDiff(t *testing.T, got, want *torch.Tensor) float64 {
	g, w := torch.Must(got.Float64s()), torch.Must(want.Float64s())
	if len(g) != len(w) {
		t.Fatalf("size %d vs %d", len(g), len(w))
	}
	var diff, scale float64
	for i := range g {
		diff = math.Max(diff, math.Abs(g[i]-w[i]))
		scale = math.Max(scale, math.Abs(w[i]))
	}
	return diff / scale
}

func TestLeNetMatchesPyTorchGolden(t *testing.T) {
	arc, err := npz.ReadFile(filepath.Join("..", "testdata", "golden", "lenet_meta.npz"))
	if err != nil {
		t.Fatal(err)
	}
	s := torch.NewScope()
	defer s.Close()
	net, err := New("lenet", 1, 28, 28, 10)
	if err != nil {
		t.Fatal(err)
	}
	params := make([]*torch.Tensor, 10)
	for i := range params {
		params[i] = goldenTensor(t, arc, "p"+string(rune('0'+i)))
		if err := params[i].SetRequiresGrad(true); err != nil {
			t.Fatal(err)
		}
	}
	xb, yb := goldenTensor(t, arc, "xb"), goldenTensor(t, arc, "yb")
	xt, yt := goldenTensor(t, arc, "xt"), goldenTensor(t, arc, "yt")
	if err := yb.SetRequiresGrad(true); err != nil {
		t.Fatal(err)
	}
	alpha := arc.Get("alpha").Data.([]float64)[0]

	logits := torch.Must(net.Forward(params, nil, xb, true))
	if d := maxRelDiff(t, logits, goldenTensor(t, arc, "logits_b")); d > 1e-12 {
		t.Errorf("logits differ from PyTorch: max rel diff %g", d)
	}
	inner := torch.Must(torch.SoftCrossEntropy(logits, yb))
	g := torch.Must(torch.Grad([]*torch.Tensor{inner}, params, torch.GradOpts{CreateGraph: true}))
	for i := range g {
		if d := maxRelDiff(t, g[i], goldenTensor(t, arc, "g"+string(rune('0'+i)))); d > 1e-10 {
			t.Errorf("inner gradient %d differs: max rel diff %g", i, d)
		}
	}
	fast := make([]*torch.Tensor, len(g))
	for i := range g {
		fast[i] = torch.Must(params[i].Sub(torch.Must(g[i].MulScalar(alpha))))
	}
	outer := torch.Must(torch.CrossEntropy(torch.Must(net.Forward(fast, nil, xt, true)), yt))
	dyb := torch.Must(torch.Grad([]*torch.Tensor{outer}, []*torch.Tensor{yb}, torch.GradOpts{}))
	if d := maxRelDiff(t, dyb[0], goldenTensor(t, arc, "dyb")); d > 1e-9 {
		t.Errorf("second-order label gradient differs: max rel diff %g", d)
	}
}
