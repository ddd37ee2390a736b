// Config: every setting of docs/ALGORITHM.md as a named, overridable field, and the
// resolution of "auto" values from dataset / N / method. Its defaults are defaults.go, its
// checks check.go, JSON files file.go, what a resume may change resume.go.

package config

import (
	"errors"
	"fmt"

	"github.com/ldtorch/ldtorch/labeldistill/data"
)

// Method names (Config.Method).
const (
	MethodLD = "ld" // second-order label distillation, docs/ALGORITHM.md §4
	MethodRR = "rr" // ridge-regression label distillation ("LD RR"), docs/ALGORITHM.md §5
	MethodDD = "dd" // Wang et al.'s dataset distillation (images and step sizes), docs/ALGORITHM.md §12
)

// What a run learns (Config.Learn), docs/ALGORITHM.md §3 and §12.
const (
	LearnLabels = "labels" // labels for the real base images (label distillation)
	LearnImages = "images" // synthetic images for fixed one-hot labels (image distillation)
	LearnBoth   = "both"   // synthetic images and their labels together
)

// Defaults of method dd (Wang et al.'s code), docs/ALGORITHM.md §12.
const (
	DDBeta1, DDBeta2 = 0.5, 0.999 // Adam betas of the images and step sizes
	DDDecayEpochs    = 40         // the Adam learning rate is halved every this many epochs
	DDDecayFactor    = 0.5
)

// Compatibility modes (Config.Compat), docs/ALGORITHM.md §9.
const (
	CompatNone    = ""        // ldtorch's own choices
	CompatAuthors = "authors" // the authors' code's choices, where ldtorch departs from them
)

// When the meta-loop's model takes its own steps (Config.ModelTraining), docs/ALGORITHM.md §12.
const (
	ModelTrainAlways     = "always"      // every meta-step (label distillation, §4, §5)
	ModelTrainNever      = "never"       // each model keeps its (re-)initialisation (learnt images)
	ModelTrainAfterReset = "after-reset" // from the first model reset on (the authors' RR image code)
)

// Backward passes of method dd's unrolled steps (Config.DDBackward).
const (
	DDRecompute = "recompute" // recompute each step's graph in the backward pass: memory of one step
	DDGraph     = "graph"     // keep every step's graph, as Wang et al.'s code: memory grows with the steps
)

// Architecture names (Config.Arch, Config.EvalArch).
const (
	ArchLeNet   = "lenet"
	ArchAlexNet = "alexnet" // AlexCifarNet
	ArchResNet  = "resnet"  // the authors' CIFAR "ResNet-18" (BatchNorm: batch statistics in training, running ones in evaluation)
	ArchConvNet = "convnet" // ConvNet-3, the benchmarks' network (DC-BENCH, DD-Ranking)
	// TorchScriptPrefix starts an architecture that is a PyTorch model exported as
	// TorchScript: "torchscript:FILE" (nets.New; the contract is in docs/ARCHITECTURE.md).
	TorchScriptPrefix = "torchscript:"
)

// Base-example selection modes (Config.BaseSelection), docs/ALGORITHM.md §1.
const (
	SelectBalanced   = "balanced"
	SelectUnbalanced = "unbalanced"
	// SelectGiven: the base examples listed in BaseIndices, whatever their classes (the
	// auto value when BaseIndices is set).
	SelectGiven = "given"
)

// Baseline names (Config.Baselines), docs/ALGORITHM.md §8. Under method "rr" every baseline
// trains the RR model of §5 ("Baseline RR"); under "ld" the plain network.
const (
	BaselineTrue    = "true"    // one-hot true classes (within-dataset only)
	BaselineSmooth  = "smooth"  // true classes with label smoothing (within-dataset only)
	BaselineTeacher = "teacher" // ldtorch addition: a teacher trained on the target set labels the base examples
)

// Config holds every setting of docs/ALGORITHM.md (§ numbers below refer to it) plus the
// operational ones of ldtorch. A zero value or "" documented as "auto" is filled in by
// Resolved from the dataset, N and the method; json names are the names used in config
// files, in errors and (by convention) for command-line flags.
type Config struct {
	// Method: "ld" (second-order, §4), "rr" (ridge regression, §5) or "dd" (Wang et al.'s
	// dataset distillation, §12). Default "ld".
	Method string `json:"method"`
	// Learn: what the meta-loop learns (§3, §12): "labels" for the real base images,
	// "images" (synthetic images for the base examples' fixed one-hot classes; the paper's
	// "Our DD"), or "both". "" (auto) = "labels"; "images" under method dd, which learns
	// nothing else.
	Learn string `json:"learn"`
	// Compat: "authors" reproduces the authors' code where docs/ALGORITHM.md §9 lists a
	// deviation with this switch (the traces of scripts/trace/ measure each). Default ""
	// (ldtorch's choices).
	Compat string `json:"compat"`
	// ModelTraining: whether the model inside the meta-loop takes its own Adam steps (§12):
	// "always", "never" (each model keeps its initialisation until the reset rule replaces
	// it; RR's W and s still learn) or "after-reset" (never until the first reset, then
	// always). "" (auto) = "never" when images are learnt (method ld or rr; with labels
	// too, method rr only), "always" otherwise; under compat authors "after-reset" for rr
	// images (the authors' RR image code), "always" otherwise.
	ModelTraining string `json:"model_training"`
	// Dataset: the target dataset (§1): mnist, kmnist, fashion-mnist, emnist-letters
	// (alias emnist), k49, cifar10, cifar100. Default "mnist".
	Dataset string `json:"dataset"`
	// Source: the dataset the base examples come from (§1). "" (auto) = the target
	// (within-dataset); anything else is cross-dataset. cub may only be a source.
	Source string `json:"source"`
	// BaseExamples: N, the number of base examples (§1). Default 100.
	BaseExamples int `json:"base_examples"`
	// InnerBatch: N_i, the inner (base) minibatch (§4, §5, §7). 0 = auto: 10, 10, 25 for
	// N = 10, 20, 50 and 50 for N ≥ 100 (§7); min(N, 100) for cifar100. Other N (ldtorch's
	// interpolation of the paper's values): N for N ≤ 10, max(10, N/2) for 10 < N < 100.
	InnerBatch int `json:"inner_batch"`
	// OuterBatch: N_o, the target minibatch (§4). Default 1024.
	OuterBatch int `json:"outer_batch"`

	// InnerLR: α, the plain-SGD inner step of LD (§4 step 3). Default 0.01.
	InnerLR float64 `json:"inner_lr"`
	// ModelLR: Adam learning rate of the model θ during distillation (§4, §5). Default 1e-3.
	ModelLR float64 `json:"model_lr"`
	// ModelBetas: Adam betas for θ, the RR scale s, evaluation models and the teacher
	// (PyTorch defaults, §4/§5/§7). Default [0.9, 0.999].
	ModelBetas [2]float64 `json:"model_betas"`
	// ModelEps: Adam epsilon for the same optimisers as ModelBetas. Default 1e-8.
	ModelEps float64 `json:"model_eps"`
	// LabelLR: Adam learning rate of the labels Ỹ (§3). Default 1e-3.
	LabelLR float64 `json:"label_lr"`
	// LabelBetas: Adam betas of the labels (§3). Default [0.9, 0.999].
	LabelBetas [2]float64 `json:"label_betas"`
	// LabelEps: Adam epsilon of the labels (§3). Default 1e-8.
	LabelEps float64 `json:"label_eps"`

	// DDSteps: method dd's distinct inner steps, each on its own N/dd_steps synthetic images
	// (§12). 0 = auto: 10 under dd; 0 otherwise.
	DDSteps int `json:"dd_steps"`
	// DDEpochs: passes over the dd_steps steps in the unrolled training (§12), each step
	// with its own learnt step size. 0 = auto: 3 under dd.
	DDEpochs int `json:"dd_epochs"`
	// DDStepLRInit: the initial value of every learnt step size (§12). 0 = auto under dd:
	// 0.02 for greyscale datasets, 0.001 for colour ones.
	DDStepLRInit float64 `json:"dd_step_lr_init"`
	// DDLR: Adam learning rate of the images and step sizes of method dd (§12), halved every
	// 40 epochs. 0 = auto: 0.01 under dd.
	DDLR float64 `json:"dd_lr"`
	// DDBackward: how method dd differentiates through its unrolled steps (§12): "recompute"
	// (each step's graph rebuilt in the backward pass; memory of one step) or "graph" (every
	// step's graph kept, as Wang et al.'s code; memory grows with the steps). "" = auto:
	// recompute under dd.
	DDBackward string `json:"dd_backward"`

	// RidgeLambda: λ of the ridge solve (§5 step 2). Default 1.0.
	RidgeLambda float64 `json:"ridge_lambda"`
	// RidgePseudoStep: α of the pseudo-gradient step W ← (1−α)W + αW_l (§5 step 3). Default 0.01.
	RidgePseudoStep float64 `json:"ridge_pseudo_step"`
	// ScaleLR: Adam learning rate of the RR logit scale s (§5). Default 0.01.
	ScaleLR float64 `json:"scale_lr"`
	// ScaleInit: initial value of s, also after every reset (§5). Default 1.0.
	ScaleInit float64 `json:"scale_init"`

	// Epochs: passes over the target set (§7). 0 = auto: 400; 800 when N > 100 or for
	// cifar100; k49: 100, or 200 when N > 100.
	Epochs int `json:"epochs"`
	// ResetWindow: G = N_m = N_w, the moving-window length and the patience of the reset
	// rule (§6). 0 = auto: 50; 100 for cifar100 and k49 (whatever N, as in the reference);
	// otherwise 200 when N > 100.
	ResetWindow int `json:"reset_window"`
	// ResetMeanOfLast: T = int(mean of the last this-many T_i) (§6). Default 3.
	ResetMeanOfLast int `json:"reset_mean_of_last"`
	// ValidateEvery: k, validate the current labels after epochs k, 2k, … and always after
	// the last epoch (§7, §9). Default 5.
	ValidateEvery int `json:"validate_every"`
	// EvalModels: M, fresh models trained for the final report (§7, §8). Default 20.
	EvalModels int `json:"eval_models"`
	// EvalLR: Adam learning rate of fresh (validation, test, baseline) models (§7). Default 1e-3.
	EvalLR float64 `json:"eval_lr"`
	// EvalBatch: base examples per step when training fresh models (§7). 0 = auto: InnerBatch.
	EvalBatch int `json:"eval_batch"`
	// EvalArch: architecture of fresh models at test time (§2, architecture transfer).
	// "" = auto: Arch. "resnet" is allowed here only; lenet, convnet (any data) or alexnet,
	// resnet (colour 32×32 data).
	EvalArch string `json:"eval_arch"`

	// TargetSetSize: subsample the target set to this many examples (§1, ablation).
	// 0 = all (default).
	TargetSetSize int `json:"target_set_size"`
	// ValidationSize: size of the validation part of the train split (§1). 0 = auto:
	// 10000 (greyscale), 23237 (k49), 5000 (colour).
	ValidationSize int `json:"validation_size"`
	// NormMean: per-channel normalisation mean after scaling pixels to [0,1] (§1).
	// Empty = auto: [0.1307] for greyscale, [125.3, 123.0, 113.9]/255 for colour.
	NormMean []float64 `json:"norm_mean"`
	// NormStd: per-channel normalisation std (§1). Empty = auto: [0.3081] for greyscale,
	// [63.0, 62.1, 66.7]/255 for colour.
	NormStd []float64 `json:"norm_std"`
	// Seed: the seed of the run (initialisations, batches, evaluation models; and, unless
	// BaseSeed is set, the split permutation and the base examples; §1, §8 "same seed").
	// Default 1234, the reference's default.
	Seed int64 `json:"seed"`
	// BaseSeed: the seed of the data choices alone: the train → target set / validation
	// split and the base examples (§1). null (auto) = Seed. Fixing it while Seed varies
	// repeats the distillation on the same base examples (the paper's repeatability table).
	BaseSeed *int64 `json:"base_seed"`
	// BaseIndices: distil exactly these base examples, given as positions in the source's
	// train file (an artifact's base_indices); they must lie in the target-set part of the
	// split under BaseSeed. null (default) = chosen by BaseSelection with BaseSeed.
	BaseIndices []int64 `json:"base_indices"`
	// Arch: the network used during distillation (§2): "lenet", "alexnet" (colour data) or
	// "convnet" (ConvNet-3). "" = auto: lenet for greyscale targets, alexnet for colour targets.
	Arch string `json:"arch"`
	// BaseSelection: "balanced" or "unbalanced" (§1), or "given" (BaseIndices). "" = auto:
	// given when BaseIndices is set, else balanced within-dataset, unbalanced cross-dataset
	// (cross-dataset requires unbalanced). With BaseIndices, "balanced" is checked against
	// the listed examples' classes when the data is read.
	BaseSelection string `json:"base_selection"`

	// Baselines: which baselines to run (§8), a subset of "true", "smooth", "teacher";
	// under method rr each is its RR variant. null (auto) = ["true", "smooth", "teacher"]
	// within-dataset and ["teacher"] cross-dataset; [] or ["none"] = none.
	Baselines []string `json:"baselines"`
	// LabelSmoothing: ε of the smoothed baseline, y(1−ε) + ε/C (§8). Default 0.1.
	LabelSmoothing float64 `json:"label_smoothing"`
	// BaselineMaxSteps: longest training in the baseline step search (§8). 0 = auto: 1000;
	// 1700 when N > 100.
	BaselineMaxSteps int `json:"baseline_max_steps"`
	// BaselineSteps: the step counts at which the baseline search measures validation
	// error (§8), strictly increasing. null (auto) = BaselineStepGrid(BaselineMaxSteps).
	BaselineSteps []int `json:"baseline_steps"`
	// TeacherSteps: Adam steps of the teacher baseline's model on the target set
	// (ldtorch addition, §8). Default 2000 (about 10 epochs of MNIST at batch 256).
	TeacherSteps int `json:"teacher_steps"`
	// TeacherBatch: target examples per teacher step. Default 256.
	TeacherBatch int `json:"teacher_batch"`
	// TeacherLR: Adam learning rate of the teacher. Default 1e-3.
	TeacherLR float64 `json:"teacher_lr"`
	// TeacherTemperature: softmax temperature of the teacher's labels. Default 1.
	TeacherTemperature float64 `json:"teacher_temperature"`

	// Device: "cpu", "cuda" or "cuda:N". Default "cpu".
	Device string `json:"device"`
	// Threads: libtorch intra-op threads. 0 = libtorch's default (default).
	Threads int `json:"threads"`
	// AllowTF32: let float32 matrix products and convolutions on Ampere-or-later GPUs use
	// TF32 tensor cores (faster; inputs rounded to about 10 mantissa bits). Default false,
	// so that GPU results agree with the CPU's to float32 rounding; no effect on the CPU.
	AllowTF32 bool `json:"allow_tf32"`
	// DataDir: the data cache folder datasets are read from (one sub-folder per dataset).
	// Default "" = $LDTORCH_DATA, else ~/.cache/ldtorch/data (data.DataDir).
	DataDir string `json:"data_dir"`
	// Out: the run's output directory (artifacts, report, checkpoints). Default "out".
	Out string `json:"out"`
	// CheckpointEvery: > 0: write a checkpoint every this many meta-steps; 0 (default):
	// after every validation (every ValidateEvery epochs and after the last one);
	// < 0: never. Not a resume conflict (see ResumeConflicts).
	CheckpointEvery int `json:"checkpoint_every"`
	// HistoryEvery: write a meta-step line to the run history (metrics.jsonl) every this
	// many meta-steps. 0 = auto: 1 on CPU, 10 on CUDA, where reading a step's loss, error and
	// gradient norm back from the device costs a synchronisation. Not a resume conflict.
	HistoryEvery int `json:"history_every"`
	// GradVarWindow: meta-steps per window of the label meta-gradient statistics in the
	// history (per-element variance over the window's steps). 0 = auto: 50; < 0: none.
	// Not a resume conflict.
	GradVarWindow int `json:"grad_var_window"`
	// AllowUnknownData: accept data files whose checksums the registry does not know
	// (official CIFAR binaries, EMNIST, K-49, CUB, a changed copy) and image folders; their
	// sha256 is recorded in the report beside the registry's warnings. Default false.
	AllowUnknownData bool `json:"allow_unknown_data"`
	// EMNISTTranspose: transpose EMNIST images to MNIST orientation. Default false: use
	// them as stored, like the reference (it matches the paper's numbers) (§1).
	EMNISTTranspose bool `json:"emnist_transpose"`
}

// BaseSelectionSeed is the seed of the split and the base examples: BaseSeed, or Seed when
// BaseSeed is null.
func (c Config) BaseSelectionSeed() int64 {
	if c.BaseSeed != nil {
		return *c.BaseSeed
	}
	return c.Seed
}

// NumClasses returns C, the number of target classes, or 0 for an unknown dataset.
func (c Config) NumClasses() int {
	d, _ := data.LookupFacts(c.Dataset)
	return d.Classes
}

// IsCrossDataset reports whether the base examples come from another dataset than the target.
func (c Config) IsCrossDataset() bool {
	if c.Source == "" {
		return false
	}
	return canonicalDataset(c.Source) != canonicalDataset(c.Dataset)
}

func canonicalDataset(name string) string {
	if d, ok := data.LookupFacts(name); ok {
		return d.Name
	}
	return name
}

// Resolved returns a copy with every auto (0 / "" / null) value filled from the dataset and
// N (no docs/ALGORITHM.md default depends on the method; under "rr" the same values apply),
// dataset names canonicalised, and then validated. The returned config is
// what a run records; Resolved of a resolved config is the same config.
func (c Config) Resolved() (Config, error) {
	r := c.withDefaults()
	if r.DataDir == "" {
		if dir, err := data.DataDir(""); err == nil {
			r.DataDir = dir
		}
	}
	return r, r.check()
}

// Validate reports every problem of the configuration (auto values allowed), one sentence
// per problem, each starting with the field's json name; nil when it is usable. The errors
// are *FieldError values joined with errors.Join.
func (c Config) Validate() error {
	return c.withDefaults().check()
}

// ValidateRecorded is Validate for the settings a finished run recorded (report.json): an
// image folder it read (dataset or source) that is no longer where it was, or no longer
// readable, is not a fault of the settings; the commands that read its images say so.
func (c Config) ValidateRecorded() error {
	err := c.Validate()
	var kept []error
	for _, e := range unjoinErrors(err) {
		var fe *FieldError
		if errors.As(e, &fe) {
			name := map[string]string{"dataset": c.Dataset, "source": c.Source}[fe.Field]
			if _, folder := data.ImageFolderPath(name); folder {
				continue
			}
		}
		kept = append(kept, e)
	}
	return errors.Join(kept...)
}

func unjoinErrors(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

// LearnsImages reports whether a run of the (resolved) configuration learns its images,
// so that its base images are synthetic: learn "images" or "both", and method dd.
func (c Config) LearnsImages() bool {
	return c.Method == MethodDD || c.Learn == LearnImages || c.Learn == LearnBoth
}

// MethodLabel is how summaries and figures name a method by itself: "LD", "LD RR" or "DD".
func MethodLabel(method string) string {
	switch method {
	case MethodRR:
		return "LD RR"
	case MethodDD:
		return "DD"
	}
	return "LD"
}

// MethodName is how summaries and figures name what a run of the (resolved) configuration
// distils: "LD", "LD RR", the paper's "Our DD" and "Our DD RR" (learnt images), "LD + images"
// and "LD RR + images" (both), "DD" (method dd).
func (c Config) MethodName() string {
	name := pick(c.Method == MethodRR, "LD RR", "LD")
	switch {
	case c.Method == MethodDD:
		return "DD"
	case c.Learn == LearnImages:
		return pick(c.Method == MethodRR, "Our DD RR", "Our DD")
	case c.Learn == LearnBoth:
		return name + " + images"
	}
	return name
}

// DDUnrolledSteps is the number of unrolled inner steps of method dd, each with its own
// learnt step size: dd_steps × dd_epochs (0 for other methods).
func (c Config) DDUnrolledSteps() int { return c.DDSteps * c.DDEpochs }

func pick[T any](cond bool, a, b T) T {
	if cond {
		return a
	}
	return b
}

// FieldError is a problem with one setting, wherever it is found (Validate, the data,
// Distill, Evaluate): Field is the setting's json name (a Config key, or an EvalConfig
// setting: steps, models, batch, lr, arch, optimizer, device), Msg the rest of the
// sentence. Err, when set, is the underlying error (errors.Is and errors.As see it).
type FieldError struct {
	Field string
	Msg   string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }
func (e *FieldError) Unwrap() error { return e.Err }

// NewFieldError is a *FieldError for field whose message is err's.
func NewFieldError(field string, err error) *FieldError {
	return &FieldError{Field: field, Msg: err.Error(), Err: err}
}

// FieldErrorf is a *FieldError for field with a formatted message.
func FieldErrorf(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Resolved is a configuration whose "auto" values are filled in and whose settings are
// checked, as Resolve returns it: what a run executes. The packages that take a Resolved
// (labeldistill.DistillResolved, the engine) do not resolve it again.
type Resolved struct{ Config }

// Resolve fills in every "auto" value from the dataset, N and the method, and checks the
// result (Config.Resolved): once, at the edge of a program.
func Resolve(c Config) (Resolved, error) {
	r, err := c.Resolved()
	return Resolved{r}, err
}
