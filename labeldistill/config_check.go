package labeldistill

// config_check.go: Config.check, the validation of a resolved config, by group of settings.

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"

	"github.com/ldtorch/ldtorch/labeldistill/data"
)

// check validates a config after withDefaults.
func (c Config) check() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)})
	}

	switch c.Method {
	case MethodLD, MethodRR:
	default:
		bad("method", "unknown method %q (want %q or %q)", c.Method, MethodLD, MethodRR)
	}

	known := strings.Join(KnownDatasets(), ", ")
	target, targetOK := LookupDatasetFacts(c.Dataset)
	switch {
	case c.Dataset == "":
		bad("dataset", "must name the target dataset (one of %s)", known)
	case !targetOK:
		if path, ok := data.ImageFolderPath(c.Dataset); ok {
			_, err := data.InspectImageFolder(path)
			bad("dataset", "%v", err)
		} else {
			bad("dataset", "unknown dataset %q (known: %s, imagefolder:PATH)", c.Dataset, known)
		}
	case !target.Target:
		bad("dataset", "%s can only be a source, not a target", c.Dataset)
	}
	source, sourceOK := LookupDatasetFacts(c.Source)
	if !sourceOK && c.Source != c.Dataset {
		if path, ok := data.ImageFolderPath(c.Source); ok {
			_, err := data.InspectImageFolder(path)
			bad("source", "%v", err)
		} else {
			bad("source", "unknown dataset %q (known: %s, imagefolder:PATH)", c.Source, known)
		}
	}
	cross := c.Source != c.Dataset
	if targetOK && sourceOK && cross && source.Colour != target.Colour {
		bad("source", "%s is %s but dataset %s is %s", c.Source, colourWord(source.Colour),
			c.Dataset, colourWord(target.Colour))
	}

	n := c.BaseExamples
	if n <= 0 {
		bad("base_examples", "must be positive, got %d", n)
	}
	checkBatch := func(field string, v int) {
		switch {
		case n <= 0 && v == 0: // auto from an invalid N: base_examples is reported
		case v <= 0:
			bad(field, "must be positive, got %d", v)
		case n > 0 && v > n:
			bad(field, "%d exceeds base_examples %d", v, n)
		}
	}
	checkBatch("inner_batch", c.InnerBatch)
	if c.EvalBatch != c.InnerBatch { // equal: inner_batch's check covers it
		checkBatch("eval_batch", c.EvalBatch)
	}
	positiveInt := func(field string, v int) {
		if v <= 0 {
			bad(field, "must be positive, got %d", v)
		}
	}
	positiveInt("outer_batch", c.OuterBatch)

	positive := func(field string, v float64) {
		if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
			bad(field, "must be a positive finite number, got %v", v)
		}
	}
	positive("inner_lr", c.InnerLR)
	positive("model_lr", c.ModelLR)
	positive("model_eps", c.ModelEps)
	positive("label_lr", c.LabelLR)
	positive("label_eps", c.LabelEps)
	positive("ridge_lambda", c.RidgeLambda)
	positive("scale_lr", c.ScaleLR)
	positive("scale_init", c.ScaleInit)
	positive("eval_lr", c.EvalLR)
	positive("teacher_lr", c.TeacherLR)
	positive("teacher_temperature", c.TeacherTemperature)
	betas := func(field string, b [2]float64) {
		for _, v := range b {
			if math.IsNaN(v) || v < 0 || v >= 1 {
				bad(field, "each beta must be in [0, 1), got %v", b)
				return
			}
		}
	}
	betas("model_betas", c.ModelBetas)
	betas("label_betas", c.LabelBetas)
	if v := c.RidgePseudoStep; math.IsNaN(v) || v <= 0 || v > 1 {
		bad("ridge_pseudo_step", "must be in (0, 1], got %v", v)
	}

	positiveInt("epochs", c.Epochs)
	positiveInt("reset_window", c.ResetWindow)
	positiveInt("reset_mean_of_last", c.ResetMeanOfLast)
	positiveInt("validate_every", c.ValidateEvery)
	positiveInt("eval_models", c.EvalModels)
	if c.EvalModels > MaxEvalModels {
		bad("eval_models", "at most %d, got %d (each model trains for T steps and is scored on the test set)", MaxEvalModels, c.EvalModels)
	}
	if c.TargetSetSize < 0 {
		bad("target_set_size", "must be 0 (all) or positive, got %d", c.TargetSetSize)
	}
	if c.ValidationSize < 0 || (c.ValidationSize == 0 && targetOK && target.Target) {
		bad("validation_size", "must be positive, got %d", c.ValidationSize)
	}
	if targetOK {
		channels := pick(target.Colour, 3, 1)
		_, folder := data.ImageFolderPath(c.Dataset)
		if folder && (len(c.NormMean) == 0) != (len(c.NormStd) == 0) {
			bad("norm_std", "give norm_mean and norm_std together for an image folder (or neither: computed from its train images)")
		}
		for _, f := range []struct {
			name string
			v    []float64
			pos  bool
		}{{"norm_mean", c.NormMean, false}, {"norm_std", c.NormStd, true}} {
			if folder && len(f.v) == 0 {
				continue // computed from the images when the data is read
			}
			if len(f.v) != channels {
				bad(f.name, "needs %d value(s) for the %d channel(s) of %s, got %d",
					channels, channels, c.Dataset, len(f.v))
				continue
			}
			for _, v := range f.v {
				if math.IsNaN(v) || math.IsInf(v, 0) || (f.pos && v <= 0) {
					bad(f.name, "values must be finite%s, got %v",
						pick(f.pos, " and positive", ""), f.v)
					break
				}
			}
		}
	}

	switch c.Arch {
	case "":
		if targetOK { // unknown dataset: auto could not be filled, dataset is reported
			bad("arch", "must not be empty")
		}
	case ArchLeNet:
	case ArchAlexNet:
		if targetOK && !target.Colour {
			bad("arch", "alexnet needs colour 32×32 images but dataset %s is greyscale", c.Dataset)
		}
	case ArchResNet:
		bad("arch", "resnet is for evaluation only (set eval_arch), got %q", c.Arch)
	default:
		bad("arch", "unknown architecture %q (want lenet or alexnet)", c.Arch)
	}
	switch c.EvalArch {
	case c.Arch: // the default; arch's check covers it (resnet: see arch)
	case "":
		if targetOK {
			bad("eval_arch", "must not be empty")
		}
	case ArchLeNet:
	case ArchAlexNet, ArchResNet:
		if targetOK && !target.Colour {
			bad("eval_arch", "%s needs colour 32×32 images but dataset %s is greyscale", c.EvalArch, c.Dataset)
		}
	default:
		bad("eval_arch", "unknown architecture %q (want lenet, alexnet or resnet)", c.EvalArch)
	}

	switch c.BaseSelection {
	case SelectBalanced:
		if c.BaseIndices != nil { // given examples: no per-class count to check
		} else if cross {
			bad("base_selection", "cross-dataset distillation (source %s, dataset %s) requires unbalanced, got balanced",
				c.Source, c.Dataset)
		} else if targetOK && target.Target && n > 0 && n%target.Classes != 0 {
			bad("base_selection", "balanced needs base_examples divisible by the %d classes of %s, got %d",
				target.Classes, c.Dataset, n)
		}
	case SelectUnbalanced:
	default:
		bad("base_selection", "unknown selection %q (want balanced or unbalanced)", c.BaseSelection)
	}

	if c.BaseIndices != nil {
		if n > 0 && len(c.BaseIndices) != n {
			bad("base_indices", "lists %d base examples but base_examples is %d", len(c.BaseIndices), n)
		}
		dup := map[int64]bool{}
		for _, v := range c.BaseIndices {
			if v < 0 || dup[v] {
				bad("base_indices", "must be distinct non-negative file positions, got %d%s", v, pick(v < 0, "", " twice"))
				break
			}
			dup[v] = true
		}
	}

	seen := map[string]bool{}
	for _, b := range c.Baselines {
		switch b {
		case BaselineTrue, BaselineSmooth:
			if cross {
				bad("baselines", "%q needs within-dataset distillation, but source %s differs from dataset %s",
					b, c.Source, c.Dataset)
			}
		case BaselineTeacher:
		case "none":
			bad("baselines", "\"none\" cannot be combined with other baselines, got %q", c.Baselines)
		default:
			bad("baselines", "unknown baseline %q (want true, smooth, teacher or none)", b)
		}
		if seen[b] {
			bad("baselines", "%q is listed twice", b)
		}
		seen[b] = true
	}
	if v := c.LabelSmoothing; math.IsNaN(v) || v < 0 || v > 1 {
		bad("label_smoothing", "must be in [0, 1], got %v", v)
	}
	positiveInt("baseline_max_steps", c.BaselineMaxSteps)
	if len(c.BaselineSteps) == 0 && c.BaselineMaxSteps > 0 {
		bad("baseline_steps", "must list at least one step count")
	}
	for i, s := range c.BaselineSteps {
		if s <= 0 || (i > 0 && s <= c.BaselineSteps[i-1]) {
			bad("baseline_steps", "must be positive and strictly increasing, got %v", c.BaselineSteps)
			break
		}
		if c.BaselineMaxSteps > 0 && s > c.BaselineMaxSteps {
			bad("baseline_steps", "%d exceeds baseline_max_steps %d", s, c.BaselineMaxSteps)
			break
		}
	}
	positiveInt("teacher_steps", c.TeacherSteps)
	positiveInt("teacher_batch", c.TeacherBatch)

	if !validDevice(c.Device) {
		bad("device", "unknown device %q (want cpu, cuda or cuda:N)", c.Device)
	}
	if c.Threads < 0 {
		bad("threads", "must be 0 (libtorch default) or positive, got %d", c.Threads)
	} else if limit := MaxThreads(); c.Threads > limit {
		bad("threads", "must be at most %d (4 × the %d CPUs here), got %d", limit, runtime.NumCPU(), c.Threads)
	}
	if c.Out == "" {
		bad("out", "must not be empty")
	}
	if c.HistoryEvery < 0 {
		bad("history_every", "must be 0 (auto) or positive, got %d", c.HistoryEvery)
	}
	return errors.Join(errs...)
}

func colourWord(colour bool) string {
	return pick(colour, "colour", "greyscale")
}

func validDevice(d string) bool {
	if d == "cpu" || d == "cuda" {
		return true
	}
	idx, ok := strings.CutPrefix(d, "cuda:")
	if !ok || idx == "" {
		return false
	}
	v, err := strconv.Atoi(idx)
	return err == nil && v >= 0 && strconv.Itoa(v) == idx
}
