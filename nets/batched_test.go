package nets

// batched_test.go: Batched against M separate Nets in float64, in both body modes:
// forward outputs (per-model and shared inputs, training and evaluation mode), gradients of
// the summed loss, BatchNorm running statistics, and input errors.

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/ldtorch/ldtorch/torch"
)

// maxRel returns max |a − b| / max(max |b|, tiny).
func maxRel(tb testing.TB, a, b *torch.Tensor) float64 {
	tb.Helper()
	x, y := values(tb, a), values(tb, b)
	if len(x) != len(y) {
		tb.Fatalf("sizes %d and %d", len(x), len(y))
	}
	var d, s float64
	for i := range x {
		d = max(d, math.Abs(x[i]-y[i]))
		s = max(s, math.Abs(y[i]))
	}
	return d / math.Max(s, 1e-300)
}

// twinModels draws m float64 models of n (generator seed 10+i) twice: one set for Batched,
// one for the reference Nets.
func twinModels(t *testing.T, n *Net, m int) (p, buf, refP, refBuf [][]*torch.Tensor) {
	t.Helper()
	draw := func() (ps, bs [][]*torch.Tensor) {
		for i := 0; i < m; i++ {
			g := need[*torch.Generator](t)(torch.NewGenerator(uint64(10 + i)))
			ps = append(ps, need[[]*torch.Tensor](t)(InitParams(n.Params(), g, torch.CPU, torch.Double)))
			bs = append(bs, need[[]*torch.Tensor](t)(NewBuffers(n.Buffers, torch.CPU, torch.Double)))
			g.Close()
		}
		return ps, bs
	}
	p, buf = draw()
	refP, refBuf = draw()
	t.Cleanup(func() {
		for i := 0; i < m; i++ {
			torch.FreeAll(p[i])
			torch.FreeAll(buf[i])
			torch.FreeAll(refP[i])
			torch.FreeAll(refBuf[i])
		}
	})
	return p, buf, refP, refBuf
}

func TestBatchedMatchesNets(t *testing.T) {
	scoped(t)
	const m = 3
	cases := []struct {
		arch             string
		c, h, w, classes int64
	}{
		{"lenet", 1, 28, 28, 10}, {"lenet", 3, 32, 32, 7}, {"alexnet", 3, 32, 32, 10}, {"resnet", 3, 32, 32, 10},
	}
	for _, c := range cases {
		for _, mode := range []BodyMode{BodyPerModel, BodyGrouped} {
			t.Run(fmt.Sprintf("%s-%dx%d/%v", c.arch, c.h, c.w, mode), func(t *testing.T) {
				scoped(t)
				n := need[*Net](t)(New(c.arch, c.c, c.h, c.w, c.classes))
				bn := need[*Batched](t)(NewBatched(n, m))
				bn.Mode = mode
				p, buf, refP, refBuf := twinModels(t, n, m)
				rng := newRNG(5)
				const batch = 4
				xs := randn64(t, rng, m, batch, c.c, c.h, c.w)  // model i's own batch
				shared := randn64(t, rng, batch, c.c, c.h, c.w) // one batch for all
				probs := need[*torch.Tensor](t)(torch.Softmax(randn64(t, rng, m, batch, c.classes), 2))

				// Training mode, per-model inputs: logits, gradients of Σ_i softCE_i, running stats.
				out := need[*torch.Tensor](t)(bn.Forward(p, buf, xs, true))
				if want := []int64{m, batch, c.classes}; !slices.Equal(out.Shape(), want) {
					t.Fatalf("logits %v, want %v", out.Shape(), want)
				}
				var total *torch.Tensor
				for i := 0; i < m; i++ {
					got := need[*torch.Tensor](t)(out.Select(0, int64(i)))
					pi := need[*torch.Tensor](t)(probs.Select(0, int64(i)))
					li := need[*torch.Tensor](t)(torch.SoftCrossEntropy(got, pi))
					if total == nil {
						total = li
					} else {
						total = need[*torch.Tensor](t)(total.Add(li))
					}
				}
				all := slices.Concat(p...)
				grads := need[[]*torch.Tensor](t)(torch.Grad([]*torch.Tensor{total}, all, torch.GradOpts{}))
				np := len(n.Params())
				for i := 0; i < m; i++ {
					xi := need[*torch.Tensor](t)(xs.Select(0, int64(i)))
					ref := need[*torch.Tensor](t)(n.Forward(refP[i], refBuf[i], xi, true))
					got := need[*torch.Tensor](t)(out.Select(0, int64(i)))
					if d := maxRel(t, got, ref); d > 1e-12 {
						t.Errorf("model %d: training logits differ by %.3g", i, d)
					}
					pi := need[*torch.Tensor](t)(probs.Select(0, int64(i)))
					loss := need[*torch.Tensor](t)(torch.SoftCrossEntropy(ref, pi))
					gRef := need[[]*torch.Tensor](t)(torch.Grad([]*torch.Tensor{loss}, refP[i], torch.GradOpts{}))
					for j := range gRef {
						if d := maxRel(t, grads[i*np+j], gRef[j]); d > 1e-10 {
							t.Errorf("model %d: gradient of %s differs by %.3g", i, n.Params()[j].Name, d)
						}
					}
					for j := range refBuf[i] {
						if d := maxRel(t, buf[i][j], refBuf[i][j]); d > 1e-12 {
							t.Errorf("model %d: running statistic %s differs by %.3g", i, n.Buffers[j].Name, d)
						}
					}
				}

				// Evaluation mode, shared input (in BodyGrouped the first convolution is an
				// ordinary one).
				f := need[*torch.Tensor](t)(bn.Features(p, buf, shared, false))
				if want := []int64{m, batch, n.FeatureDim}; !slices.Equal(f.Shape(), want) {
					t.Fatalf("features %v, want %v", f.Shape(), want)
				}
				fe := need[[]*torch.Tensor](t)(bn.FeaturesEach(p, buf, shared, false))
				le := need[[]*torch.Tensor](t)(bn.ForwardEach(p, buf, shared, false))
				for i := 0; i < m; i++ {
					ref := need[*torch.Tensor](t)(n.Features(refP[i], refBuf[i], shared, false))
					got := need[*torch.Tensor](t)(f.Select(0, int64(i)))
					if d := maxRel(t, got, ref); d > 1e-12 {
						t.Errorf("model %d: shared-input features differ by %.3g", i, d)
					}
					if d := maxRel(t, fe[i], ref); d > 1e-12 {
						t.Errorf("model %d: FeaturesEach differs by %.3g", i, d)
					}
					refL := need[*torch.Tensor](t)(n.Forward(refP[i], refBuf[i], shared, false))
					if d := maxRel(t, le[i], refL); d > 1e-12 {
						t.Errorf("model %d: ForwardEach differs by %.3g", i, d)
					}
				}
			})
		}
	}
}

func TestBatchedInputErrors(t *testing.T) {
	scoped(t)
	n := need[*Net](t)(New("lenet", 1, 28, 28, 10))
	if _, err := NewBatched(n, 0); err == nil {
		t.Error("NewBatched with 0 models: no error")
	}
	for _, mode := range []BodyMode{BodyPerModel, BodyGrouped} {
		bn := need[*Batched](t)(NewBatched(n, 2))
		bn.Mode = mode
		p, buf, _, _ := twinModels(t, n, 2)
		rng := newRNG(1)
		for _, shape := range [][]int64{{3, 2, 1, 28, 28}, {2, 1, 28}, {2, 3, 28, 28}, {2, 2, 1, 32, 32}} {
			x := randn64(t, rng, shape...)
			if err := noPanic(t, "forward", func() error { _, err := bn.Forward(p, buf, x, true); return err }); err == nil {
				t.Errorf("%v: input %v: no error", mode, shape)
			}
		}
		x := randn64(t, rng, 2, 2, 1, 28, 28)
		short := [][]*torch.Tensor{p[0], p[1][:len(p[1])-1]}
		if err := noPanic(t, "forward", func() error { _, err := bn.Forward(short, buf, x, true); return err }); err == nil {
			t.Errorf("%v: a missing head parameter: no error", mode)
		}
		swapped := [][]*torch.Tensor{p[0], slices.Clone(p[1])}
		swapped[1][0], swapped[1][2] = swapped[1][2], swapped[1][0]
		if err := noPanic(t, "forward", func() error { _, err := bn.Forward(swapped, buf, x, true); return err }); err == nil {
			t.Errorf("%v: parameters out of order: no error", mode)
		}
		if err := noPanic(t, "forward", func() error { _, err := bn.Features(p[:1], buf[:1], x, true); return err }); err == nil {
			t.Errorf("%v: one model's parameters for two models: no error", mode)
		}
	}
}
