package config

// defaults.go: the settings a config leaves to ldtorch: Default, the dataset-dependent
// rules (AutoInnerBatch, AutoEpochs, AutoResetWindow, AutoBaselineMaxSteps,
// BaselineStepGrid) and withDefaults, which fills every unset field for Resolved.

import (
	"strings"

	"github.com/ldtorch/ldtorch/labeldistill/data"
)

// Default returns the defaults of docs/ALGORITHM.md, with auto fields left at 0 / "" /
// nil (call Resolved to fill them).
func Default() Config {
	return Config{
		Method:             MethodLD,
		Dataset:            "mnist",
		BaseExamples:       100,
		OuterBatch:         1024,
		InnerLR:            0.01,
		ModelLR:            1e-3,
		ModelBetas:         [2]float64{0.9, 0.999},
		ModelEps:           1e-8,
		LabelLR:            1e-3,
		LabelBetas:         [2]float64{0.9, 0.999},
		LabelEps:           1e-8,
		RidgeLambda:        1.0,
		RidgePseudoStep:    0.01,
		ScaleLR:            0.01,
		ScaleInit:          1.0,
		ResetMeanOfLast:    3,
		ValidateEvery:      5,
		EvalModels:         20,
		EvalLR:             1e-3,
		Seed:               1234,
		LabelSmoothing:     0.1,
		TeacherSteps:       2000,
		TeacherBatch:       256,
		TeacherLR:          1e-3,
		TeacherTemperature: 1.0,
		Device:             "cpu",
		DataDir:            "",
		Out:                "out",
	}
}

// AutoInnerBatch is the default N_i for n base examples (docs/ALGORITHM.md §7): 10, 10, 25 for
// N = 10, 20, 50, 50 for N ≥ 100 and min(N, 100) for cifar100. For other N: N when N ≤ 10
// and max(10, N/2) when 10 < N < 100, which reproduces the paper's three values.
func AutoInnerBatch(dataset string, n int) int {
	switch {
	case n <= 0:
		return 0
	case canonicalDataset(dataset) == "cifar100":
		return min(n, 100)
	case n >= 100:
		return 50
	case n <= 10:
		return n
	default:
		return max(10, n/2)
	}
}

// AutoEpochs is the default number of epochs (docs/ALGORITHM.md §7).
func AutoEpochs(dataset string, n int) int {
	switch canonicalDataset(dataset) {
	case "k49":
		if n > 100 {
			return 200
		}
		return 100
	case "cifar100":
		return 800
	}
	if n > 100 {
		return 800
	}
	return 400
}

// AutoResetWindow is the default G = N_m = N_w (docs/ALGORITHM.md §6). As in the reference,
// cifar100 and k49 get 100 whatever N; other datasets get 200 when N > 100, else 50.
func AutoResetWindow(dataset string, n int) int {
	switch canonicalDataset(dataset) {
	case "cifar100", "k49":
		return 100
	}
	if n > 100 {
		return 200
	}
	return 50
}

// AutoBaselineMaxSteps is the default longest baseline training (docs/ALGORITHM.md §8).
func AutoBaselineMaxSteps(n int) int {
	if n > 100 {
		return 1700
	}
	return 1000
}

// BaselineStepGrid returns the step counts at which the baseline search of docs/ALGORITHM.md §8
// measures validation error while training one model continuously for maxSteps steps:
//
//	10, 25, 50, 75, 100, 150, 200, …  (every 50 from 100 on)  … up to maxSteps,
//
// i.e. {10, 25, 50, 75, 100, 150, …, 1000} for the default maximum 1000 and the same grid
// continued to 1700 when N > 100 (the paper's "every 50 steps up to 1000 steps (or 1700
// steps …)"). Values above maxSteps are dropped; maxSteps itself is appended when it is not
// on the grid, so the longest training is always measured. maxSteps ≤ 0 gives nil.
//
// The reference code uses this grid for N ≤ 100 (its ITER % 50 == 49 or ITER ∈ {9, 24, 74})
// but a sparser, off-by-one grid for N > 100: {10, 25, 75, 101, 201, 301, 501, 701, 1001,
// 1201, 1501, 1701}. ldtorch uses the uniform grid for every N, as docs/ALGORITHM.md states;
// set Config.BaselineSteps to reproduce the reference's.
func BaselineStepGrid(maxSteps int) []int {
	if maxSteps <= 0 {
		return nil
	}
	var grid []int
	for _, s := range []int{10, 25, 50, 75} {
		if s <= maxSteps {
			grid = append(grid, s)
		}
	}
	for s := 100; s <= maxSteps; s += 50 {
		grid = append(grid, s)
	}
	if len(grid) == 0 || grid[len(grid)-1] != maxSteps {
		grid = append(grid, maxSteps)
	}
	return grid
}

// withDefaults fills the auto values it can; it never fails (check reports problems).
func (c Config) withDefaults() Config {
	r := c
	r.NormMean = append([]float64(nil), c.NormMean...)
	r.NormStd = append([]float64(nil), c.NormStd...)
	r.Baselines = append([]string(nil), c.Baselines...)
	r.BaselineSteps = append([]int(nil), c.BaselineSteps...)
	if c.BaseIndices != nil {
		r.BaseIndices = append([]int64{}, c.BaseIndices...)
	}
	if c.BaseSeed == nil {
		seed := c.Seed
		r.BaseSeed = &seed
	} else {
		seed := *c.BaseSeed
		r.BaseSeed = &seed
	}
	if c.Baselines != nil && len(r.Baselines) == 0 {
		r.Baselines = []string{} // explicit "none": keep it distinct from auto
	}
	if c.BaselineSteps != nil && len(r.BaselineSteps) == 0 {
		r.BaselineSteps = []int{}
	}

	r.Dataset = canonicalDataset(c.Dataset)
	if c.Source == "" {
		r.Source = r.Dataset
	} else {
		r.Source = canonicalDataset(c.Source)
	}
	target, targetOK := data.LookupFacts(r.Dataset)
	cross := r.Source != r.Dataset
	n := r.BaseExamples

	if r.InnerBatch == 0 {
		r.InnerBatch = AutoInnerBatch(r.Dataset, n)
	}
	if r.EvalBatch == 0 {
		r.EvalBatch = r.InnerBatch
	}
	if r.HistoryEvery == 0 {
		r.HistoryEvery = 1
		if strings.HasPrefix(r.Device, "cuda") {
			r.HistoryEvery = 10
		}
	}
	if r.GradVarWindow == 0 {
		r.GradVarWindow = 50
	}
	if r.Epochs == 0 {
		r.Epochs = AutoEpochs(r.Dataset, n)
	}
	if r.ResetWindow == 0 {
		r.ResetWindow = AutoResetWindow(r.Dataset, n)
	}
	if r.BaselineMaxSteps == 0 {
		r.BaselineMaxSteps = AutoBaselineMaxSteps(n)
	}
	if c.BaselineSteps == nil {
		r.BaselineSteps = BaselineStepGrid(r.BaselineMaxSteps)
	}
	if r.BaseSelection == "" {
		if r.BaseIndices != nil {
			r.BaseSelection = SelectGiven
		} else if cross {
			r.BaseSelection = SelectUnbalanced
		} else {
			r.BaseSelection = SelectBalanced
		}
	}
	if c.Baselines == nil {
		if cross {
			r.Baselines = []string{BaselineTeacher}
		} else {
			r.Baselines = []string{BaselineTrue, BaselineSmooth, BaselineTeacher}
		}
	} else if len(r.Baselines) == 1 && r.Baselines[0] == "none" {
		r.Baselines = []string{}
	}
	if targetOK {
		if r.Arch == "" {
			if target.Colour {
				r.Arch = ArchAlexNet
			} else {
				r.Arch = ArchLeNet
			}
		}
		if r.ValidationSize == 0 {
			r.ValidationSize = target.ValidationSize
		}
		// An image folder's normalisation is computed from its images (its facts have none).
		if len(r.NormMean) == 0 {
			r.NormMean = append([]float64(nil), target.NormMean...)
		}
		if len(r.NormStd) == 0 {
			r.NormStd = append([]float64(nil), target.NormStd...)
		}
	}
	if r.EvalArch == "" {
		r.EvalArch = r.Arch
	}
	if r.Learn == "" {
		r.Learn = pick(r.Method == MethodDD, LearnImages, LearnLabels)
	}
	if r.ModelTraining == "" {
		// A model trained on the images it shapes makes them useless to fresh models
		// (docs/ALGORITHM.md §12). Learning labels too, LD's second-order step needs the
		// model trained (with it fixed the labels collapse to one class); LD RR's does not.
		imagesLearnt := r.Method != MethodDD && (r.Learn == LearnImages || (r.Learn == LearnBoth && r.Method == MethodRR))
		switch {
		case r.Compat == CompatAuthors:
			r.ModelTraining = pick(r.Method == MethodRR && r.Learn == LearnImages, ModelTrainAfterReset, ModelTrainAlways)
		case imagesLearnt:
			r.ModelTraining = ModelTrainNever
		default:
			r.ModelTraining = ModelTrainAlways
		}
	}
	if r.Method == MethodDD {
		if r.DDSteps == 0 {
			r.DDSteps = 10
		}
		if r.DDEpochs == 0 {
			r.DDEpochs = 3
		}
		if r.DDStepLRInit == 0 && targetOK {
			r.DDStepLRInit = pick(target.Colour, 0.001, 0.02)
		}
		if r.DDLR == 0 {
			r.DDLR = 0.01
		}
		if r.DDBackward == "" {
			r.DDBackward = DDRecompute
		}
	}
	return r
}
