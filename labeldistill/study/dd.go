package study

// dd.go: the sensitivity studies of Wang et al.'s DD on a method dd artifact (the paper's
// supplementary tables "Sensitivity of original DD to ..."): every setting trains fresh
// networks with DD's own recipe (Wang et al.'s initialisation, plain gradient steps with
// the learnt step sizes, the images in blocks of k = N/dd_steps in their fixed order;
// engine.DDSchedule) with one thing changed:
//
//   - steps: the first K steps with their learnt step sizes, the others at step size 0;
//     K > T: T learnt steps and K − T more at the mean learnt step size, continuing
//     through the blocks in order (the paper: 10, 15, 20, 25, 30 of T = 30, and 35);
//   - lr: the mean learnt step size at every step (rounded to float32, the step sizes'
//     own precision);
//   - order: the images shuffled within each epoch (every epoch a fresh permutation of the
//     N images cut into dd_steps blocks) or across epochs (the N × dd_epochs visits
//     permuted together and cut into T blocks, so an image may come twice in one epoch and
//     not at all in another), a fresh shuffle per model;
//   - arch: another architecture trained with the learnt step sizes and fixed order.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/labeldistill/engine"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
)

// DDKinds are the studies that train a method dd artifact with DD's own recipe.
var DDKinds = []string{Steps, LR, Order, Arch}

// Orders of the images in the order study (Setting.Order).
const (
	OrderFixed  = "fixed"
	OrderWithin = "shuffled within epochs"
	OrderAcross = "shuffled across epochs"
)

// Step sizes of the dd settings (Setting.StepSizes; the steps study's are "learnt, first
// K of T" and "learnt, then N at the mean").
const (
	StepSizesLearnt = "learnt"
	StepSizesMean   = "mean"
)

// DDExtraSteps is how many steps beyond T the steps study adds by default (the paper's 35 of
// 30), at the mean learnt step size.
const DDExtraSteps = 5

// isDD reports whether art is a method dd artifact with its step sizes and dd_steps.
func isDD(art *artifact.Artifact) bool {
	return art.StepLRs != nil && art.Report != nil && art.Report.Config.Method == config.MethodDD && art.Report.Config.DDSteps > 0
}

// DDDefaultSteps are the steps study's default step counts for T learnt steps: the paper's
// 10, 15, 20, 25, 30 and 35 of T = 30, as fractions of T (⅓, ½, ⅔, ⅚, 1; rounded, at least
// 1, without repeats) and T + DDExtraSteps.
func DDDefaultSteps(T int) []int {
	var out []int
	for j := 2; j <= 6; j++ {
		k := max(1, int(math.Round(float64(T*j)/6)))
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return append(out, T+DDExtraSteps)
}

// ddSettings are the settings of a dd study (DDKinds) of a method dd artifact.
func ddSettings(kind string, art *artifact.Artifact, sc Config, st *Study) ([]Setting, error) {
	cfg := art.Report.Config
	T := len(art.StepLRs)
	learnt := make([]float64, T)
	mean := 0.0
	for i, v := range art.StepLRs {
		learnt[i] = float64(v)
		mean += learnt[i]
	}
	// The mean at the step sizes' own precision (float32, as distilled.npz stores them).
	mean = float64(float32(mean / float64(T)))
	if kind != Steps && len(sc.Steps) > 0 {
		return nil, fmt.Errorf("steps: the %s study of a method dd artifact trains its %d learnt steps; step counts apply to its steps study", kind, T)
	}
	base := Setting{Labels: "distilled", Arch: cfg.EvalArch, Optimizer: "sgd", Steps: T, Recipe: artifact.RecipeDD,
		StepSizes: StepSizesLearnt, Order: OrderFixed, StepLRs: learnt}
	st.Notes = append(st.Notes, fmt.Sprintf("method dd's own recipe: %s's initialisation by Wang et al., plain gradient steps with the %d learnt step sizes (mean %.4g), "+
		"the images in %d blocks of %d in their fixed order; each setting changes one of these", cfg.EvalArch, T, mean, cfg.DDSteps, int(art.Shape[0])/cfg.DDSteps))
	var settings []Setting
	switch kind {
	case Steps:
		counts := sc.Steps
		if len(counts) == 0 && len(sc.Deltas) > 0 {
			for _, d := range sc.Deltas {
				if T+d < 1 {
					st.Notes = append(st.Notes, fmt.Sprintf("T%+d = %d steps skipped (below 1)", d, T+d))
					continue
				}
				counts = append(counts, T+d)
			}
		}
		if len(counts) == 0 {
			counts = DDDefaultSteps(T)
		}
		for _, k := range counts {
			x := base
			delta := k - T
			x.Steps, x.Delta, x.Label = k, &delta, strconv.Itoa(k)
			switch {
			case k < T:
				x.StepLRs = learnt[:k]
				x.StepSizes = fmt.Sprintf("learnt, first %d of %d", k, T)
			case k > T:
				x.StepLRs = slices.Clone(learnt)
				for len(x.StepLRs) < k {
					x.StepLRs = append(x.StepLRs, mean)
				}
				x.LR = mean
				x.StepSizes = fmt.Sprintf("learnt, then %d at the mean", k-T)
				x.Label = fmt.Sprintf("%d (%d at the mean)", k, k-T)
			}
			settings = append(settings, x)
		}
		st.Notes = append(st.Notes, fmt.Sprintf("K < T = %d: the first K steps with their learnt step sizes (the other T − K at step size 0, which leaves a network unchanged, so they are not run); "+
			"K > T: the T learnt steps, then K − T more at the mean step size %.4g, the blocks continuing in order", T, mean))
	case LR:
		x := base
		x.Label = "learnt step sizes"
		y := base
		y.StepLRs = make([]float64, T)
		for i := range y.StepLRs {
			y.StepLRs[i] = mean
		}
		y.StepSizes, y.LR, y.Label = StepSizesMean, mean, fmt.Sprintf("mean step size (%.4g) at every step", mean)
		settings = append(settings, x, y)
	case Order:
		for _, o := range []string{OrderFixed, OrderWithin, OrderAcross} {
			x := base
			x.Order, x.Label = o, o+" order"
			if o != OrderFixed {
				x.Label = o
			}
			settings = append(settings, x)
		}
		st.Notes = append(st.Notes, "shuffled: a fresh shuffle per model; within epochs, every epoch a permutation of the images cut into blocks; across epochs, all the epochs' visits permuted together")
	case Arch:
		for _, a := range orDefault(sc.Archs, DefaultStudyArchs) {
			if n, err := nets.New(a, art.Shape[1], art.Shape[2], art.Shape[3], int64(art.Classes)); err != nil {
				if len(sc.Archs) > 0 {
					return nil, fmt.Errorf("archs: %s does not fit %d×%d×%d images: %v", a, art.Shape[1], art.Shape[2], art.Shape[3], err)
				}
				st.Notes = append(st.Notes, fmt.Sprintf("%s left out: it needs colour 32×32 images, these are %d×%d×%d", a, art.Shape[1], art.Shape[2], art.Shape[3]))
				continue
			} else {
				n.Close() // built to check it
			}
			x := base
			x.Arch, x.Label = a, a
			if a == cfg.Arch {
				x.Label = a + " (distilled with it)"
			}
			settings = append(settings, x)
		}
		st.Notes = append(st.Notes, fmt.Sprintf("the images were distilled with %s; no true-label baseline (the images are learnt for one-hot labels of their classes)", cfg.Arch))
	default:
		return nil, fmt.Errorf("study: %s is not a study of method dd", kind)
	}
	return settings, nil
}

// ddOrder is model i's order of the images for the order study: the batches of its steps
// (len(sch.Batches) blocks per epoch, T steps), the images of sch's blocks shuffled, or sch's
// own batches for the fixed order.
func ddOrder(order string, sch *train.Schedule, T int, seed uint64, model int) [][]int64 {
	if order == OrderFixed {
		return sch.Batches
	}
	var ids []int64
	for _, b := range sch.Batches {
		ids = append(ids, b...)
	}
	k := len(sch.Batches[0])
	rng := rand.New(rand.NewPCG(train.Seed(seed, "study-order "+order, model), 0x0d3e))
	var visits []int64
	switch order {
	case OrderWithin:
		for len(visits) < T*k {
			for _, j := range rng.Perm(len(ids)) {
				visits = append(visits, ids[j])
			}
		}
	case OrderAcross:
		var all []int64
		for len(all) < T*k {
			all = append(all, ids...)
		}
		for _, j := range rng.Perm(len(all)) {
			visits = append(visits, all[j])
		}
	}
	out := make([][]int64, T)
	for t := range out {
		out[t] = visits[t*k : (t+1)*k]
	}
	return out
}

// ddEvaluate trains ec.Models fresh networks (arch s.Arch) with DD's recipe and s's step
// sizes and order, and scores them on test: model i starts from the same initialisation as
// `ldtorch evaluate`'s model i (seed Seed(ec.Seed, "evaluate", i)), so a setting equal to
// the artifact's own recipe gives evaluate's accuracies.
func ddEvaluate(ctx context.Context, art *artifact.Artifact, test *data.Split, s *Setting, ec artifact.EvalConfig) (*artifact.EvalResult, error) {
	return torch.Guard("study", func() (*artifact.EvalResult, error) {
		cfg, err := artifact.EvalDataConfig(art, ec.Dataset)
		if err != nil {
			return nil, err
		}
		if test == nil || test.N == 0 {
			return nil, fmt.Errorf("study: no test data")
		}
		device := ec.Device
		if device == "" {
			device = "cpu"
		}
		dev, err := torch.ParseDevice(device)
		if err != nil {
			return nil, err
		}
		sh := art.Shape
		net, err := nets.New(s.Arch, sh[1], sh[2], sh[3], int64(art.Classes))
		if err != nil {
			return nil, err
		}
		defer net.Close()
		scope := torch.NewScope()
		defer scope.Close()
		images, table, err := art.Tensors(dev)
		if err != nil {
			return nil, err
		}
		x, y, err := engine.SplitTensors(test, [3]int64{sh[1], sh[2], sh[3]}, dev)
		if err != nil {
			return nil, fmt.Errorf("test data: %w", err)
		}
		steps := len(s.StepLRs)
		sch := engine.DDSchedule(int(sh[0]), cfg.DDSteps, art.StepLRs)
		sch.LRs = s.StepLRs
		tr := &train.Trainer{Net: net.XavierInit(), Cfg: cfg, Images: images, Labels: table, Batch: len(sch.Batches[0]),
			Opt: train.OptSpec{Kind: "sgd"}, Device: dev, Progress: ec.Progress, Schedule: sch}
		seed := uint64(ec.Seed)
		var accs []float64
		if s.Order == OrderFixed {
			if accs, err = tr.Test(ctx, steps, ec.Models, seed, "evaluate", x, y); err != nil {
				return nil, err
			}
		} else {
			for i := 0; i < ec.Models; i++ {
				tr.Schedule = &train.Schedule{Batches: ddOrder(s.Order, sch, steps, seed, i), LRs: sch.LRs}
				a, err := tr.TestRange(ctx, steps, i, i+1, seed, "evaluate", x, y, train.Mode(dev))
				if err != nil {
					return nil, err
				}
				accs = append(accs, a...)
			}
		}
		accs, diverged := train.KeepFinite(accs)
		if len(accs) == 0 {
			return nil, &labeldistill.DivergedError{Purpose: "study", Models: ec.Models, Steps: steps, Cause: engine.LearntStepsCause(s.StepLRs)}
		}
		res := &artifact.EvalResult{Recipe: artifact.RecipeDD, Arch: s.Arch, Optimizer: "sgd", LR: s.LR, Steps: steps, Accuracies: accs, Diverged: diverged}
		res.Mean, res.Std = train.MeanStd(accs)
		return res, nil
	})
}
