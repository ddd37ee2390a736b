package artifact

// evaluate.go: `ldtorch evaluate` as a library call: train fresh models on an artifact's
// images and labels (package train) and test them.

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/labeldistill/engine"
	"github.com/ldtorch/ldtorch/labeldistill/results"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
)

// EvalConfig configures Evaluate: training fresh models on a distilled artifact, possibly
// with another architecture, optimizer or step count (the paper's flexibility studies).
// Zero values are defaults, filled by Resolved from the artifact's report (report.json), or
// for an artifact without one from the defaults for Dataset.
type EvalConfig struct {
	Arch      string  // "lenet", "alexnet", "resnet" or "convnet"; "" = the report's eval_arch
	Optimizer string  // "adam" (default) or "sgd"
	LR        float64 // 0 = 1e-3 for adam, 0.01 for sgd
	Momentum  float64 // sgd only, in [0, 1)
	Steps     int     // 0 = the report's T (without a report Steps must be given)
	Models    int     // 0 = the report's eval_models (20 without a report)
	Batch     int     // 0 = the report's eval_batch (N_i)
	// RR trains the RR head (features, ridge W, scale) instead of a linear classifier;
	// nil = when the report's method is rr.
	RR     *bool
	Seed   int64  // 0 = the report's seed
	Device string // "" = cpu
	// Dataset names the target dataset of an artifact without report.json (with one it may
	// be left empty, or must be the report's).
	Dataset   string
	AllowTF32 bool // TF32 on Ampere-or-later GPUs (config.Config.AllowTF32); default off
	// Recipe is how the models train: "standard" (the optimizer on random minibatches of
	// Batch, soft cross-entropy) or "dd" (method dd's: its learnt step sizes in the fixed
	// order, T of them, from Wang et al.'s initialisation). "" = "dd" for an artifact with
	// step sizes when none of Optimizer, LR, Momentum, Steps, Batch and RR is set,
	// "standard" otherwise.
	Recipe string
	// Progress, when set, hears how much of the work is done (training steps and scoring
	// blocks of all the models, in arbitrary units: done of total).
	Progress func(done, total int)
	// SaveModels, when set, is a folder (created if needed) that keeps the trained models:
	// model-K.pt, PyTorch state dicts of the modules in docs/ARTIFACT.md, and models.json
	// (train.SavedModels, with each model's test accuracy). A folder already holding saved
	// models is refused (a *FieldError naming "save-models").
	SaveModels string
	// ProgressDir, when set, is the folder (an artifact's evaluations/) where an evaluation on
	// the CPU that does not save its models records each model as it is scored, so that the
	// same evaluation run again after a stop goes on after the last one (evaluate_resume.go).
	ProgressDir string
	// Notes, when set, hears what the evaluation resumes from, and warnings about its progress.
	Notes func(string)
}

// Recipes of EvalConfig.Recipe.
const (
	RecipeStandard = "standard"
	RecipeDD       = results.RecipeDD
)

// EvalDataConfig returns the configuration art's fresh models are trained and tested under
// (what LoadTestSplit takes): its report's, or for an artifact without report.json the
// defaults for dataset, which must then fit the artifact's images. Problems are
// *FieldError values naming "dataset", among them a run's image folder that cannot be read
// where the run (or dataset) says it is.
func EvalDataConfig(art *Artifact, dataset string) (config.Config, error) {
	if art.Report != nil {
		cfg := art.Report.Config
		if dataset != "" {
			_, wasFolder := data.ImageFolderPath(cfg.Dataset)
			_, isFolder := data.ImageFolderPath(dataset)
			switch f, ok := data.LookupFacts(dataset); {
			case wasFolder && isFolder: // the run's image folder, moved: its test images from there
				if cfg.Source == cfg.Dataset {
					cfg.Source = dataset
				}
				cfg.Dataset = dataset
			case !ok || f.Name != cfg.Dataset:
				return cfg, config.FieldErrorf("dataset", "the artifact was distilled for %s, not %s", cfg.Dataset, dataset)
			}
		}
		if path, folder := data.ImageFolderPath(cfg.Dataset); folder && cfg.NumClasses() == 0 {
			_, err := data.InspectImageFolder(path)
			return cfg, config.FieldErrorf("dataset", "the run's image folder cannot be read (moved?): %v; name where it is now as imagefolder:PATH", err)
		}
		return cfg, nil
	}
	if dataset == "" {
		return config.Config{}, config.FieldErrorf("dataset", "%s has no %s, so name the target dataset", art.Dir, ReportFile)
	}
	if f, ok := data.LookupFacts(dataset); ok {
		want := [3]int64{1, 28, 28}
		if f.Colour {
			want = [3]int64{3, 32, 32}
		}
		if got := [3]int64{art.Shape[1], art.Shape[2], art.Shape[3]}; got != want {
			return config.Config{}, config.FieldErrorf("dataset", "its images are %d×%d×%d, those of %s/%s are %d×%d×%d",
				want[0], want[1], want[2], art.Dir, DistilledFile, got[0], got[1], got[2])
		}
	}
	cfg := config.Default()
	cfg.Dataset = dataset
	cfg.BaseExamples = int(art.Shape[0])
	cfg.BaseSelection = config.SelectUnbalanced
	return cfg.Resolved()
}

// Resolved returns ec with every default filled in (see EvalConfig) and checked against
// the artifact: each problem with a setting is a *FieldError naming it (arch, optimizer,
// lr, momentum, steps, models, batch, device, dataset).
func (ec EvalConfig) Resolved(art *Artifact) (EvalConfig, error) {
	cfg, err := EvalDataConfig(art, ec.Dataset)
	if err != nil {
		return ec, err
	}
	if cfg.NumClasses() != art.Classes {
		return ec, config.FieldErrorf("dataset", "the labels have %d classes but %s has %d", art.Classes, cfg.Dataset, cfg.NumClasses())
	}
	ec.Dataset = cfg.Dataset
	archFromReport := ec.Arch == ""
	if archFromReport {
		ec.Arch = cfg.EvalArch
	}
	if ec, err = ec.resolveRecipe(art, cfg); err != nil {
		return ec, err
	}
	if ec.Recipe == RecipeDD {
		return ec, checkArch(art, ec.Arch, archFromReport)
	}
	if ec.Optimizer == "" {
		ec.Optimizer = "adam"
	}
	if ec.LR == 0 {
		ec.LR = map[string]float64{"adam": 1e-3, "sgd": 0.01}[ec.Optimizer]
	}
	if ec.Steps == 0 && art.Report != nil {
		ec.Steps = art.Report.T
	}
	if ec.Models == 0 {
		ec.Models = cfg.EvalModels
	}
	if ec.Batch == 0 {
		ec.Batch = cfg.EvalBatch
	}
	if ec.RR == nil {
		rr := art.Report != nil && cfg.Method == config.MethodRR
		ec.RR = &rr
	}
	if ec.Seed == 0 {
		ec.Seed = cfg.Seed
	}
	if ec.Device == "" {
		ec.Device = "cpu"
	}
	switch {
	case ec.Optimizer != "adam" && ec.Optimizer != "sgd":
		return ec, config.FieldErrorf("optimizer", "unknown optimiser %q (want adam or sgd)", ec.Optimizer)
	case !isFinite(ec.LR) || ec.LR <= 0:
		return ec, config.FieldErrorf("lr", "must be a positive number, got %v", ec.LR)
	case ec.Momentum != 0 && ec.Optimizer != "sgd":
		return ec, config.FieldErrorf("momentum", "applies to the sgd optimiser only")
	case math.IsNaN(ec.Momentum) || ec.Momentum < 0 || ec.Momentum >= 1:
		return ec, config.FieldErrorf("momentum", "must be in [0, 1), got %v", ec.Momentum)
	case ec.Steps < 1 && art.Report == nil:
		return ec, config.FieldErrorf("steps", "must be at least 1, got %d (the artifact has no report to take T from)", ec.Steps)
	case ec.Steps < 1 || ec.Steps > config.MaxTrainSteps:
		return ec, config.FieldErrorf("steps", "%s", config.CountMessage(int64(ec.Steps), 1, config.MaxTrainSteps, config.WhySteps))
	case ec.Models < 1 || ec.Models > config.MaxEvalModels:
		return ec, config.FieldErrorf("models", "%s", config.CountMessage(int64(ec.Models), 1, config.MaxEvalModels, config.WhyModels))
	case ec.Batch < 1:
		return ec, config.FieldErrorf("batch", "must be at least 1, got %d", ec.Batch)
	}
	if _, err := torch.ParseDevice(ec.Device); err != nil {
		return ec, config.NewFieldError("device", err)
	}
	return ec, checkArch(art, ec.Arch, archFromReport)
}

// checkArch builds arch for the artifact's images to check it; where it is the run's own
// TorchScript network, taken by default (fromReport), the file must be the one the run
// used: a changed file is another network.
func checkArch(art *Artifact, arch string, fromReport bool) error {
	s := art.Shape
	n, err := nets.New(arch, s[1], s[2], s[3], int64(art.Classes))
	if err != nil {
		return config.FieldErrorf("arch", "%s: %s", arch, strings.TrimPrefix(err.Error(), "nets: "))
	}
	n.Close()
	if was := recordedSHA256(art, arch); fromReport && was != "" && n.FileSHA256 != was {
		return config.FieldErrorf("arch", "%s has changed since the run that learnt these labels used it (sha256 %s then, %s now): "+
			"restore the file, or give it as the arch explicitly to evaluate on the file as it is now", arch, was, n.FileSHA256)
	}
	return nil
}

// recordedSHA256 is the SHA-256 the artifact's run recorded for the TorchScript network
// arch ("" when it recorded none).
func recordedSHA256(art *Artifact, arch string) string {
	if art.Report == nil {
		return ""
	}
	return art.Report.NetworkSHA256[arch]
}

// resolveRecipe chooses the recipe and, for method dd's, fills and checks its settings.
func (ec EvalConfig) resolveRecipe(art *Artifact, cfg config.Config) (EvalConfig, error) {
	overridden := ec.Optimizer != "" || ec.LR != 0 || ec.Momentum != 0 || ec.Steps != 0 || ec.Batch != 0 || ec.RR != nil
	if ec.Recipe == RecipeDD && art.StepLRs != nil && cfg.DDSteps > 0 {
		// The values dd fixes itself (a resolved EvalConfig) are no override.
		overridden = (ec.Optimizer != "" && ec.Optimizer != "sgd") || ec.LR != 0 || ec.Momentum != 0 ||
			(ec.Steps != 0 && ec.Steps != len(art.StepLRs)) || (ec.Batch != 0 && ec.Batch != int(art.Shape[0])/cfg.DDSteps) ||
			(ec.RR != nil && *ec.RR)
	}
	switch ec.Recipe {
	case "":
		ec.Recipe = RecipeStandard
		if art.StepLRs != nil && !overridden {
			ec.Recipe = RecipeDD
		}
	case RecipeStandard:
	case RecipeDD:
		if art.StepLRs == nil {
			return ec, config.FieldErrorf("recipe", "dd trains with learnt step sizes, and %s has none (not written by method dd)", art.Dir)
		}
		if overridden {
			return ec, config.FieldErrorf("recipe", "dd trains with the artifact's step sizes, order and step count: optimizer, lr, momentum, steps, batch and rr do not apply")
		}
	default:
		return ec, config.FieldErrorf("recipe", "unknown recipe %q (want standard or dd)", ec.Recipe)
	}
	if ec.Recipe != RecipeDD {
		return ec, nil
	}
	if art.Report == nil || cfg.Method != config.MethodDD || cfg.DDSteps < 1 || int(art.Shape[0])%cfg.DDSteps != 0 {
		return ec, config.FieldErrorf("recipe", "dd needs the report.json of a method dd run (its dd_steps lay out the images)")
	}
	rr := false
	ec.Optimizer, ec.LR, ec.Steps, ec.Batch, ec.RR = "sgd", 0, len(art.StepLRs), int(art.Shape[0])/cfg.DDSteps, &rr
	if ec.Models == 0 {
		ec.Models = cfg.EvalModels
	}
	if ec.Seed == 0 {
		ec.Seed = cfg.Seed
	}
	if ec.Device == "" {
		ec.Device = "cpu"
	}
	if ec.Models < 1 || ec.Models > config.MaxEvalModels {
		return ec, config.FieldErrorf("models", "must be between 1 and %d, got %d", config.MaxEvalModels, ec.Models)
	}
	if _, err := torch.ParseDevice(ec.Device); err != nil {
		return ec, config.NewFieldError("device", err)
	}
	return ec, nil
}

// EvalResult is Evaluate's outcome.
type EvalResult struct {
	Recipe string `json:"recipe"` // standard or dd (EvalConfig.Recipe)
	Arch   string `json:"arch"`
	// ArchSHA256 is the SHA-256 of the TorchScript file the models were built from ("" for
	// the built-in networks).
	ArchSHA256 string    `json:"arch_sha256,omitempty"`
	Optimizer  string    `json:"optimizer"`
	LR         float64   `json:"lr"`
	Steps      int       `json:"steps"`
	RR         bool      `json:"rr"`
	Accuracies []float64 `json:"test_accuracies"`
	Mean       float64   `json:"test_accuracy_mean"`
	Std        float64   `json:"test_accuracy_std"` // population
	// Diverged counts the models whose parameters went non-finite; they are left out of
	// Accuracies, Mean and Std.
	Diverged int `json:"diverged_models"`
}

// Evaluate trains ec.Models fresh models on the artifact's images and labels and scores
// them on test (images normalised like the artifact's, labels in its label space).
func Evaluate(ctx context.Context, art *Artifact, test *data.Split, ec EvalConfig) (*EvalResult, error) {
	return torch.Guard("labeldistill", func() (*EvalResult, error) { return evaluate(ctx, art, test, ec) })
}

func evaluate(ctx context.Context, art *Artifact, test *data.Split, ec EvalConfig) (*EvalResult, error) {
	ec, err := ec.Resolved(art)
	if err != nil {
		return nil, err
	}
	if test == nil || test.N == 0 {
		return nil, fmt.Errorf("evaluate: no test data")
	}
	cfg, err := EvalDataConfig(art, ec.Dataset)
	if err != nil {
		return nil, err
	}
	dev, err := evalDevice(ec.Device, ec.AllowTF32)
	if err != nil {
		return nil, err
	}
	s := art.Shape
	net, err := nets.New(ec.Arch, s[1], s[2], s[3], int64(art.Classes))
	if err != nil {
		return nil, err
	}
	defer net.Close()
	sc := torch.NewScope()
	defer sc.Close()
	images, table, err := art.Tensors(dev)
	if err != nil {
		return nil, err
	}
	x, y, err := engine.SplitTensors(test, [3]int64{s[1], s[2], s[3]}, dev)
	if err != nil {
		return nil, fmt.Errorf("test data: %w", err)
	}
	tr := &train.Trainer{Net: net, RR: *ec.RR, Cfg: cfg, Images: images, Labels: table, Batch: ec.Batch,
		Opt: train.OptSpec{Kind: ec.Optimizer, LR: ec.LR, Momentum: ec.Momentum}, Device: dev, Progress: ec.Progress}
	var saver *train.ModelSaver
	if ec.SaveModels != "" {
		if saver, err = train.NewModelSaver(ec.SaveModels); err != nil {
			return nil, config.NewFieldError("save-models", err)
		}
		tr.Trained = saver.Save
	}
	if ec.Recipe == RecipeDD {
		tr.Net = net.XavierInit()
		tr.Schedule = engine.DDSchedule(int(s[0]), cfg.DDSteps, art.StepLRs)
	}
	mode := train.Mode(dev)
	progress := &evalProgress{}
	if ec.ProgressDir != "" && saver == nil && mode == nets.BodyPerModel {
		if progress, err = openEvalProgress(ec.ProgressDir, art, test, ec, net.FileSHA256); err != nil {
			return nil, err
		}
		defer progress.close()
		tr.Together = 1 // recorded model by model: the same bits as together on the CPU
		tr.Scored = progress.scored
	}
	done := progress.accuracies()
	rest, err := tr.TestRange(ctx, ec.Steps, len(done), ec.Models, uint64(ec.Seed), "evaluate", x, y, mode)
	if err != nil {
		return nil, err
	}
	accs := append(done, rest...)
	if err := progress.finish(); err != nil && ec.Notes != nil {
		ec.Notes("warning: " + err.Error())
	}
	if saver != nil {
		if err := saver.WriteManifest(net, *ec.RR, ec.Steps, accs); err != nil {
			return nil, err
		}
	}
	accs, diverged := train.KeepFinite(accs)
	if len(accs) == 0 {
		de := &labeldistill.DivergedError{Purpose: "evaluate", Models: ec.Models, Steps: ec.Steps, Field: "lr", LR: ec.LR}
		if ec.Recipe == RecipeDD { // no --lr: the artifact's own step sizes
			de.Field, de.LR, de.Cause = "", 0, engine.LearntStepsCause(art.StepLRs)
		}
		return nil, de
	}
	res := &EvalResult{Recipe: ec.Recipe, Arch: ec.Arch, ArchSHA256: net.FileSHA256, Optimizer: ec.Optimizer, LR: ec.LR, Steps: ec.Steps, RR: *ec.RR, Accuracies: accs, Diverged: diverged}
	res.Mean, res.Std = train.MeanStd(accs)
	return res, nil
}

// Tensors are the artifact's images (N, C, H, W) and labels (N, classes) as tensors on dev,
// in the caller's scope.
func (a *Artifact) Tensors(dev torch.Device) (images, labels *torch.Tensor, err error) {
	s := a.Shape
	var c torch.Chain
	images = c.T(onDevice(c.T(torch.FromFloat32(a.Images, s[0], s[1], s[2], s[3])), dev))
	labels = c.T(onDevice(c.T(torch.FromFloat32(a.Labels, s[0], int64(a.Classes))), dev))
	return images, labels, c.Err()
}

// onDevice is t on dev (t itself on the CPU).
func onDevice(t *torch.Tensor, dev torch.Device) (*torch.Tensor, error) {
	if dev == torch.CPU {
		return t, nil
	}
	return t.To(dev)
}

// evalDevice parses an evaluation's device and applies its TF32 setting, and libtorch's
// thread count to OpenBLAS too (torch.SetNumThreads).
func evalDevice(device string, allowTF32 bool) (torch.Device, error) {
	dev, err := torch.ParseDevice(device)
	if err != nil {
		return dev, err
	}
	if err := torch.SetAllowTF32(allowTF32); err != nil {
		return dev, err
	}
	return dev, torch.SetNumThreads(torch.NumThreads())
}
