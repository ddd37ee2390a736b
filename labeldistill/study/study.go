package study

// study.go: the paper's flexibility and sensitivity studies on a distilled artifact: fresh
// models trained with other step counts (steps), optimisers and learning rates
// (optimizer), architectures beside their true-label baselines (arch), and RR labels used
// to train a standard model with early stopping on validation (rr-standard); on a method
// dd artifact, DD's sensitivity studies (steps, lr, order, arch: dd.go); the flexibility
// figure's data (flexibility.go).

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/labeldistill/engine"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/fileio/boundedread"
)

// Kinds lists the study kinds.
var Kinds = []string{Steps, Optimizer, Arch, RRStandard, LR, Order}

// Defaults of the studies: the paper's step deviations (Table "Sensitivity to number of
// training steps") and a learning-rate grid around each optimiser's usual value.
var (
	DefaultStudyDeltas   = []int{-50, -20, -10, 0, 10, 20, 50, 100}
	DefaultStudyAdamLRs  = []float64{1e-4, 3e-4, 1e-3, 3e-3, 1e-2}
	DefaultStudySGDLRs   = []float64{1e-3, 3e-3, 1e-2, 3e-2, 1e-1}
	DefaultStudyMomenta  = []float64{0, 0.9}
	DefaultStudyArchs    = []string{config.ArchLeNet, config.ArchAlexNet, config.ArchResNet}
	DefaultStudyOptimize = []string{"adam", "sgd"}
)

// Config selects what a study varies; zero values take the defaults above and the
// artifact's settings (models, seed, batch).
type Config struct {
	Models     int       // M fresh models per setting; 0 = the artifact's eval_models
	Seed       int64     // 0 = the artifact's seed
	Deltas     []int     // steps: T + Δ for each Δ (used when Steps is empty)
	Steps      []int     // steps: absolute step counts; also the step count of the other studies (first value; default T; refused by dd's)
	Optimizers []string  // optimizer: "adam", "sgd"
	LRs        []float64 // optimizer: learning rates (default per optimiser)
	Momenta    []float64 // optimizer: SGD momenta
	Archs      []string  // arch: architectures (default: the paper's three, those that fit the images; convnet on request)
	Device     string
	// Dataset is where the run's image folder is now ("imagefolder:PATH", as
	// artifact.EvalConfig.Dataset), when it moved; "" = where the run recorded it.
	Dataset string
	// Progress hears the setting being trained and its training steps done.
	Progress func(setting string, done, total int)
}

// Data is the data a study scores on: the target's test split, and its validation
// split for rr-standard's early stopping.
type Data struct {
	Test, Validation *data.Split
	Files            map[string]string // the data files' checksums (labeldistill.Data.Files)
	Warnings         []string          // the data's warnings
}

// LoadData reads the test and validation splits of an artifact's configuration (the
// same split as the distillation: same base seed).
func LoadData(cfg config.Config) (*Data, error) {
	ds, err := labeldistill.LoadData(cfg)
	if err != nil {
		return nil, err
	}
	return &Data{Test: &ds.Test, Validation: &ds.Validation, Files: ds.Files, Warnings: ds.Warnings}, nil
}

// Run runs one study on an artifact (with its report).
func Run(ctx context.Context, kind string, art *artifact.Artifact, d *Data, sc Config) (*Study, error) {
	if art.Report == nil {
		return nil, errors.New("study: the artifact has no report.json (T, method and data are taken from it)")
	}
	rep := art.Report
	cfg := rep.Config
	st, settings, err := plan(kind, art, sc)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	for i := range settings {
		s := &settings[i]
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		a := art
		if s.Labels == "true" {
			a = withTrueLabels(art)
		}
		if kind == RRStandard && !s.RR {
			best, valErr, err := searchSteps(ctx, a, d.Validation, cfg, sc.Device, uint64(st.Seed))
			if err != nil {
				return nil, err
			}
			s.Steps, s.ValidationErrors = best, valErr
			s.Label = fmt.Sprintf("standard model, early stopping on validation (%d steps)", best)
		}
		rr := s.RR
		ec := artifact.EvalConfig{Arch: s.Arch, Optimizer: s.Optimizer, LR: s.LR, Momentum: s.Momentum, Steps: s.Steps,
			Models: st.Models, RR: &rr, Seed: st.Seed, Device: sc.Device, Dataset: sc.Dataset}
		if sc.Progress != nil {
			label := s.Label
			ec.Progress = func(done, total int) { sc.Progress(label, done, total) }
		}
		var res *artifact.EvalResult
		var err error
		if s.Recipe == artifact.RecipeDD {
			res, err = ddEvaluate(ctx, a, d.Test, s, ec)
		} else {
			res, err = artifact.Evaluate(ctx, a, d.Test, ec)
		}
		var de *labeldistill.DivergedError
		switch {
		case errors.As(err, &de): // every model diverged: a result of the study, not a failure
			s.Accuracies, s.Diverged = []float64{}, st.Models
			s.Mean, s.Std = 0, 0
			st.Notes = append(st.Notes, fmt.Sprintf("%s: all %d models diverged", s.Label, st.Models))
			continue
		case err != nil:
			return nil, fmt.Errorf("%s: %w", s.Label, err)
		}
		s.Accuracies, s.Mean, s.Std, s.Diverged = res.Accuracies, res.Mean, res.Std, res.Diverged
	}
	st.Settings = settings
	st.WallSeconds = time.Since(start).Seconds()
	return st, nil
}

// plan is the study Run would run: its record without results, and its settings.
func plan(kind string, art *artifact.Artifact, sc Config) (*Study, []Setting, error) {
	if art.Report == nil {
		return nil, nil, errors.New("study: the artifact has no report.json (T, method and data are taken from it)")
	}
	rep := art.Report
	cfg := rep.Config
	sum, err := distilledSHA256(art)
	if err != nil {
		return nil, nil, err
	}
	st := &Study{Study: kind, Artifact: art.Dir, Method: cfg.Method, MethodName: cfg.MethodName(), Dataset: cfg.Dataset, Source: cfg.Source,
		LearntThrough: cfg.Arch, BaseExamples: cfg.BaseExamples, T: rep.T, Models: sc.Models, Seed: sc.Seed, DistilledSHA256: sum}
	if st.Models == 0 {
		st.Models = cfg.EvalModels
	}
	if st.Seed == 0 {
		st.Seed = cfg.Seed
	}
	rr := cfg.Method == config.MethodRR
	steps := rep.T
	if len(sc.Steps) > 0 && kind != Steps {
		steps = sc.Steps[0]
	}
	base := Setting{Labels: "distilled", Arch: cfg.EvalArch, Optimizer: "adam", LR: cfg.EvalLR, Steps: steps, RR: rr}
	var settings []Setting
	if isDD(art) && slices.Contains(DDKinds, kind) {
		settings, err = ddSettings(kind, art, sc, st)
	} else {
		settings, err = labelSettings(kind, art, sc, st, base, steps)
	}
	return st, settings, err
}

// distilledSHA256 is the SHA-256 of the artifact's distilled.npz: its report's record
// (which artifact.Read checked against the file), else the file's own.
func distilledSHA256(art *artifact.Artifact) (string, error) {
	if d := art.Report.Distilled; d != nil && d.SHA256 != "" {
		return d.SHA256, nil
	}
	b, err := boundedread.ReadRegularFile(filepath.Join(art.Dir, artifact.DistilledFile), data.MaxDistilledBytes, "distilled data file")
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// labelSettings are the settings of the studies that train with the standard recipe
// (every study of an artifact other than method dd's, and optimizer and rr-standard of a
// method dd artifact).
func labelSettings(kind string, art *artifact.Artifact, sc Config, st *Study, base Setting, steps int) ([]Setting, error) {
	rep := art.Report
	cfg := rep.Config
	rr := base.RR
	var settings []Setting
	if art.StepLRs != nil {
		st.Notes = append(st.Notes, "a method dd artifact: every setting trains with the standard recipe (the optimizer on random minibatches of eval_batch, soft cross-entropy); its own recipe (learnt step sizes in their fixed order) is ldtorch evaluate's default")
	}
	switch kind {
	case Steps:
		if len(sc.Steps) > 0 {
			for _, s := range sc.Steps {
				x := base
				x.Steps, x.Label = s, strconv.Itoa(s)
				delta := s - rep.T
				x.Delta = &delta
				settings = append(settings, x)
			}
		} else {
			for _, dlt := range orDefault(sc.Deltas, DefaultStudyDeltas) {
				x := base
				x.Steps = rep.T + dlt
				if x.Steps < 1 {
					st.Notes = append(st.Notes, fmt.Sprintf("T%+d = %d steps skipped (below 1)", dlt, x.Steps))
					continue
				}
				delta := dlt
				x.Delta, x.Label = &delta, fmt.Sprintf("T%+d", dlt)
				settings = append(settings, x)
			}
		}
	case Optimizer:
		for _, opt := range orDefault(sc.Optimizers, DefaultStudyOptimize) {
			lrs := sc.LRs
			momenta := []float64{0}
			switch opt {
			case "adam":
				lrs = orDefault(lrs, DefaultStudyAdamLRs)
			case "sgd":
				lrs = orDefault(lrs, DefaultStudySGDLRs)
				momenta = orDefault(sc.Momenta, DefaultStudyMomenta)
			default:
				return nil, fmt.Errorf("optimizers: unknown optimiser %q (want adam or sgd)", opt)
			}
			for _, m := range momenta {
				for _, lr := range lrs {
					x := base
					x.Optimizer, x.LR, x.Momentum = opt, lr, m
					x.Label = fmt.Sprintf("%s lr %g", opt, lr)
					if opt == "sgd" {
						x.Label = fmt.Sprintf("sgd momentum %g lr %g", m, lr)
					}
					settings = append(settings, x)
				}
			}
		}
	case Arch:
		trueSteps := steps
		for _, k := range []string{config.BaselineTrue, config.BaselineTrue + "_rr"} {
			if b, ok := rep.Baselines[k]; ok && b.Steps > 0 && len(sc.Steps) == 0 {
				trueSteps = b.Steps
			}
		}
		haveTrue := art.BaseClasses != nil && !cfg.IsCrossDataset() && (!rep.LearntImages() || slices.Contains(rep.Learnt, artifact.LearntLabels))
		switch {
		case !haveTrue && rep.LearntImages():
			st.Notes = append(st.Notes, "no true-label baseline: the images are learnt for one-hot labels of their classes, which are the true labels already (and there are no real images to give them)")
		case !haveTrue:
			st.Notes = append(st.Notes, "no true-label baseline: the base examples have no labels in the target's label space (cross-dataset, or an artifact before schema 2)")
		default:
			st.Notes = append(st.Notes, fmt.Sprintf("true-label baselines train %d steps (the distillation's true-label baseline search, else T)", trueSteps))
		}
		for _, a := range orDefault(sc.Archs, DefaultStudyArchs) {
			if n, err := nets.New(a, art.Shape[1], art.Shape[2], art.Shape[3], int64(art.Classes)); err != nil {
				if len(sc.Archs) > 0 {
					return nil, fmt.Errorf("archs: %s does not fit %d×%d×%d images: %s", a, art.Shape[1], art.Shape[2], art.Shape[3], strings.TrimPrefix(err.Error(), "nets: "))
				}
				st.Notes = append(st.Notes, fmt.Sprintf("%s left out: %s", a, strings.TrimPrefix(err.Error(), "nets: ")))
				continue
			} else {
				n.Close() // built to check it
			}
			x := base
			x.Arch, x.Label = a, a+" (distilled labels)"
			settings = append(settings, x)
			if haveTrue {
				y := x
				y.Labels, y.Steps, y.Label = "true", trueSteps, a+" (true labels)"
				settings = append(settings, y)
			}
		}
	case RRStandard:
		if !rr {
			return nil, fmt.Errorf("study rr-standard: the artifact was distilled with method %s; it needs LD RR labels (method rr)", cfg.Method)
		}
		x := base
		x.Label = "RR model (as distilled)"
		y := base
		y.RR, y.Label = false, "standard model, early stopping on validation"
		settings = append(settings, x, y)
	case LR, Order:
		return nil, fmt.Errorf("study %s: the artifact was distilled with method %s (%s); the %s study varies method dd's learnt step sizes and fixed order, so it needs a method dd artifact", kind, cfg.Method, cfg.MethodName(), kind)
	default:
		return nil, fmt.Errorf("study: unknown study %q (want %s)", kind, strings.Join(Kinds, ", "))
	}
	if len(settings) == 0 { // every delta left T+Δ below 1: nothing to train, nothing to write
		return nil, config.FieldErrorf("deltas", "no step count left: %s (T = %d)", strings.Join(st.Notes, "; "), rep.T)
	}
	if len(settings) > config.MaxStudySettings {
		return nil, config.FieldErrorf("settings", "%s", config.CountMessage(int64(len(settings)), 1, config.MaxStudySettings, "each setting trains M models"))
	}
	return settings, nil
}

func orDefault[T any](v, def []T) []T {
	if len(v) > 0 {
		return v
	}
	return def
}

// withTrueLabels is the artifact with one-hot true classes as labels.
func withTrueLabels(art *artifact.Artifact) *artifact.Artifact {
	t := *art
	t.Labels = make([]float32, len(art.Labels))
	for i, c := range art.BaseClasses {
		t.Labels[i*art.Classes+int(c)] = 1
	}
	return &t
}

// searchSteps trains one standard (non-RR) model on the artifact along the baseline step
// grid, measuring validation error at each grid point, and returns the best step count
// (earliest on ties), as the baselines' search does.
func searchSteps(ctx context.Context, art *artifact.Artifact, val *data.Split, cfg config.Config, device string, seed uint64) (int, map[int]float64, error) {
	if val == nil || val.N == 0 {
		return 0, nil, errors.New("study rr-standard: no validation data")
	}
	if device == "" {
		device = "cpu"
	}
	dev, err := torch.ParseDevice(device)
	if err != nil {
		return 0, nil, err
	}
	type found struct {
		steps  int
		errors map[int]float64
	}
	f, err := torch.Guard("study", func() (found, error) {
		s := art.Shape
		net, err := nets.New(cfg.EvalArch, s[1], s[2], s[3], int64(art.Classes))
		if err != nil {
			return found{}, err
		}
		defer net.Close()
		sc := torch.NewScope()
		defer sc.Close()
		images, table, err := art.Tensors(dev)
		if err != nil {
			return found{}, err
		}
		vx, vy, err := engine.SplitTensors(val, [3]int64{s[1], s[2], s[3]}, dev)
		if err != nil {
			return found{}, err
		}
		grid := cfg.BaselineSteps
		if len(grid) == 0 {
			grid = config.BaselineStepGrid(cfg.BaselineMaxSteps)
		}
		tr := &train.Trainer{Net: net, RR: false, Cfg: cfg, Images: images, Labels: table, Batch: cfg.EvalBatch, Opt: train.AdamSpec(cfg.EvalLR), Device: dev}
		steps, errs, err := tr.SearchSteps(ctx, grid, train.Seed(seed, "study-rr-standard-search", 0), func(m *train.Models) (float64, error) {
			return m.Accuracy(ctx, vx, vy)
		})
		return found{steps, errs}, err
	})
	return f.steps, f.errors, err
}

// Table formats a study as rows of text: setting, mean ± std, models, steps.
func Table(st *Study) [][]string {
	rows := [][]string{{"setting", "test accuracy (mean ± std)", "models", "steps"}}
	for _, s := range st.Settings {
		acc := fmt.Sprintf("%.2f%% ± %.2f", s.Mean, s.Std)
		if len(s.Accuracies) == 0 {
			acc = "diverged"
		}
		models := strconv.Itoa(len(s.Accuracies))
		if s.Diverged > 0 {
			models += fmt.Sprintf(" (+%d diverged)", s.Diverged)
		}
		rows = append(rows, []string{s.Label, acc, models, strconv.Itoa(s.Steps)})
	}
	return rows
}
