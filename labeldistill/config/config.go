// Config: every setting of docs/ALGORITHM.md as a named, overridable field, and the
// resolution of "auto" values from dataset / N / method. Its defaults are defaults.go, its
// descriptions settings.go, its checks check.go, JSON files file.go, what a resume may
// change resume.go.

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
// files, in errors and (by convention) for command-line flags. Each field's comment names
// its role and section; its description (what it takes, its auto rule, what else it meets),
// help category and help default are its Setting in settings.go (Settings, Describe), the
// one text the command's help shows; its default value is Default's.
type Config struct {
	// Method: the distillation method (§4, §5, §12).
	Method string `json:"method"`
	// Learn: what the meta-loop learns (§3, §12).
	Learn string `json:"learn"`
	// Compat: the switch to the authors' code's choices (§9).
	Compat string `json:"compat"`
	// ModelTraining: when the meta-loop's model takes its own steps (§12).
	ModelTraining string `json:"model_training"`
	// Dataset: the target dataset (§1).
	Dataset string `json:"dataset"`
	// Source: the dataset of the base examples (§1).
	Source string `json:"source"`
	// BaseExamples: N, the number of base examples (§1).
	BaseExamples int `json:"base_examples"`
	// InnerBatch: N_i, the inner (base) minibatch (§4, §5, §7).
	InnerBatch int `json:"inner_batch"`
	// OuterBatch: N_o, the target minibatch (§4).
	OuterBatch int `json:"outer_batch"`

	// InnerLR: α, the plain-SGD inner step of LD (§4 step 3).
	InnerLR float64 `json:"inner_lr"`
	// ModelLR: Adam learning rate of the model θ during distillation (§4, §5).
	ModelLR float64 `json:"model_lr"`
	// ModelBetas: Adam betas of θ, the RR scale s, evaluation models and the teacher (§4, §5, §7).
	ModelBetas [2]float64 `json:"model_betas"`
	// ModelEps: Adam epsilon of the optimisers of ModelBetas (§4, §5, §7).
	ModelEps float64 `json:"model_eps"`
	// LabelLR: Adam learning rate of the labels Ỹ (§3).
	LabelLR float64 `json:"label_lr"`
	// LabelBetas: Adam betas of the labels (§3).
	LabelBetas [2]float64 `json:"label_betas"`
	// LabelEps: Adam epsilon of the labels (§3).
	LabelEps float64 `json:"label_eps"`

	// DDSteps: method dd's distinct inner steps (§12).
	DDSteps int `json:"dd_steps"`
	// DDEpochs: method dd's passes over its inner steps (§12).
	DDEpochs int `json:"dd_epochs"`
	// DDStepLRInit: method dd's initial learnt step size (§12).
	DDStepLRInit float64 `json:"dd_step_lr_init"`
	// DDLR: method dd's Adam learning rate of the images and step sizes (§12).
	DDLR float64 `json:"dd_lr"`
	// DDBackward: how method dd differentiates through its unrolled steps (§12).
	DDBackward string `json:"dd_backward"`

	// RidgeLambda: λ of the ridge solve (§5 step 2).
	RidgeLambda float64 `json:"ridge_lambda"`
	// RidgePseudoStep: α of the pseudo-gradient step of the ridge weights (§5 step 3).
	RidgePseudoStep float64 `json:"ridge_pseudo_step"`
	// ScaleLR: Adam learning rate of the RR logit scale s (§5).
	ScaleLR float64 `json:"scale_lr"`
	// ScaleInit: initial value of the RR logit scale s (§5).
	ScaleInit float64 `json:"scale_init"`

	// Epochs: passes over the target set (§7).
	Epochs int `json:"epochs"`
	// ResetWindow: G, window and patience of the reset rule (§6).
	ResetWindow int `json:"reset_window"`
	// ResetMeanOfLast: how many reset step counts T_i the mean T takes (§6).
	ResetMeanOfLast int `json:"reset_mean_of_last"`
	// ValidateEvery: k, the epochs between validations of the labels (§7, §9).
	ValidateEvery int `json:"validate_every"`
	// EvalModels: M, the fresh models of the final report (§7, §8).
	EvalModels int `json:"eval_models"`
	// EvalLR: Adam learning rate of fresh models (§7).
	EvalLR float64 `json:"eval_lr"`
	// EvalBatch: base examples per step of fresh models (§7).
	EvalBatch int `json:"eval_batch"`
	// EvalArch: architecture of the fresh test models (§2, architecture transfer).
	EvalArch string `json:"eval_arch"`

	// TargetSetSize: subsample of the target set (§1, ablation).
	TargetSetSize int `json:"target_set_size"`
	// ValidationSize: size of the validation part of the train split (§1).
	ValidationSize int `json:"validation_size"`
	// NormMean: per-channel normalisation mean (§1).
	NormMean []float64 `json:"norm_mean"`
	// NormStd: per-channel normalisation std (§1).
	NormStd []float64 `json:"norm_std"`
	// Seed: the seed of the run (§1, §8 "same seed").
	Seed int64 `json:"seed"`
	// BaseSeed: the seed of the split and the base examples alone (§1).
	BaseSeed *int64 `json:"base_seed"`
	// BaseIndices: base examples given as positions in the source's train file (§1).
	BaseIndices []int64 `json:"base_indices"`
	// Arch: the network used during distillation (§2).
	Arch string `json:"arch"`
	// BaseSelection: how the base examples are chosen (§1).
	BaseSelection string `json:"base_selection"`

	// Baselines: which baselines run (§8).
	Baselines []string `json:"baselines"`
	// LabelSmoothing: ε of the smooth baseline (§8).
	LabelSmoothing float64 `json:"label_smoothing"`
	// BaselineMaxSteps: longest training of the baselines' step search (§8).
	BaselineMaxSteps int `json:"baseline_max_steps"`
	// BaselineSteps: step counts of the baselines' step search (§8).
	BaselineSteps []int `json:"baseline_steps"`
	// TeacherSteps: Adam steps of the teacher baseline's model (§8, ldtorch addition).
	TeacherSteps int `json:"teacher_steps"`
	// TeacherBatch: target examples per teacher step (§8).
	TeacherBatch int `json:"teacher_batch"`
	// TeacherLR: Adam learning rate of the teacher (§8).
	TeacherLR float64 `json:"teacher_lr"`
	// TeacherTemperature: softmax temperature of the teacher's labels (§8).
	TeacherTemperature float64 `json:"teacher_temperature"`

	// Device: where the run computes (operational).
	Device string `json:"device"`
	// Threads: libtorch intra-op threads (operational).
	Threads int `json:"threads"`
	// AllowTF32: TF32 for float32 products on GPUs (operational).
	AllowTF32 bool `json:"allow_tf32"`
	// DataDir: the data cache folder datasets are read from (operational).
	DataDir string `json:"data_dir"`
	// Out: the run's output directory (operational).
	Out string `json:"out"`
	// CheckpointEvery: meta-steps between checkpoints (operational).
	CheckpointEvery int `json:"checkpoint_every"`
	// HistoryEvery: meta-steps between run-history lines (operational).
	HistoryEvery int `json:"history_every"`
	// GradVarWindow: meta-steps per window of the meta-gradient statistics (operational).
	GradVarWindow int `json:"grad_var_window"`
	// AllowUnknownData: accept data files the registry does not know (§1).
	AllowUnknownData bool `json:"allow_unknown_data"`
	// EMNISTTranspose: EMNIST images in MNIST orientation (§1).
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
