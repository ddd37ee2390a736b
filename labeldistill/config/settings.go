package config

// settings.go: the one description of every setting: what it is (the command's flag help),
// what its reference adds, its help category and, where the default value alone would
// mislead, the default help shows. Config's field comments only name each field's role and
// docs/ALGORITHM.md section; the command's flags, their categories and defaults, and any
// other list of settings read this table.

import (
	"fmt"
	"reflect"
	"strings"
)

// Help categories of the settings (Setting.Category); the command's own flags use them too.
const (
	CategoryRun       = "Run"
	CategoryData      = "Data"
	CategoryOptimizer = "Distillation optimisers"
	CategorySchedule  = "Schedule and resets"
	CategoryEval      = "Evaluation"
	CategoryBaselines = "Baselines"
	CategorySystem    = "System"
)

// Setting describes one Config field, named by its json name.
type Setting struct {
	Key string // the field's json name
	// Help is what the setting is, in one line: the flag's help text, where a word in
	// backquotes names the flag's value (`N`, `RATE`).
	Help string
	// Notes is what the field's reference adds to Help (rules, other settings it meets,
	// whether a resume may change it); "" when Help says it all.
	Notes    string
	Category string // the help category of its flag (CategoryRun, …)
	// Default is the default as help shows it, where Default's value alone would mislead
	// (a 0 that means "all" or "libtorch's default", not "auto"); "" for that value
	// (DefaultText).
	Default string
}

// Settings returns the description of every Config field, in the order of the fields.
func Settings() []Setting {
	return append([]Setting(nil), settings...)
}

// Describe returns the setting of a json name, and false when Config has no such field.
func Describe(key string) (Setting, bool) {
	for _, s := range settings {
		if s.Key == key {
			return s, true
		}
	}
	return Setting{}, false
}

// DefaultText is the default of the setting as help shows it: Setting.Default, else
// Default's value, comma-separated for lists and pairs, "auto" for a number whose zero is
// auto and "" for an empty text or list and for a switch.
func DefaultText(key string) string {
	if s, ok := Describe(key); ok && s.Default != "" {
		return s.Default
	}
	v := reflect.ValueOf(Default())
	for i := 0; i < v.NumField(); i++ {
		if jsonName(v.Type().Field(i)) == key {
			return formatDefault(v.Field(i))
		}
	}
	return ""
}

func formatDefault(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Slice:
		if v.Len() == 0 {
			return ""
		}
		fallthrough
	case reflect.Array:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = fmt.Sprint(v.Index(i).Interface())
		}
		return strings.Join(parts, ",")
	case reflect.String:
		return v.String()
	case reflect.Bool:
		return ""
	}
	if v.IsZero() {
		return "auto" // numbers whose zero is "auto"; the others have a Setting.Default
	}
	return fmt.Sprint(v.Interface())
}

// settings holds one Setting per Config field, in the fields' order (Settings).
var settings = []Setting{
	{Key: "method", Category: CategoryRun,
		Help: "`METHOD`: \"ld\" (second-order), \"rr\" (ridge regression) or \"dd\" (Wang et al.'s dataset distillation: images and step sizes through unrolled steps)"},
	{Key: "learn", Category: CategoryRun,
		Help:  "what is learnt: labels (for real base images), images (synthetic, for fixed one-hot labels) or both (auto: labels; images under --method dd)",
		Notes: "Learnt images alone are the paper's \"Our DD\"; method dd learns images and nothing else."},
	{Key: "compat", Category: CategoryRun,
		Help:  "authors: reproduce the authors' code where ldtorch departs from it (docs/ALGORITHM.md §9 names each such deviation); unset: ldtorch's choices",
		Notes: "Each deviation that follows this switch is measured against the authors' code by a trace of scripts/trace/."},
	{Key: "model_training", Category: CategorySchedule,
		Help:  "whether the model inside the meta-loop takes its own steps: always, never (each model keeps its initialisation until a reset replaces it) or after-reset (auto: never when images are learnt, else always)",
		Notes: "Under never, RR's W and s still learn; after-reset is never until the first reset, then always. The auto value in full: never when images are learnt by method ld or rr (with labels too, method rr only), always otherwise; under compat authors, after-reset for method rr learning images alone (the authors' RR image code), always otherwise."},
	{Key: "dataset", Category: CategoryRun,
		Help:  "target `DATASET`: mnist, kmnist, fashion-mnist, emnist-letters, k49, cifar10, cifar100, or imagefolder:PATH (PATH/train/<class>/*.png|jpg and PATH/test/<class>/...)",
		Notes: "emnist is another name of emnist-letters."},
	{Key: "source", Category: CategoryRun,
		Help:  "`DATASET` the base examples come from (cross-dataset distillation; default: the target; imagefolder:PATH too)",
		Notes: "A source other than the target makes the run cross-dataset; cub may only be a source."},
	{Key: "base_examples", Category: CategoryRun,
		Help: "`N`, the number of base examples whose labels are learnt"},
	{Key: "inner_batch", Category: CategoryRun,
		Help:  "`N_i`, base examples per inner step (auto: 10/10/25/50 for N = 10/20/50/≥100)",
		Notes: "Other N, and cifar100: AutoInnerBatch."},
	{Key: "outer_batch", Category: CategoryRun,
		Help: "`N_o`, target examples per meta-step"},
	{Key: "inner_lr", Category: CategoryOptimizer,
		Help: "`α`, the SGD step of the inner update (method ld)"},
	{Key: "model_lr", Category: CategoryOptimizer,
		Help: "Adam learning `RATE` of the model during distillation"},
	{Key: "model_betas", Category: CategoryOptimizer,
		Help:  "Adam betas `B1,B2` of the model, the RR scale, evaluation models and the teacher",
		Notes: "PyTorch's defaults."},
	{Key: "model_eps", Category: CategoryOptimizer,
		Help: "Adam `EPSILON` of the same optimisers as --model-betas"},
	{Key: "label_lr", Category: CategoryOptimizer,
		Help: "Adam learning `RATE` of the labels"},
	{Key: "label_betas", Category: CategoryOptimizer,
		Help: "Adam betas `B1,B2` of the labels"},
	{Key: "label_eps", Category: CategoryOptimizer,
		Help: "Adam `EPSILON` of the labels"},
	{Key: "dd_steps", Category: CategoryOptimizer,
		Help:  "method dd: distinct inner `STEPS`, each on its own N/STEPS images (auto: 10)",
		Notes: "0 outside method dd."},
	{Key: "dd_epochs", Category: CategoryOptimizer,
		Help: "method dd: passes over the --dd-steps steps, each step with its own learnt step size (auto: 3)"},
	{Key: "dd_step_lr_init", Category: CategoryOptimizer,
		Help: "method dd: initial learnt step `SIZE` (auto: 0.02 greyscale, 0.001 colour)"},
	{Key: "dd_lr", Category: CategoryOptimizer,
		Help: "method dd: Adam learning `RATE` of the images and step sizes, halved every 40 epochs (auto: 0.01)"},
	{Key: "dd_backward", Category: CategoryOptimizer,
		Help:  "method dd: recompute (each unrolled step rebuilt in the backward pass; memory of one step) or graph (every step's graph kept; memory grows with the steps) (auto: recompute)",
		Notes: "graph is what Wang et al.'s code does."},
	{Key: "ridge_lambda", Category: CategoryOptimizer,
		Help: "`λ` of the ridge-regression solve (method rr)"},
	{Key: "ridge_pseudo_step", Category: CategoryOptimizer,
		Help:  "`α` of the pseudo-gradient step of the ridge weights (method rr), in (0, 1]",
		Notes: "The step is W ← (1−α)W + αW_l."},
	{Key: "scale_lr", Category: CategoryOptimizer,
		Help: "Adam learning `RATE` of the RR logit scale (method rr)"},
	{Key: "scale_init", Category: CategoryOptimizer,
		Help: "initial RR logit `SCALE`, also after every model reset (method rr)"},
	{Key: "epochs", Category: CategorySchedule,
		Help: "passes over the target set (auto: 400; 800 when N > 100 or for cifar100; k49: 100, 200 when N > 100)"},
	{Key: "reset_window", Category: CategorySchedule,
		Help:  "`G`, window and patience of the model-reset rule (auto: 50; 200 when N > 100; 100 for cifar100 and k49)",
		Notes: "G is both N_m and N_w; cifar100's and k49's 100 hold for every N, as in the reference (AutoResetWindow)."},
	{Key: "reset_mean_of_last", Category: CategorySchedule,
		Help:  "T is the mean of the last `K` reset step counts",
		Notes: "T, the training steps of fresh models, is the integer part of that mean."},
	{Key: "validate_every", Category: CategorySchedule,
		Help: "validate the labels every `K` epochs (and after the last one)"},
	{Key: "eval_models", Category: CategoryEval,
		Help: "`M`, fresh models trained on the labels for the reported test accuracy"},
	{Key: "eval_lr", Category: CategoryEval,
		Help: "Adam learning `RATE` of fresh validation, test and baseline models"},
	{Key: "eval_batch", Category: CategoryEval,
		Help: "base examples per step of fresh models (auto: --inner-batch)"},
	{Key: "eval_arch", Category: CategoryEval,
		Help:  "`ARCH` of the fresh test models: lenet, alexnet, resnet, convnet or torchscript:FILE (a TorchScript file, docs/ARCHITECTURE.md) (default: --arch)",
		Notes: "lenet, resnet and convnet take any image of at least 8×8, alexnet colour 32×32 images only; a TorchScript module is checked against the data when built."},
	{Key: "target_set_size", Category: CategoryData, Default: "0",
		Help: "use only `K` target-set examples (0: all)"},
	{Key: "validation_size", Category: CategoryData,
		Help: "size of the validation part of the train split (auto: 10000 greyscale, 5000 colour, 23237 k49)"},
	{Key: "norm_mean", Category: CategoryData,
		Help:  "per-channel normalisation mean `M1[,M2,M3]` (default: the dataset's; an image folder's computed from its train images)",
		Notes: "Applied after pixels are scaled to [0,1]."},
	{Key: "norm_std", Category: CategoryData,
		Help:  "per-channel normalisation std `S1[,S2,S3]` (default: the dataset's; an image folder's computed from its train images)",
		Notes: "Applied after pixels are scaled to [0,1]."},
	{Key: "seed", Category: CategoryRun,
		Help:  "the run's `SEED` (initialisations, batches; also the split and base examples unless --base-seed)",
		Notes: "Also the evaluation models'; the default is the reference's."},
	{Key: "base_seed", Category: CategoryData, Default: "--seed",
		Help:  "`SEED` of the train/validation split and the base examples alone (default: --seed)",
		Notes: "Fixing it while the seed varies repeats the distillation on the same base examples (the paper's repeatability table)."},
	{Key: "base_indices", Category: CategoryData,
		Help:  "distil the base examples listed in `FILE` (positions in the source's train file: .npy, an artifact's distilled.npz, or text)",
		Notes: "The positions (an artifact's base_indices) must lie in the target-set part of the split under base_seed. null (the default): base_selection chooses the base examples with base_seed."},
	{Key: "arch", Category: CategoryRun,
		Help:  "network `ARCH` used during distillation: lenet, alexnet, resnet (the authors' CIFAR ResNet), convnet (ConvNet-3) or torchscript:FILE (a TorchScript file, docs/ARCHITECTURE.md) (default: lenet for greyscale, alexnet for colour)",
		Notes: "lenet, resnet and convnet take any image of at least 8×8, alexnet colour 32×32 images only; a TorchScript module is checked against the data when built (method ld needs its operators' second derivatives)."},
	{Key: "base_selection", Category: CategoryData,
		Help:  "base-example selection: balanced or unbalanced (default: balanced within a dataset, unbalanced across)",
		Notes: "given, the auto value when base_indices is set, distils the listed examples; with base_indices, balanced is checked against their classes when the data is read. Cross-dataset runs need unbalanced."},
	{Key: "baselines", Category: CategoryBaselines,
		Help:  "comma-separated `LIST` of true, smooth, teacher, or none (default: all within a dataset, teacher across)",
		Notes: "Under method rr each baseline is its RR variant (the RR model of §5); in a config file [] means none too."},
	{Key: "label_smoothing", Category: CategoryBaselines,
		Help:  "`ε` of the smooth baseline",
		Notes: "The smoothed labels are y(1−ε) + ε/C."},
	{Key: "baseline_max_steps", Category: CategoryBaselines,
		Help: "longest training in the baselines' step search (auto: 1000; 1700 when N > 100)"},
	{Key: "baseline_steps", Category: CategoryBaselines,
		Help:  "comma-separated `STEPS` the baselines' step search tries (default: a grid up to --baseline-max-steps)",
		Notes: "Strictly increasing; the default grid is BaselineStepGrid's."},
	{Key: "teacher_steps", Category: CategoryBaselines,
		Help:  "Adam steps of the teacher baseline's model on the target set",
		Notes: "An ldtorch addition; the default is about 10 epochs of MNIST at batch 256."},
	{Key: "teacher_batch", Category: CategoryBaselines,
		Help: "target examples per teacher step"},
	{Key: "teacher_lr", Category: CategoryBaselines,
		Help: "Adam learning `RATE` of the teacher"},
	{Key: "teacher_temperature", Category: CategoryBaselines,
		Help: "softmax `TEMPERATURE` of the teacher's labels"},
	{Key: "device", Category: CategorySystem,
		Help: "`DEVICE`: cpu, cuda or cuda:N"},
	{Key: "threads", Category: CategorySystem, Default: "0",
		Help: "libtorch intra-op `THREADS` (0: libtorch's default)"},
	{Key: "allow_tf32", Category: CategorySystem,
		Help:  "let float32 products and convolutions on Ampere-or-later GPUs use TF32 (faster, about 3 decimal digits; off: results agree with the CPU's)",
		Notes: "TF32 rounds the inputs to about 10 mantissa bits; no effect on the CPU."},
	{Key: "data_dir", Category: CategorySystem,
		Help:  "`DIR` holding the datasets, one sub-folder each (default: $LDTORCH_DATA, else ~/.cache/ldtorch/data)",
		Notes: "The default as data.DataDir finds it."},
	{Key: "out", Category: CategorySystem,
		Help:  "output `DIR` for distilled.npz and report.json",
		Notes: "It also holds the run's checkpoints and history."},
	{Key: "checkpoint_every", Category: CategorySchedule, Default: "0",
		Help:  "meta-steps between checkpoints (0: at every validation, negative: never)",
		Notes: "At every validation: every validate_every epochs and after the last one. Not a resume conflict (ResumeConflicts)."},
	{Key: "history_every", Category: CategorySchedule,
		Help:  "meta-steps between lines of the run history metrics.jsonl (auto: 1 on CPU, 10 on CUDA)",
		Notes: "CUDA's default is sparser because reading a step's loss, error and gradient norm back from the device costs a synchronisation. Not a resume conflict."},
	{Key: "grad_var_window", Category: CategorySchedule,
		Help:  "meta-steps per window of the label meta-gradient variance in the history (auto: 50, negative: none)",
		Notes: "The statistics are each label element's variance over the window's steps. Not a resume conflict."},
	{Key: "allow_unknown_data", Category: CategoryData,
		Help:  "accept data files the registry does not know (official CIFAR binaries, EMNIST, K-49, CUB, and registered datasets laid out as folders of images); their sha256 goes into report.json. imagefolder:PATH datasets need no flag: nothing is registered for them, and their files' checksums are recorded",
		Notes: "A changed copy of a registered file is unknown too; its sha256 is recorded beside the registry's warnings."},
	{Key: "emnist_transpose", Category: CategoryData,
		Help:  "transpose EMNIST images to MNIST orientation",
		Notes: "Off: the images as stored, like the reference, which matches the paper's numbers."},
}
