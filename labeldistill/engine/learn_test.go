package engine

// learn_test.go: what a run learns (Config.Learn, method dd) on real MNIST, end to end:
// learnt images (pixels kept in [0, 1], one-hot labels), images and labels together, and
// method dd (images laid out class by class, learnt step sizes); each run cancelled
// mid-epoch resumes to the uninterrupted result bit for bit; learn "labels" is the label
// distillation of a run that does not say it; two ranks learning images agree with one.

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

// learnConfig is toyConfig (20 MNIST base examples, 3 epochs of 8 meta-steps) learning
// mode: "images", "both" or "dd" (method dd: 2 steps × 2 epochs, one image per class and
// step).
func learnConfig(mode string) config.Config {
	cfg := toyConfig()
	switch mode {
	case "dd":
		cfg.Method, cfg.DDSteps, cfg.DDEpochs = config.MethodDD, 2, 2
	default:
		cfg.Learn = mode
	}
	return cfg
}

func TestLearntImagesEndToEnd(t *testing.T) {
	for _, mode := range []string{"images", "both", "dd"} {
		t.Run(mode, func(t *testing.T) { testLearntImages(t, mode) })
	}
}

func testLearntImages(t *testing.T, mode string) {
	testkit.RestoreThreads(t)
	ds := testkit.SmallDataset(t)
	cfg := learnConfig(mode)
	full, err := testDistill(context.Background(), cfg, WithData(ds))
	if err != nil {
		t.Fatal(err)
	}
	n, classes, size := ds.Base.N, ds.Classes, ds.ImageSize()
	if full.MetaSteps != 24 || len(full.Validations) != 3 || len(full.BaseImages) != n*size {
		t.Fatalf("%d meta-steps, %d validations, %d image values", full.MetaSteps, len(full.Validations), len(full.BaseImages))
	}
	// The images are learnt: none is a base image, and they differ from each other.
	if d, _ := testkit.MaxAbsDiff32(full.BaseImages, ds.Base.Images); d < 0.1 {
		t.Errorf("the kept images are within %g of the base images", d)
	}
	if slices.Equal(full.BaseImages[:size], full.BaseImages[size:2*size]) {
		t.Error("images 0 and 1 are equal")
	}
	switch mode {
	case "images", "both":
		// Normalised pixels of [0, 1]; some at the clamp's bounds after the Adam steps.
		lo, hi := (0-0.1307)/0.3081, (1-0.1307)/0.3081
		for i, v := range full.BaseImages {
			if float64(v) < lo-1e-5 || float64(v) > hi+1e-5 {
				t.Fatalf("image value %d is %v, outside the normalised [0, 1] (%.4f, %.4f)", i, v, lo, hi)
			}
		}
		if !slices.Equal(full.BaseClasses, ds.Base.Labels) || !slices.Equal(full.BaseIndices, ds.BaseIndices) {
			t.Error("the base classes or indices are not the base examples'")
		}
	case "dd":
		if full.T != 4 || len(full.StepLRs) != 4 {
			t.Fatalf("T %d, step sizes %v: want 4 of each", full.T, full.StepLRs)
		}
		moved := false
		for _, lr := range full.StepLRs {
			if !(lr > 0) || math.IsInf(float64(lr), 0) {
				t.Fatalf("step sizes %v", full.StepLRs)
			}
			moved = moved || math.Abs(float64(lr)-0.02) > 1e-4
		}
		if !moved || len(full.Resets) != 0 || full.BaseIndices != nil {
			t.Errorf("step sizes %v (from 0.02), resets %v, base indices %v", full.StepLRs, full.Resets, full.BaseIndices)
		}
		if want := ddClasses(n, 2, classes); !slices.Equal(full.BaseClasses, want) {
			t.Errorf("classes %v, want %v", full.BaseClasses, want)
		}
	}
	// Labels: one-hot base classes unless learnt (both).
	for i, c := range full.BaseClasses {
		row := full.Labels[i*classes : (i+1)*classes]
		if mode == "both" {
			if row[c] == 1 || math.Abs(float64(sum32(row))-1) > 1e-5 {
				t.Fatalf("learnt label row %d: %v", i, row)
			}
			continue
		}
		for k, v := range row {
			if (k == int(c)) != (v == 1) || (v != 0 && v != 1) {
				t.Fatalf("label row %d is %v, want one-hot %d", i, row, c)
			}
		}
	}
	t.Logf("%s: test accuracy %.2f%% (T %d), best validation %.2f%%", mode, full.TestMean, full.T, full.BestValidation.Accuracy)

	// Cancelled after meta-step 10 (mid-epoch), checkpointed, resumed: the same run.
	dir := t.TempDir()
	ctx, progress := cancelAt(10, nil)
	if _, err := testDistill(ctx, cfg, WithData(ds), progress, WithCheckpointDir(dir)); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "ckpt-000000010.npz")); err != nil {
		t.Fatalf("no checkpoint at the cancellation: %v", err)
	}
	resumed, err := testDistill(context.Background(), cfg, WithData(ds), WithResume(dir))
	if err != nil {
		t.Fatal(err)
	}
	if !testkit.SameBits(resumed.BaseImages, full.BaseImages) || !testkit.SameBits(resumed.Labels, full.Labels) ||
		!testkit.SameBits(resumed.StepLRs, full.StepLRs) || !slices.Equal(resumed.TestAccuracies, full.TestAccuracies) ||
		!slices.Equal(resumed.Validations, full.Validations) {
		t.Fatalf("resumed run differs: test %v against %v", resumed.TestAccuracies, full.TestAccuracies)
	}
}

func sum32(v []float32) float32 {
	var s float32
	for _, x := range v {
		s += x
	}
	return s
}

// TestLearnLabelsIsLabelDistillation: learn "labels" and learn unset are the labels
// learnable alone, bit for bit.
func TestLearnLabelsIsLabelDistillation(t *testing.T) {
	testkit.RestoreThreads(t)
	ds := testkit.SmallDataset(t)
	cfg := toyConfig()
	cfg.Epochs = 1
	oldStyle := func(in *Inputs) ([]learnable, error) {
		y, err := newLabels(in.ds.Base.N, in.ds.Classes, in.cfg, in.dev)
		return []learnable{y}, err
	}
	ref, err := testDistill(context.Background(), cfg, WithData(ds), withLearn(oldStyle))
	if err != nil {
		t.Fatal(err)
	}
	for _, learn := range []string{"", config.LearnLabels} {
		c := cfg
		c.Learn = learn
		res, err := testDistill(context.Background(), c, WithData(ds))
		if err != nil {
			t.Fatal(err)
		}
		if res.Config.Learn != config.LearnLabels || !testkit.SameBits(res.Labels, ref.Labels) || !testkit.SameBits(res.BaseImages, ds.Base.Images) ||
			!slices.Equal(res.TestAccuracies, ref.TestAccuracies) || res.StepLRs != nil {
			t.Errorf("learn %q: not the labels learnable's run (learn resolved to %q)", learn, res.Config.Learn)
		}
	}
}

// TestLearntImagesOverTwoRanks: two ranks (child processes) learn images together; they
// agree with each other (checked at every validation) and with one process to rounding.
func TestLearntImagesOverTwoRanks(t *testing.T) {
	if out := os.Getenv("LDTORCH_IMAGES_RANK_OUT"); out != "" {
		imagesRankChild(t, out)
		return
	}
	if !torch.DistributedAvailable() {
		t.Skip("this libtorch has no c10d collectives")
	}
	testkit.RestoreThreads(t)
	one, err := testDistill(context.Background(), learnConfig("images"), WithData(testkit.SmallDataset(t)))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err = dist.Launch(ctx, dist.LaunchOptions{N: 2, Path: os.Args[0],
		Args:   []string{"-test.run=^TestLearntImagesOverTwoRanks$", "-test.count=1"},
		Env:    append(os.Environ(), "LDTORCH_IMAGES_RANK_OUT="+dir, "OMP_NUM_THREADS=1"),
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
	if moved, _ := testkit.MaxAbsDiff32(images, testkit.SmallDataset(t).Base.Images); moved < 0.1 {
		t.Fatalf("the two ranks' images did not move")
	}
	t.Logf("two ranks against one: learnt images within %.2g", d)
}

// imagesRankChild is one rank of TestLearntImagesOverTwoRanks: rank 0 writes the kept
// images into out/images.npz.
func imagesRankChild(t *testing.T, out string) {
	g := tJoinRank(t)
	res, err := testDistill(context.Background(), learnConfig("images"), WithData(testkit.SmallDataset(t)), WithGroup(g))
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
