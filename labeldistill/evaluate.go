package labeldistill

// evaluate.go: `ldtorch evaluate` as a library call: train fresh models on a distilled
// artifact's labels (fresh.go) and test them; the seeds every evaluation derives its models'
// from (subSeed).

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"strings"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
)

// subSeed derives an independent seed for one purpose and index (splitmix64 mixing).
func subSeed(seed uint64, purpose string, i int) uint64 {
	h := seed ^ 0x9e3779b97f4a7c15
	for _, b := range []byte(purpose) {
		h = mix64(h ^ uint64(b))
	}
	return mix64(h ^ uint64(i))
}

func mix64(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// EvalConfig configures Evaluate: training fresh models on a distilled artifact, possibly
// with another architecture, optimizer or step count (the paper's flexibility studies).
// Zero values are defaults, filled by Resolved from the artifact's report (report.json), or
// for an artifact without one from the defaults for Dataset.
type EvalConfig struct {
	Arch      string  // "lenet", "alexnet" or "resnet"; "" = the report's eval_arch
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
	// Progress, when set, hears how much of the work is done (training steps and scoring
	// blocks of all the models, in arbitrary units: done of total).
	Progress func(done, total int)
}

// EvalDataConfig returns the configuration art's fresh models are trained and tested under
// (what LoadTestSplit takes): its report's, or for an artifact without report.json the
// defaults for dataset, which must then fit the artifact's images. Problems are
// *FieldError values naming "dataset".
func EvalDataConfig(art *Artifact, dataset string) (config.Config, error) {
	if art.Report != nil {
		cfg := art.Report.Config
		if dataset != "" {
			if f, ok := data.LookupFacts(dataset); !ok || f.Name != cfg.Dataset {
				return cfg, config.FieldErrorf("dataset", "the artifact was distilled for %s, not %s", cfg.Dataset, dataset)
			}
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
	if ec.Arch == "" {
		ec.Arch = cfg.EvalArch
	}
	if ec.Optimizer == "" {
		ec.Optimizer = "adam"
	}
	if ec.LR == 0 {
		ec.LR = map[string]float64{"adam": 1e-3, "sgd": 0.01}[ec.Optimizer]
	}
	if ec.Steps == 0 && art.Report != nil {
		ec.Steps = art.Report.Steps
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
		return ec, config.FieldErrorf("optimizer", "unknown optimizer %q (want adam or sgd)", ec.Optimizer)
	case !finite(ec.LR) || ec.LR <= 0:
		return ec, config.FieldErrorf("lr", "must be a positive number, got %v", ec.LR)
	case ec.Momentum != 0 && ec.Optimizer != "sgd":
		return ec, config.FieldErrorf("momentum", "applies to the sgd optimizer only")
	case math.IsNaN(ec.Momentum) || ec.Momentum < 0 || ec.Momentum >= 1:
		return ec, config.FieldErrorf("momentum", "must be in [0, 1), got %v", ec.Momentum)
	case ec.Steps < 1:
		return ec, config.FieldErrorf("steps", "must be at least 1, got %d (the artifact has no report to take T from)", ec.Steps)
	case ec.Models < 1 || ec.Models > config.MaxEvalModels:
		return ec, config.FieldErrorf("models", "must be between 1 and %d, got %d", config.MaxEvalModels, ec.Models)
	case ec.Batch < 1:
		return ec, config.FieldErrorf("batch", "must be at least 1, got %d", ec.Batch)
	}
	if _, err := torch.ParseDevice(ec.Device); err != nil {
		return ec, config.NewFieldError("device", err)
	}
	s := art.Shape
	if _, err := nets.New(ec.Arch, s[1], s[2], s[3], int64(art.Classes)); err != nil {
		return ec, config.FieldErrorf("arch", "%s: %s", ec.Arch, strings.TrimPrefix(err.Error(), "nets: "))
	}
	return ec, nil
}

// EvalResult is Evaluate's outcome.
type EvalResult struct {
	Arch       string    `json:"arch"`
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
func Evaluate(ctx context.Context, art *Artifact, test *Split, ec EvalConfig) (res *EvalResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("labeldistill: internal error: %v", r)
		}
	}()
	if ec, err = ec.Resolved(art); err != nil {
		return nil, err
	}
	if test == nil || test.N() == 0 {
		return nil, fmt.Errorf("evaluate: no test data")
	}
	cfg, err := EvalDataConfig(art, ec.Dataset)
	if err != nil {
		return nil, err
	}
	dev, err := torch.ParseDevice(ec.Device)
	if err != nil {
		return nil, err
	}
	if err := torch.SetAllowTF32(ec.AllowTF32); err != nil {
		return nil, err
	}
	if err := applyThreads(0); err != nil { // BLAS threads and the host allocator
		return nil, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s := art.Shape
	net, err := nets.New(ec.Arch, s[1], s[2], s[3], int64(art.Classes))
	if err != nil {
		return nil, err
	}
	shape := [3]int64{s[1], s[2], s[3]}
	base, err := upload(&Split{Images: art.Images, Labels: make([]int64, s[0])}, shape, dev)
	if err != nil {
		return nil, err
	}
	defer base.free()
	testDev, err := upload(test, shape, dev)
	if err != nil {
		return nil, fmt.Errorf("test data: %w", err)
	}
	defer testDev.free()
	table, err := torch.FromFloat32(art.Labels, s[0], int64(art.Classes))
	if err != nil {
		return nil, err
	}
	if table, err = toDevice(table, dev); err != nil {
		return nil, err
	}
	defer table.Free()
	tr := &trainer{net: net, rr: *ec.RR, cfg: cfg, baseX: base.x, table: table, batch: ec.Batch,
		opt: optSpec{Kind: ec.Optimizer, LR: ec.LR, Momentum: ec.Momentum}, dev: dev, progress: ec.Progress}
	accs, err := tr.evaluateModels(ctx, ec.Steps, ec.Models, uint64(ec.Seed), "evaluate", testDev.x, testDev.y)
	if err != nil {
		return nil, err
	}
	accs, diverged := keepFinite(accs)
	if len(accs) == 0 {
		return nil, &DivergedError{Purpose: "evaluate", Models: ec.Models, Steps: ec.Steps, Field: "lr", LR: ec.LR}
	}
	res = &EvalResult{Arch: ec.Arch, Optimizer: ec.Optimizer, LR: ec.LR, Steps: ec.Steps, RR: *ec.RR, Accuracies: accs, Diverged: diverged}
	res.Mean, res.Std = MeanStd(accs)
	return res, nil
}
