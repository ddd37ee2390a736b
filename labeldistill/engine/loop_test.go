package engine

// loop_test.go: the meta-loop is not label-specific. A toy learnable, one bias image added
// to every base image (the labels stay the base examples' true one-hot labels), goes through
// the same loop: it is trained, kept by validation, checkpointed and resumed bit for bit,
// and reduced over two ranks (child processes of this test binary, over c10d).

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/internal/testkit"
	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/dist"
	"github.com/ldtorch/ldtorch/torch/fileio/npz"
)

// biasImage is the toy learnable: b (1, C, H, W), starting at 0, added to every base image,
// with its own Adam.
type biasImage struct {
	b   *torch.Tensor
	opt *torch.Adam
}

func newBiasImage(in *Inputs) ([]learnable, error) {
	s := in.ds.Shape
	b, err := torch.Zeros([]int64{1, s[0], s[1], s[2]}, torch.OnDevice(in.dev), torch.WithRequiresGrad())
	if err != nil {
		return nil, err
	}
	torch.Escape(b)
	opt, err := torch.NewAdam([]*torch.Tensor{b}, torch.AdamOpts{LR: 0.01, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8})
	if err != nil {
		b.Free()
		return nil, err
	}
	return []learnable{&biasImage{b: b, opt: opt}}, nil
}

func (v *biasImage) name() string            { return "bias" }
func (v *biasImage) params() []*torch.Tensor { return []*torch.Tensor{v.b} }
func (v *biasImage) batch(_, x, y *torch.Tensor, detach bool) (*torch.Tensor, *torch.Tensor, error) {
	b := v.b
	if detach {
		var err error
		if b, err = b.Detach(); err != nil {
			return nil, nil, err
		}
	}
	x, err := x.Add(b)
	return x, y, err
}
func (v *biasImage) step(grads []*torch.Tensor) error { return v.opt.StepWith(grads) }
func (v *biasImage) state() []namedTensor {
	return []namedTensor{{"bias", v.b}, {"bias.exp_avg", v.opt.ExpAvg[0]}, {"bias.exp_avg_sq", v.opt.ExpAvgSq[0]}}
}
func (v *biasImage) optimizers() []namedAdam { return []namedAdam{{"bias", v.opt}} }
func (v *biasImage) close() {
	v.opt.Close()
	v.b.Free()
}

func withLearn(f func(*Inputs) ([]learnable, error)) RunOption {
	return func(o *Options) { o.Learn = f }
}

// toyConfig: LD on 20 MNIST base examples, 3 epochs of 8 meta-steps, validation after each.
func toyConfig() config.Config {
	cfg := testkit.SmallConfig(config.MethodLD)
	cfg.CheckpointEvery = 4
	return cfg
}

// TestLoopLearnsAToyLearnable: the loop trains the bias, keeps the validated images (base
// images plus the bias) and the fixed one-hot labels, and a run cancelled mid-epoch
// resumes to the uninterrupted result bit for bit.
func TestLoopLearnsAToyLearnable(t *testing.T) {
	testkit.RestoreThreads(t)
	ds := testkit.SmallDataset(t)
	cfg := toyConfig()
	full, err := testDistill(context.Background(), cfg, WithData(ds), withLearn(newBiasImage))
	if err != nil {
		t.Fatal(err)
	}
	if full.MetaSteps != 24 || len(full.Validations) != 3 {
		t.Fatalf("%d meta-steps, %d validations; want 24 and 3", full.MetaSteps, len(full.Validations))
	}
	// The kept images are the base images plus one bias image, which has moved from 0.
	size := ds.ImageSize()
	var bias []float64
	for j := 0; j < size; j++ {
		bias = append(bias, float64(full.BaseImages[j]-ds.Base.Images[j]))
	}
	moved := 0.0
	for i := 0; i < ds.Base.N; i++ {
		for j := 0; j < size; j++ {
			d := float64(full.BaseImages[i*size+j] - ds.Base.Images[i*size+j])
			if math.Abs(d-bias[j]) > 1e-5 {
				t.Fatalf("image %d pixel %d: offset %g, image 0's %g: not one bias for all", i, j, d, bias[j])
			}
			moved = max(moved, math.Abs(d))
		}
	}
	if moved == 0 {
		t.Fatal("the bias never moved: the meta-gradient did not reach it")
	}
	// The labels are the fixed one-hot true labels.
	for i, c := range ds.Base.Labels {
		for k := 0; k < ds.Classes; k++ {
			want := float32(0)
			if int64(k) == c {
				want = 1
			}
			if full.Labels[i*ds.Classes+k] != want {
				t.Fatalf("label %d,%d = %v, want %v", i, k, full.Labels[i*ds.Classes+k], want)
			}
		}
	}
	t.Logf("bias moved by up to %.3g; test accuracy %.2f %%", moved, full.TestMean)

	dir := t.TempDir()
	ctx, progress := cancelAt(10, nil)
	if _, err := testDistill(ctx, cfg, WithData(ds), withLearn(newBiasImage), progress, WithCheckpointDir(dir)); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	_, meta, err := readSnapshot(filepath.Join(dir, "ckpt-000000010.npz"))
	if err != nil || meta.OptimizerSteps["bias"] != 10 {
		t.Fatalf("cancelled at 10: checkpoint meta %+v, %v", meta, err)
	}
	resumed, err := testDistill(context.Background(), cfg, WithData(ds), withLearn(newBiasImage), WithResume(dir))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(resumed.BaseImages, full.BaseImages) || !slices.Equal(resumed.TestAccuracies, full.TestAccuracies) ||
		!slices.Equal(resumed.Validations, full.Validations) {
		t.Fatalf("resumed run differs: test %v against %v", resumed.TestAccuracies, full.TestAccuracies)
	}
}

// TestLoopReducesAToyLearnableOverTwoRanks: two ranks (child processes) train the bias
// together; they agree with each other (the loop checks it at every validation) and with
// one process to rounding (the two halves of each batch are summed separately).
func TestLoopReducesAToyLearnableOverTwoRanks(t *testing.T) {
	if out := os.Getenv("LDTORCH_TOY_RANK_OUT"); out != "" {
		toyRankChild(t, out)
		return
	}
	if !torch.DistributedAvailable() {
		t.Skip("this libtorch has no c10d collectives")
	}
	testkit.RestoreThreads(t)
	ds := testkit.SmallDataset(t)
	one, err := testDistill(context.Background(), toyConfig(), WithData(ds), withLearn(newBiasImage))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err = dist.Launch(ctx, dist.LaunchOptions{N: 2, Path: os.Args[0],
		Args:   []string{"-test.run=^TestLoopReducesAToyLearnableOverTwoRanks$", "-test.count=1"},
		Env:    append(os.Environ(), "LDTORCH_TOY_RANK_OUT="+dir, "OMP_NUM_THREADS=1"),
		Stdout: os.Stderr, Stderr: os.Stderr, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	arc, err := npz.ReadFile(filepath.Join(dir, "images.npz"))
	if err != nil {
		t.Fatal(err)
	}
	images, _ := arc.Get("images").Data.([]float32)
	d, i := testkit.MaxAbsDiff32(images, one.BaseImages)
	if d > 1e-4 {
		t.Fatalf("two ranks' images differ from one process's by %g (element %d)", d, i)
	}
	t.Logf("two ranks against one: images within %.2g", d)
}

// toyRankChild is one rank of TestLoopReducesAToyLearnableOverTwoRanks: rank 0 writes the
// kept images into out/images.npz.
func toyRankChild(t *testing.T, out string) {
	g := tJoinRank(t)
	res, err := testDistill(context.Background(), toyConfig(), WithData(testkit.SmallDataset(t)), withLearn(newBiasImage), WithGroup(g))
	if err != nil {
		g.Abort(err)
		t.Fatal(err)
	}
	if g.IsRoot() {
		a, err := npz.New("images", []int{len(res.BaseImages)}, res.BaseImages)
		if err == nil {
			err = npz.WriteFile(filepath.Join(out, "images.npz"), []*npz.Array{a})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
