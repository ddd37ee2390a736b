package artifact

// ddranking.go: the soft-label evaluation of the DD-Ranking benchmark applied to an
// artifact (`ldtorch evaluate --protocol ddranking`, docs/ALGORITHM.md §13): ConvNet-3
// models trained for many epochs with SGD, a step schedule and DSA augmentation on the
// distilled images with hard and with distilled labels, on random real images with a
// teacher's labels and on the full data, and the fairness scores HLR, IOR and their
// combination, written to DIR/evaluations/ddranking.json.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/nets/augment"
	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/atomicfile"
)

// Evaluation protocols (`ldtorch evaluate --protocol`).
const (
	ProtocolPaper     = "paper"     // Evaluate: the paper's recipe (T Adam steps)
	ProtocolDDRanking = "ddranking" // EvaluateDDRanking: DD-Ranking's soft-label evaluator
)

// Protocols lists the protocol names.
var Protocols = []string{ProtocolPaper, ProtocolDDRanking}

// The DD-Ranking recipe's defaults: its evaluation configs for ConvNet-3 (eval branch,
// e.g. DATM/CIFAR10/IPC10.yaml: 1000 epochs, StepLR every 500 epochs, SGD momentum 0.9,
// weight decay 5e-4, batch 256, 5 evaluation runs, DSA) and its code
// (ddranking/metrics/soft_label.py: the learning-rate grid, a test every 20 epochs;
// ddranking/utils/train_and_eval.py: the full-data recipe of ConvNet-3, 200 epochs at
// learning rate 0.01, StepLR every 100 epochs, γ 0.1).
const (
	DDRankingEpochs        = 1000
	DDRankingFullEpochs    = 200
	DDRankingFullLR        = 0.01
	DDRankingBatch         = 256
	DDRankingMomentum      = 0.9
	DDRankingWeightDecay   = 5e-4
	DDRankingGamma         = 0.1
	DDRankingValidateEvery = 20
	DDRankingModels        = 5
)

// DDRankingLRs is the learning-rate grid searched for every model.
var DDRankingLRs = []float64{0.001, 0.005, 0.01, 0.05, 0.1}

// Augmentation names (DDRankingConfig.Augment).
const (
	AugmentDSA  = "dsa"
	AugmentNone = "none"
)

// Where the evaluation is written inside an artifact folder.
const (
	EvaluationsFolder = "evaluations"
	DDRankingFile     = "ddranking.json"
)

// DDRankingConfig configures EvaluateDDRanking. Zero values are defaults.
type DDRankingConfig struct {
	Arch string // "" = convnet
	// Epochs, when > 0, replaces the recipe's epoch count (1000 for the distilled and random
	// images, 200 for the full data) in both recipes, for quick checks; each schedule still
	// decays at half its epochs.
	Epochs  int
	Models  int    // evaluation runs (DD-Ranking's num_eval); 0 = 5
	Augment string // "dsa" (default) or "none"
	Seed    int64  // 0 = the report's seed (1234 without a report)
	Device  string // "" = cpu
	// Dataset names the target of an artifact without report.json (see EvalConfig).
	Dataset   string
	AllowTF32 bool
	// CacheDir holds the full-data models (trained once per dataset, architecture, data
	// split, seed and recipe); "" trains the full-data model every time.
	CacheDir string
	// Progress, when set, hears each training's stage and its epochs done.
	Progress func(stage string, done, total int)
}

// Resolved fills the defaults and checks them against the artifact; problems are
// *config.FieldError values naming the setting (arch, epochs, models, augment, device,
// dataset).
func (dc DDRankingConfig) Resolved(art *Artifact) (DDRankingConfig, error) {
	cfg, err := EvalDataConfig(art, dc.Dataset)
	if err != nil {
		return dc, err
	}
	if cfg.NumClasses() != art.Classes {
		return dc, config.FieldErrorf("dataset", "the labels have %d classes but %s has %d", art.Classes, cfg.Dataset, cfg.NumClasses())
	}
	dc.Dataset = cfg.Dataset
	if dc.Arch == "" {
		dc.Arch = config.ArchConvNet
	}
	if dc.Models == 0 {
		dc.Models = DDRankingModels
	}
	if dc.Augment == "" {
		dc.Augment = AugmentDSA
	}
	if dc.Seed == 0 {
		dc.Seed = cfg.Seed
	}
	if dc.Device == "" {
		dc.Device = "cpu"
	}
	switch {
	case dc.Epochs < 0:
		return dc, config.FieldErrorf("epochs", "must be at least 1, got %d", dc.Epochs)
	case dc.Models < 1 || dc.Models > config.MaxEvalModels:
		return dc, config.FieldErrorf("models", "must be between 1 and %d, got %d", config.MaxEvalModels, dc.Models)
	case dc.Augment != AugmentDSA && dc.Augment != AugmentNone:
		return dc, config.FieldErrorf("augment", "unknown augmentation %q (want %s or %s)", dc.Augment, AugmentDSA, AugmentNone)
	}
	if _, err := torch.ParseDevice(dc.Device); err != nil {
		return dc, config.NewFieldError("device", err)
	}
	s := art.Shape
	if _, err := nets.New(dc.Arch, s[1], s[2], s[3], int64(art.Classes)); err != nil {
		return dc, config.FieldErrorf("arch", "%s", strings.TrimPrefix(err.Error(), "nets: "))
	}
	return dc, nil
}

// DDRankingRecipe is one training recipe of the protocol, as recorded.
type DDRankingRecipe struct {
	Epochs        int       `json:"epochs"`
	Batch         int       `json:"batch"`
	LRs           []float64 `json:"lrs"` // the grid searched (one value: no search)
	Optimizer     string    `json:"optimiser"`
	Momentum      float64   `json:"momentum"`
	WeightDecay   float64   `json:"weight_decay"`
	StepSize      int       `json:"step_size"` // epochs between decays (StepLR); 0 = none
	Gamma         float64   `json:"gamma"`
	ValidateEvery int       `json:"validate_every"`
	Augment       string    `json:"augment"`
	Loss          string    `json:"loss"`
	Selection     string    `json:"selection"`
}

func ddrRecipe(epochs int, lrs []float64, augmentName string) DDRankingRecipe {
	aug := AugmentNone
	if augmentName == AugmentDSA {
		d := augment.Default()
		aug = fmt.Sprintf("dsa: one operation per batch of scale %g, rotate %g°, flip %g, colour (brightness %g, saturation %g, contrast %g), crop %g, cutout %g; parameters drawn per image",
			d.Scale, d.Rotate, d.Flip, d.Brightness, d.Saturation, d.Contrast, d.Crop, d.Cutout)
	}
	return DDRankingRecipe{Epochs: epochs, Batch: DDRankingBatch, LRs: slices.Clone(lrs), Optimizer: "sgd",
		Momentum: DDRankingMomentum, WeightDecay: DDRankingWeightDecay, StepSize: epochs / 2, Gamma: DDRankingGamma,
		ValidateEvery: DDRankingValidateEvery, Augment: aug,
		Loss:      "soft cross-entropy at temperature 1: mean over the batch of −Σ_c y_c log softmax(logits)_c (hard labels: one-hot y)",
		Selection: "per model: the epoch (among those validated) and the learning rate with the highest validation accuracy, the earliest and the smallest on ties; its test accuracy is reported"}
}

// DDRankingRecipes are the recipes of the distilled and random images and of the full data.
func (dc DDRankingConfig) DDRankingRecipes() (syn, full DDRankingRecipe) {
	se, fe := DDRankingEpochs, DDRankingFullEpochs
	if dc.Epochs > 0 {
		se, fe = dc.Epochs, dc.Epochs
	}
	return ddrRecipe(se, DDRankingLRs, dc.Augment), ddrRecipe(fe, []float64{DDRankingFullLR}, dc.Augment)
}

func (r DDRankingRecipe) epochRecipe(lr float64, dsa bool) train.EpochRecipe {
	e := train.EpochRecipe{Epochs: r.Epochs, Batch: r.Batch, Schedule: train.StepLR{LR: lr, StepSize: r.StepSize, Gamma: r.Gamma},
		Momentum: r.Momentum, WeightDecay: r.WeightDecay, ValidateEvery: r.ValidateEvery}
	if dsa {
		d := augment.Default()
		e.Augment = &d
	}
	return e
}

// DDRankingScores are DD-Ranking's fairness scores from accuracies given as fractions:
// hlr = full − synHard (hard-label recovery), ior = synSoft − randomSoft (improvement over
// random), and score = (e^α − e^−1)/(e − e^−1) with α = ½·ior − ½·hlr (the label-robust
// score, λ = ½), which maps α ∈ [−1, 1] onto [0, 1].
func DDRankingScores(full, synHard, synSoft, randomSoft float64) (hlr, ior, score float64) {
	hlr = full - synHard
	ior = synSoft - randomSoft
	alpha := 0.5*ior - 0.5*hlr
	score = (math.Exp(alpha) - math.Exp(-1)) / (math.E - math.Exp(-1))
	return hlr, ior, score
}

// DDRankingLabels is one kind of training set's result over the models: each model's test
// accuracy (a fraction) at its learning rate and epoch chosen on validation.
type DDRankingLabels struct {
	Images     int       `json:"images"` // per model
	Accuracies []float64 `json:"test_accuracies"`
	Mean       float64   `json:"test_accuracy_mean"`
	Std        float64   `json:"test_accuracy_std"` // population
	LRs        []float64 `json:"chosen_lrs"`
	Epochs     []int     `json:"chosen_epochs"`
	Validation []float64 `json:"validation_accuracies"`
	// Grid is every learning rate's outcome, for each model: the best validation accuracy
	// (null: diverged before its first validation), its epoch and the test accuracy there.
	Grid []DDRankingGridPoint `json:"lr_grid"`
}

// DDRankingGridPoint is one learning rate of the grid, per model.
type DDRankingGridPoint struct {
	LR         float64    `json:"lr"`
	Validation []*float64 `json:"validation_accuracies"`
	Epochs     []int      `json:"epochs"`
	Test       []*float64 `json:"test_accuracies"`
}

// DDRankingFullData is the full-data model's result (one model, hard labels, the
// full-data recipe).
type DDRankingFullData struct {
	Accuracy    float64 `json:"test_accuracy"`
	Validation  float64 `json:"validation_accuracy"`
	Epoch       int     `json:"epoch"`
	Images      int     `json:"images"`
	Seed        uint64  `json:"seed"`
	WallSeconds float64 `json:"wall_seconds"` // of its training
	// Cached: read from CacheDir, trained by an earlier evaluation.
	Cached    bool   `json:"cached"`
	CacheFile string `json:"cache_file,omitempty"`
}

// DDRankingRun is one evaluation run's (model index's) scores.
type DDRankingRun struct {
	HLR   float64 `json:"hlr"`
	IOR   float64 `json:"ior"`
	Score float64 `json:"score"`
}

// DDRankingResult is ddranking.json.
type DDRankingResult struct {
	Protocol       string `json:"protocol"`
	LdtorchVersion string `json:"ldtorch_version"`
	// DistilledSHA256 is the SHA-256 of the distilled.npz evaluated, as its report.json
	// records it (absent without a report): report shows the evaluation only beside it.
	DistilledSHA256 string `json:"distilled_sha256,omitempty"`
	Dataset         string `json:"dataset"`
	Arch            string `json:"arch"`
	Seed            int64  `json:"seed"`
	Models          int    `json:"models"`
	Device          string `json:"device"`
	// AccuracyUnit says that every accuracy and score here is a fraction in [0, 1].
	AccuracyUnit string `json:"accuracy_unit"`
	// HLR, IOR and Score are the means over the runs (DD-Ranking's reported numbers), with
	// population standard deviations.
	HLR      float64        `json:"hlr"`
	HLRStd   float64        `json:"hlr_std"`
	IOR      float64        `json:"ior"`
	IORStd   float64        `json:"ior_std"`
	Score    float64        `json:"score"`
	ScoreStd float64        `json:"score_std"`
	Runs     []DDRankingRun `json:"runs"`
	// HardLabel: the distilled images with hard labels; SoftLabel: with the distilled
	// labels; RandomSoftLabel: random real images of the same classes with the full-data
	// model's soft labels; FullData: the full data with hard labels.
	HardLabel       DDRankingLabels   `json:"hard_label"`
	SoftLabel       DDRankingLabels   `json:"soft_label"`
	RandomSoftLabel DDRankingLabels   `json:"random_soft_label"`
	FullData        DDRankingFullData `json:"full_data"`
	// HardLabels says where the distilled images' hard labels came from.
	HardLabels     string          `json:"hard_labels"`
	Recipe         DDRankingRecipe `json:"recipe"`
	FullDataRecipe DDRankingRecipe `json:"full_data_recipe"`
	WallSeconds    float64         `json:"wall_seconds"`
}

// EvaluateDDRanking scores the artifact under DD-Ranking's soft-label protocol on d (the
// artifact's data: target set, validation and test splits, as labeldistill.LoadData reads
// them for its config) and writes art.Dir/evaluations/ddranking.json.
func EvaluateDDRanking(ctx context.Context, art *Artifact, d *labeldistill.Data, dc DDRankingConfig) (*DDRankingResult, error) {
	return torch.Guard("labeldistill", func() (*DDRankingResult, error) { return evaluateDDRanking(ctx, art, d, dc) })
}

// ddrEval is one evaluation's state.
type ddrEval struct {
	ctx    context.Context
	dc     DDRankingConfig
	cfg    config.Config
	net    *nets.Net
	dev    torch.Device
	vx, vy *torch.Tensor
	tx, ty *torch.Tensor
	syn    DDRankingRecipe
	full   DDRankingRecipe
}

func evaluateDDRanking(ctx context.Context, art *Artifact, d *labeldistill.Data, dc DDRankingConfig) (*DDRankingResult, error) {
	start := time.Now()
	dc, err := dc.Resolved(art)
	if err != nil {
		return nil, err
	}
	cfg, err := EvalDataConfig(art, dc.Dataset)
	if err != nil {
		return nil, err
	}
	s := art.Shape
	if d == nil || d.Classes != art.Classes || d.Shape != [3]int64{s[1], s[2], s[3]} {
		return nil, fmt.Errorf("ddranking: the data do not match the artifact's %d×%d×%d images of %d classes", s[1], s[2], s[3], art.Classes)
	}
	for _, sp := range []*data.Split{&d.TargetSet, &d.Validation, &d.Test} {
		if sp.N == 0 {
			return nil, fmt.Errorf("ddranking: no %s data", sp.Role)
		}
	}
	evalDir := filepath.Join(art.Dir, EvaluationsFolder)
	if err := atomicfile.EnsureWritableDir(evalDir); err != nil {
		return nil, fmt.Errorf("cannot write the evaluation into %s: %w", evalDir, err)
	}
	if dc.CacheDir != "" {
		if err := atomicfile.EnsureWritableDir(dc.CacheDir); err != nil {
			return nil, config.NewFieldError("cache-dir", fmt.Errorf("cannot write the full-data cache into %s: %w", dc.CacheDir, err))
		}
	}
	dev, err := torch.ParseDevice(dc.Device)
	if err != nil {
		return nil, err
	}
	if err := torch.SetAllowTF32(dc.AllowTF32); err != nil {
		return nil, err
	}
	if err := torch.SetNumThreads(torch.NumThreads()); err != nil {
		return nil, err
	}
	net, err := nets.New(dc.Arch, s[1], s[2], s[3], int64(art.Classes))
	if err != nil {
		return nil, err
	}
	sc := torch.NewScope()
	defer sc.Close()
	e := &ddrEval{ctx: ctx, dc: dc, cfg: cfg, net: net, dev: dev}
	e.syn, e.full = dc.DDRankingRecipes()
	var c torch.Chain
	shape := d.Shape
	split := func(sp *data.Split) (x, y *torch.Tensor) {
		if c.Err() != nil {
			return nil, nil
		}
		x, y, err := labeldistill.SplitTensors(sp, shape, dev)
		c.Check(err)
		return x, y
	}
	e.vx, e.vy = split(&d.Validation)
	e.tx, e.ty = split(&d.Test)
	fx, fy := split(&d.TargetSet)
	images, soft, err := art.Tensors(dev)
	c.Check(err)
	if c.Err() != nil {
		return nil, c.Err()
	}

	res := &DDRankingResult{Protocol: ProtocolDDRanking, LdtorchVersion: labeldistill.Version, Dataset: dc.Dataset, Arch: dc.Arch,
		Seed: dc.Seed, Models: dc.Models, Device: dc.Device, AccuracyUnit: "fraction (0 to 1) of the test split classified correctly",
		Recipe: e.syn, FullDataRecipe: e.full}
	if art.Report != nil && art.Report.Distilled != nil {
		res.DistilledSHA256 = art.Report.Distilled.SHA256
	}

	// The full-data model: HLR's reference accuracy and the teacher of the random images.
	teacher, full, err := e.fullData(d, fx, fy)
	if err != nil {
		return nil, err
	}
	defer teacher.Close()
	res.FullData = full

	hard, how := hardLabels(art, cfg)
	res.HardLabels = how
	hardTable, err := oneHot(hard, art.Classes, dev)
	if err != nil {
		return nil, err
	}
	if res.HardLabel, err = e.labels("hard labels", images, hardTable, false); err != nil {
		return nil, err
	}
	if res.SoftLabel, err = e.labels("distilled labels", images, soft, false); err != nil {
		return nil, err
	}
	rx, rsoft, err := e.randomImages(d, hard, art.Classes, teacher)
	if err != nil {
		return nil, err
	}
	if res.RandomSoftLabel, err = e.labels("random images", rx, rsoft, true); err != nil {
		return nil, err
	}
	n := int(s[0])
	res.HardLabel.Images, res.SoftLabel.Images, res.RandomSoftLabel.Images = n, n, n

	var hlrs, iors, scores []float64
	for i := 0; i < dc.Models; i++ {
		hlr, ior, score := DDRankingScores(full.Accuracy, res.HardLabel.Accuracies[i], res.SoftLabel.Accuracies[i], res.RandomSoftLabel.Accuracies[i])
		res.Runs = append(res.Runs, DDRankingRun{HLR: hlr, IOR: ior, Score: score})
		hlrs, iors, scores = append(hlrs, hlr), append(iors, ior), append(scores, score)
	}
	res.HLR, res.HLRStd = train.MeanStd(hlrs)
	res.IOR, res.IORStd = train.MeanStd(iors)
	res.Score, res.ScoreStd = train.MeanStd(scores)
	res.WallSeconds = time.Since(start).Seconds()
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(filepath.Join(evalDir, DDRankingFile), append(b, '\n')); err != nil {
		return nil, fmt.Errorf("writing %s: %w", filepath.Join(evalDir, DDRankingFile), err)
	}
	return res, nil
}

// hardLabels are the distilled images' hard labels: their true classes (base_classes)
// when the base examples come from the target dataset, otherwise the argmax of their
// distilled labels (cross-dataset artifacts, whose base classes are another label space,
// and artifacts without base classes).
func hardLabels(art *Artifact, cfg config.Config) ([]int64, string) {
	if art.BaseClasses != nil && len(art.BaseClasses) == int(art.Shape[0]) && !cfg.IsCrossDataset() {
		ok := true
		for _, c := range art.BaseClasses {
			ok = ok && c >= 0 && c < int64(art.Classes)
		}
		if ok {
			return slices.Clone(art.BaseClasses), "the base examples' true classes (base_classes)"
		}
	}
	out := make([]int64, art.Shape[0])
	for i := range out {
		row := art.Labels[i*art.Classes : (i+1)*art.Classes]
		for j, v := range row {
			if v > row[out[i]] {
				out[i] = int64(j)
			}
		}
	}
	return out, "the argmax of the distilled labels (the base examples have no classes in the target's label space)"
}

// oneHot is the (N, classes) one-hot table of labels on dev.
func oneHot(labels []int64, classes int, dev torch.Device) (*torch.Tensor, error) {
	v := make([]float32, len(labels)*classes)
	for i, l := range labels {
		v[i*classes+int(l)] = 1
	}
	var c torch.Chain
	t := c.T(onDevice(c.T(torch.FromFloat32(v, int64(len(labels)), int64(classes))), dev))
	return t, c.Err()
}

// labels trains the models on (x, table) at every learning rate of the grid and keeps,
// per model, the learning rate with the best validation accuracy. perModel: x and table
// hold one training set per model (train.EpochTrainer.PerModel).
func (e *ddrEval) labels(stage string, x, table *torch.Tensor, perModel bool) (DDRankingLabels, error) {
	m := e.dc.Models
	out := DDRankingLabels{}
	seeds := make([]uint64, m)
	for i := range seeds {
		seeds[i] = train.Seed(uint64(e.dc.Seed), "ddranking "+stage, i)
	}
	for _, lr := range e.syn.LRs {
		pt := DDRankingGridPoint{LR: lr, Validation: make([]*float64, m), Epochs: make([]int, m), Test: make([]*float64, m)}
		label := fmt.Sprintf("%s, lr %g", stage, lr)
		for first := 0; first < m; first += train.MaxTogether {
			k := min(train.MaxTogether, m-first)
			gx, gt := x, table
			if perModel {
				per := x.Shape()[0] / int64(m)
				var c torch.Chain
				gx = c.T(x.Narrow(0, int64(first)*per, int64(k)*per))
				gt = c.T(table.Narrow(0, int64(first)*per, int64(k)*per))
				if c.Err() != nil {
					return out, c.Err()
				}
			}
			val, epochs, test, err := e.train(label, gx, gt, perModel, e.syn.epochRecipe(lr, e.dc.Augment == AugmentDSA), seeds[first:first+k])
			if err != nil {
				return out, err
			}
			for j := range val {
				if !math.IsNaN(val[j]) {
					pt.Validation[first+j], pt.Test[first+j] = &val[j], &test[j]
				}
				pt.Epochs[first+j] = epochs[j]
			}
		}
		out.Grid = append(out.Grid, pt)
	}
	for i := 0; i < m; i++ {
		best := -1
		for g, pt := range out.Grid {
			if v := pt.Validation[i]; v != nil && (best < 0 || *v > *out.Grid[best].Validation[i]) {
				best = g
			}
		}
		if best < 0 {
			return out, fmt.Errorf("ddranking: %s: model %d diverged at every learning rate", stage, i)
		}
		pt := out.Grid[best]
		out.LRs = append(out.LRs, pt.LR)
		out.Epochs = append(out.Epochs, pt.Epochs[i])
		out.Validation = append(out.Validation, *pt.Validation[i])
		out.Accuracies = append(out.Accuracies, *pt.Test[i])
	}
	out.Mean, out.Std = train.MeanStd(out.Accuracies)
	return out, nil
}

// train trains len(seeds) models with recipe r and returns, per model, the best
// validation accuracy (a fraction; NaN when the model diverged before its first
// validation), its epoch and the test accuracy of the parameters from that epoch.
func (e *ddrEval) train(stage string, x, table *torch.Tensor, perModel bool, r train.EpochRecipe, seeds []uint64) (val []float64, epochs []int, test []float64, err error) {
	models, val, epochs, err := e.trainModels(stage, x, table, perModel, r, seeds)
	if err != nil {
		return nil, nil, nil, err
	}
	defer models.Close()
	test, err = models.Accuracies(e.ctx, e.tx, e.ty)
	if err != nil {
		return nil, nil, nil, err
	}
	for i := range test {
		test[i] /= 100
	}
	return val, epochs, test, nil
}

func (e *ddrEval) trainModels(stage string, x, table *torch.Tensor, perModel bool, r train.EpochRecipe, seeds []uint64) (*train.Models, []float64, []int, error) {
	et := &train.EpochTrainer{Net: e.net, Cfg: e.cfg, Images: x, Labels: table, PerModel: perModel, Recipe: r, Device: e.dev}
	if e.dc.Progress != nil {
		et.Progress = func(done, total int) { e.dc.Progress(stage, done, total) }
	}
	res, err := et.Train(e.ctx, seeds, e.vx, e.vy)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %w", stage, err)
	}
	val := make([]float64, len(seeds))
	for i, v := range res.Validation {
		val[i] = v / 100 // NaN stays NaN
	}
	return res.Models, val, res.Epoch, nil
}

// randomImages draws, for each model, as many random images of the target set as there
// are distilled images of each (hard-label) class, seeded by the evaluation's seed and the
// model's index, and labels them with the teacher's softmax (DD-Ranking's soft labels of
// random data: the teacher's logits read at temperature 1). The M sets are stacked.
func (e *ddrEval) randomImages(d *labeldistill.Data, hard []int64, classes int, teacher *train.Models) (*torch.Tensor, *torch.Tensor, error) {
	counts := make([]int, classes)
	for _, c := range hard {
		counts[c]++
	}
	ts := &d.TargetSet
	size := ts.ImageSize()
	var idx []int
	for i := 0; i < e.dc.Models; i++ {
		picked, err := drawRandom(ts, counts, train.Seed(uint64(e.dc.Seed), "ddranking random images", i))
		if err != nil {
			return nil, nil, err
		}
		idx = append(idx, picked...)
	}
	pix := make([]float32, 0, len(idx)*size)
	for _, j := range idx {
		pix = append(pix, ts.Image(j)...)
	}
	var c torch.Chain
	s := d.Shape
	x := c.T(onDevice(c.T(torch.FromFloat32(pix, int64(len(idx)), s[0], s[1], s[2])), e.dev))
	if c.Err() != nil {
		return nil, nil, c.Err()
	}
	probs, err := teacherProbs(teacher, x)
	return x, probs, err
}

// drawRandom picks counts[c] examples of each class c from s: a walk along a seeded
// permutation of s keeping an example while its class needs more.
func drawRandom(s *data.Split, counts []int, seed uint64) ([]int, error) {
	need := slices.Clone(counts)
	left := 0
	for _, n := range need {
		left += n
	}
	var picked []int
	for _, j := range data.Permutation(s.N, seed, streamRandomImages) {
		if left == 0 {
			break
		}
		if c := s.Labels[j]; c >= 0 && int(c) < len(need) && need[c] > 0 {
			need[c]--
			left--
			picked = append(picked, j)
		}
	}
	if left > 0 {
		have := s.ClassCounts()
		for c, n := range counts {
			if c < len(have) && have[c] < n {
				return nil, fmt.Errorf("ddranking: the target set has %d images of class %d, the distilled images %d: too few for random images of the same classes", have[c], c, n)
			}
		}
		return nil, fmt.Errorf("ddranking: too few target-set images for random images of the distilled images' classes")
	}
	return picked, nil
}

// streamRandomImages is the PCG stream of the random images' permutation ("ldrandm" 3).
const streamRandomImages uint64 = 0x6c64_7261_6e64_6d03

// teacherProbs is softmax(teacher(x)) (one model), scored in blocks without gradients.
func teacherProbs(teacher *train.Models, x *torch.Tensor) (*torch.Tensor, error) {
	n := x.Shape()[0]
	var parts []*torch.Tensor
	err := torch.NoGrad(func() error {
		for start := int64(0); start < n; start += train.EvalChunk {
			var c torch.Chain
			xs := c.T(x.Narrow(0, start, min(train.EvalChunk, n-start)))
			if c.Err() != nil {
				return c.Err()
			}
			logits, err := teacher.LogitsEach(xs)
			if err != nil {
				return err
			}
			parts = append(parts, c.T(torch.Softmax(logits[0], 1)))
			if c.Err() != nil {
				return c.Err()
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return torch.Cat(parts, 0)
}

// errNoCache: the cache holds no usable entry for the key.
var errNoCache = errors.New("no cached full-data model")
