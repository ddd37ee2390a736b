package config

// check.go: Config.check, the validation of a resolved config, by group of settings.

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/ldtorch/ldtorch/labeldistill/data"
)

// check validates a config after withDefaults, group by group; the errors come in the order
// of the groups, one *FieldError per problem.
func (c Config) check() error {
	k := &configCheck{c: c}
	k.checkData()
	k.checkBatches()
	k.checkOptimizers()
	k.checkSchedule()
	k.checkNormalisation()
	k.checkArchitectures()
	k.checkBaseExamples()
	k.checkLearn()
	k.checkBaselines()
	k.checkRuntime()
	return errors.Join(k.errs...)
}

// configCheck collects the problems of one config, with the facts several groups share.
type configCheck struct {
	c        Config
	errs     []error
	target   data.Facts // the target dataset's facts, when targetOK
	targetOK bool
	cross    bool // source differs from dataset
	n        int  // base_examples
}

func (k *configCheck) bad(field, format string, args ...any) {
	k.errs = append(k.errs, &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)})
}

func (k *configCheck) positiveInt(field string, v int) {
	if v <= 0 {
		k.bad(field, "must be positive, got %d", v)
	}
}

func (k *configCheck) positive(field string, v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
		k.bad(field, "must be a positive finite number, got %v", v)
	}
}

// batch checks a batch size drawn from the N base examples.
func (k *configCheck) batch(field string, v int) {
	n := k.n
	switch {
	case n <= 0 && v == 0: // auto from an invalid N: base_examples is reported
	case v <= 0:
		k.bad(field, "must be positive, got %d", v)
	case n > 0 && v > n:
		k.bad(field, "%d exceeds base_examples %d", v, n)
	}
}

func (k *configCheck) betas(field string, b [2]float64) {
	for _, v := range b {
		if math.IsNaN(v) || v < 0 || v >= 1 {
			k.bad(field, "each beta must be in [0, 1), got %v", b)
			return
		}
	}
}

// checkData: the method, the target and source datasets and their agreement.
func (k *configCheck) checkData() {
	c := k.c
	switch c.Method {
	case MethodLD, MethodRR, MethodDD:
	default:
		k.bad("method", "unknown method %q (want %q, %q or %q)", c.Method, MethodLD, MethodRR, MethodDD)
	}

	known := strings.Join(data.Names(), ", ")
	target, targetOK := data.LookupFacts(c.Dataset)
	switch {
	case c.Dataset == "":
		k.bad("dataset", "must name the target dataset (one of %s)", known)
	case !targetOK:
		if path, ok := data.ImageFolderPath(c.Dataset); ok {
			_, err := data.InspectImageFolder(path)
			k.bad("dataset", "%v", err)
		} else {
			k.bad("dataset", "unknown dataset %q (known: %s, imagefolder:PATH)", c.Dataset, known)
		}
	case !target.Target:
		k.bad("dataset", "%s can only be a source, not a target", c.Dataset)
	}
	source, sourceOK := data.LookupFacts(c.Source)
	if !sourceOK && c.Source != c.Dataset {
		if path, ok := data.ImageFolderPath(c.Source); ok {
			_, err := data.InspectImageFolder(path)
			k.bad("source", "%v", err)
		} else {
			k.bad("source", "unknown dataset %q (known: %s, imagefolder:PATH)", c.Source, known)
		}
	}
	cross := c.Source != c.Dataset
	k.target, k.targetOK, k.cross, k.n = target, targetOK, cross, c.BaseExamples
	if targetOK && sourceOK && cross && source.Colour != target.Colour {
		k.bad("source", "%s is %s but dataset %s is %s", c.Source, colourWord(source.Colour),
			c.Dataset, colourWord(target.Colour))
	}
}

// checkBatches: N, the base examples, and the batch sizes it bounds.
func (k *configCheck) checkBatches() {
	c := k.c
	n := k.n
	if n <= 0 {
		k.bad("base_examples", "must be positive, got %d", n)
	}
	k.batch("inner_batch", c.InnerBatch)
	if c.EvalBatch != c.InnerBatch { // equal: inner_batch's check covers it
		k.batch("eval_batch", c.EvalBatch)
	}
	k.positiveInt("outer_batch", c.OuterBatch)
}

// checkOptimizers: learning rates, Adam settings, the ridge and teacher hyper-parameters.
func (k *configCheck) checkOptimizers() {
	c := k.c
	k.positive("inner_lr", c.InnerLR)
	k.positive("model_lr", c.ModelLR)
	k.positive("model_eps", c.ModelEps)
	k.positive("label_lr", c.LabelLR)
	k.positive("label_eps", c.LabelEps)
	k.positive("ridge_lambda", c.RidgeLambda)
	k.positive("scale_lr", c.ScaleLR)
	k.positive("scale_init", c.ScaleInit)
	k.positive("eval_lr", c.EvalLR)
	k.positive("teacher_lr", c.TeacherLR)
	k.positive("teacher_temperature", c.TeacherTemperature)
	k.betas("model_betas", c.ModelBetas)
	k.betas("label_betas", c.LabelBetas)
	if v := c.RidgePseudoStep; math.IsNaN(v) || v <= 0 || v > 1 {
		k.bad("ridge_pseudo_step", "must be in (0, 1], got %v", v)
	}
}

// checkSchedule: epochs, the reset rule, validation, evaluation and the data sizes.
func (k *configCheck) checkSchedule() {
	c := k.c
	target := k.target
	targetOK := k.targetOK
	k.positiveInt("epochs", c.Epochs)
	k.positiveInt("reset_window", c.ResetWindow)
	k.positiveInt("reset_mean_of_last", c.ResetMeanOfLast)
	k.positiveInt("validate_every", c.ValidateEvery)
	if c.EvalModels < 1 || c.EvalModels > MaxEvalModels {
		k.bad("eval_models", "%s", CountMessage(int64(c.EvalModels), 1, MaxEvalModels, WhyModels))
	}
	if c.TargetSetSize < 0 {
		k.bad("target_set_size", "must be 0 (all) or positive, got %d", c.TargetSetSize)
	}
	if c.ValidationSize < 0 || (c.ValidationSize == 0 && targetOK && target.Target) {
		k.bad("validation_size", "must be positive, got %d", c.ValidationSize)
	}
}

// checkNormalisation: the per-channel normalisation of the target data.
func (k *configCheck) checkNormalisation() {
	c := k.c
	target := k.target
	targetOK := k.targetOK
	if targetOK {
		channels := pick(target.Colour, 3, 1)
		_, folder := data.ImageFolderPath(c.Dataset)
		if folder && (len(c.NormMean) == 0) != (len(c.NormStd) == 0) {
			k.bad("norm_std", "give norm_mean and norm_std together for an image folder (or neither: computed from its train images)")
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
				k.bad(f.name, "needs %d value(s) for the %d channel(s) of %s, got %d",
					channels, channels, c.Dataset, len(f.v))
				continue
			}
			for _, v := range f.v {
				if math.IsNaN(v) || math.IsInf(v, 0) || (f.pos && v <= 0) {
					k.bad(f.name, "values must be finite%s, got %v",
						pick(f.pos, " and positive", ""), f.v)
					break
				}
			}
		}
	}
}

// checkArchitectures: the distillation and evaluation networks against the data.
func (k *configCheck) checkArchitectures() {
	c := k.c
	target := k.target
	targetOK := k.targetOK
	switch c.Arch {
	case "":
		if targetOK { // unknown dataset: auto could not be filled, dataset is reported
			k.bad("arch", "must not be empty")
		}
	case ArchLeNet, ArchConvNet, ArchResNet: // resnet and convnet take any image of at least 8×8
	case ArchAlexNet:
		if targetOK && !target.Colour {
			k.bad("arch", "alexnet needs colour 32×32 images but dataset %s is greyscale", c.Dataset)
		}
	default:
		if !k.torchScript("arch", c.Arch) {
			k.bad("arch", "unknown architecture %q (want lenet, alexnet, resnet, convnet or %sFILE)", c.Arch, TorchScriptPrefix)
		}
	}
	switch c.EvalArch {
	case c.Arch: // the default; arch's check covers it (resnet: see arch)
	case "":
		if targetOK {
			k.bad("eval_arch", "must not be empty")
		}
	case ArchLeNet, ArchResNet, ArchConvNet: // resnet and convnet take any image of at least 8×8, as evaluate and study do
	case ArchAlexNet:
		if targetOK && !target.Colour {
			k.bad("eval_arch", "%s needs colour 32×32 images but dataset %s is greyscale", c.EvalArch, c.Dataset)
		}
	default:
		if !k.torchScript("eval_arch", c.EvalArch) {
			k.bad("eval_arch", "unknown architecture %q (want lenet, alexnet, resnet, convnet or %sFILE)", c.EvalArch, TorchScriptPrefix)
		}
	}
}

// torchScript reports whether arch names a TorchScript file (TorchScriptPrefix), and
// refuses one that is not a regular file (the module itself is checked when the network
// is built: nets.New).
func (k *configCheck) torchScript(field, arch string) bool {
	path, ok := strings.CutPrefix(arch, TorchScriptPrefix)
	if !ok {
		return false
	}
	switch st, err := os.Stat(path); {
	case path == "":
		k.bad(field, "%s names no file (want %sFILE)", arch, TorchScriptPrefix)
	case err != nil:
		k.bad(field, "%s: %v", arch, err)
	case !st.Mode().IsRegular():
		k.bad(field, "%s: not a regular file", arch)
	}
	return true
}

// checkBaseExamples: how the base examples are chosen, or the list given.
func (k *configCheck) checkBaseExamples() {
	c := k.c
	target := k.target
	targetOK := k.targetOK
	cross := k.cross
	n := k.n
	switch c.BaseSelection {
	case SelectBalanced:
		if c.BaseIndices != nil { // given examples: no per-class count to check
		} else if cross {
			k.bad("base_selection", "cross-dataset distillation (source %s, dataset %s) requires unbalanced, got balanced",
				c.Source, c.Dataset)
		} else if targetOK && target.Target && n > 0 && n%target.Classes != 0 {
			k.bad("base_selection", "balanced needs base_examples divisible by the %d classes of %s, got %d",
				target.Classes, c.Dataset, n)
		}
	case SelectUnbalanced:
	case SelectGiven:
		if c.BaseIndices == nil {
			k.bad("base_selection", "given needs the base examples listed in base_indices")
		}
	default:
		k.bad("base_selection", "unknown selection %q (want balanced, unbalanced, or given with base_indices)", c.BaseSelection)
	}

	if c.BaseIndices != nil && c.Method != MethodDD { // dd takes none (checkLearn)
		if n > 0 && len(c.BaseIndices) != n {
			k.bad("base_indices", "lists %d base examples but base_examples is %d", len(c.BaseIndices), n)
		}
		dup := map[int64]bool{}
		for _, v := range c.BaseIndices {
			if v < 0 || dup[v] {
				k.bad("base_indices", "must be distinct non-negative file positions, got %d%s", v, pick(v < 0, "", " twice"))
				break
			}
			dup[v] = true
		}
	}
}

// checkLearn: what is learnt, and method dd's settings.
func (k *configCheck) checkLearn() {
	c := k.c
	switch c.Learn {
	case LearnLabels, LearnImages, LearnBoth:
		if c.Method == MethodDD && c.Learn != LearnImages {
			k.bad("learn", "method dd learns images (and their step sizes), not %s", c.Learn)
		}
	default:
		k.bad("learn", "unknown value %q (want labels, images or both)", c.Learn)
	}
	if c.Compat != CompatNone && c.Compat != CompatAuthors {
		k.bad("compat", "unknown value %q (want authors, or leave it unset)", c.Compat)
	}
	switch c.ModelTraining {
	case ModelTrainAlways:
	case ModelTrainNever, ModelTrainAfterReset:
		if c.Method == MethodDD {
			k.bad("model_training", "method dd trains a fresh network at every meta-step: want always (or auto), got %s", c.ModelTraining)
		}
	default:
		k.bad("model_training", "unknown value %q (want always, never or after-reset)", c.ModelTraining)
	}
	if c.LearnsImages() && k.cross {
		// Learnt images start from noise, not from base images: a source dataset would only
		// lend its label space, which is the target's anyway.
		k.bad("source", "%s: learnt images (learn %s, method %s) use no base images, so there is no cross-dataset distillation (leave source unset or learn labels)", c.Source, c.Learn, c.Method)
	}
	if c.LearnsImages() && !k.cross && c.BaseSelection == SelectUnbalanced && c.BaseIndices == nil {
		k.bad("base_selection", "learnt images take the classes of balanced base examples as their fixed labels: want balanced, got unbalanced")
	}
	if c.Method == MethodDD && c.BaseIndices != nil {
		// dd's images start from noise, laid out over the classes in its own fixed order:
		// given base examples would be recorded as the run's and change nothing.
		k.bad("base_indices", "does not apply to method dd: its images start from noise, %d of each class in its own layout, and use no base examples", max(1, k.n/max(1, k.target.Classes)))
	}
	if c.Method != MethodDD {
		for _, f := range []struct {
			name string
			set  bool
		}{{"dd_steps", c.DDSteps != 0}, {"dd_epochs", c.DDEpochs != 0}, {"dd_step_lr_init", c.DDStepLRInit != 0},
			{"dd_lr", c.DDLR != 0}, {"dd_backward", c.DDBackward != ""}} {
			if f.set {
				k.bad(f.name, "applies to method dd only (method is %s)", c.Method)
			}
		}
		return
	}
	k.positiveInt("dd_steps", c.DDSteps)
	k.positiveInt("dd_epochs", c.DDEpochs)
	if t := int64(c.DDSteps) * int64(c.DDEpochs); c.DDSteps > 0 && c.DDEpochs > 0 && t > MaxDDUnrolledSteps {
		k.bad("dd_epochs", "dd_steps × dd_epochs %s", CountMessageText(fmt.Sprintf("%d × %d = %d", c.DDSteps, c.DDEpochs, t), 1, MaxDDUnrolledSteps, WhyDDUnrolled))
	}
	k.positive("dd_lr", c.DDLR)
	if c.DDStepLRInit != 0 || k.targetOK { // auto from an unknown dataset: dataset is reported
		k.positive("dd_step_lr_init", c.DDStepLRInit)
	}
	if c.DDBackward != DDRecompute && c.DDBackward != DDGraph {
		k.bad("dd_backward", "unknown value %q (want recompute or graph)", c.DDBackward)
	}
	// Each step trains on the same number of images of every class (Wang et al.'s layout):
	// N/C images per class, split evenly over the steps.
	if k.targetOK && k.n > 0 && c.DDSteps > 0 && k.target.Classes > 0 {
		classes := k.target.Classes
		if k.n%classes != 0 || (k.n/classes)%c.DDSteps != 0 {
			k.bad("base_examples", "method dd trains each of its %d steps (dd_steps) on as many images of each of the %d classes of %s: base_examples must be a multiple of %d, got %d",
				c.DDSteps, classes, c.Dataset, classes*c.DDSteps, k.n)
		}
	}
}

// checkBaselines: the baselines and their step search.
func (k *configCheck) checkBaselines() {
	c := k.c
	cross := k.cross
	seen := map[string]bool{}
	for _, b := range c.Baselines {
		switch b {
		case BaselineTrue, BaselineSmooth:
			if cross {
				k.bad("baselines", "%q needs within-dataset distillation, but source %s differs from dataset %s",
					b, c.Source, c.Dataset)
			}
		case BaselineTeacher:
		case "none":
			k.bad("baselines", "\"none\" cannot be combined with other baselines, got %q", c.Baselines)
		default:
			k.bad("baselines", "unknown baseline %q (want true, smooth, teacher or none)", b)
		}
		if seen[b] {
			k.bad("baselines", "%q is listed twice", b)
		}
		seen[b] = true
	}
	if v := c.LabelSmoothing; math.IsNaN(v) || v < 0 || v > 1 {
		k.bad("label_smoothing", "must be in [0, 1], got %v", v)
	}
	k.positiveInt("baseline_max_steps", c.BaselineMaxSteps)
	if len(c.BaselineSteps) == 0 && c.BaselineMaxSteps > 0 {
		k.bad("baseline_steps", "must list at least one step count")
	}
	for i, s := range c.BaselineSteps {
		if s <= 0 || (i > 0 && s <= c.BaselineSteps[i-1]) {
			k.bad("baseline_steps", "must be positive and strictly increasing, got %v", c.BaselineSteps)
			break
		}
		if c.BaselineMaxSteps > 0 && s > c.BaselineMaxSteps {
			k.bad("baseline_steps", "%d exceeds baseline_max_steps %d", s, c.BaselineMaxSteps)
			break
		}
	}
	k.positiveInt("teacher_steps", c.TeacherSteps)
	k.positiveInt("teacher_batch", c.TeacherBatch)
}

// checkRuntime: device, threads, output folder and history.
func (k *configCheck) checkRuntime() {
	c := k.c
	if !validDevice(c.Device) {
		k.bad("device", "unknown device %q (want cpu, cuda or cuda:N)", c.Device)
	}
	if c.Threads != 0 && (c.Threads < 1 || c.Threads > MaxThreads()) {
		k.bad("threads", "%s", CountMessage(int64(c.Threads), 1, int64(MaxThreads()), WhyThreads))
	}
	if c.Out == "" {
		k.bad("out", "must not be empty")
	}
	if c.HistoryEvery < 0 {
		k.bad("history_every", "must be 0 (auto) or positive, got %d", c.HistoryEvery)
	}
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
