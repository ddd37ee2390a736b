package artifact

// ddranking.go: the soft-label evaluation of the DD-Ranking benchmark applied to an
// artifact (`ldtorch evaluate --protocol ddranking`, docs/ALGORITHM.md §13): ConvNet-3
// models trained for many epochs with SGD, a step schedule and DSA augmentation on the
// distilled images with hard and with distilled labels, on random real images with a
// teacher's labels and on the full data, and the fairness scores HLR, IOR and their
// combination, written to DIR/evaluations/ddranking.json. This file holds the protocol's
// settings, recipes, scores and result; the evaluation itself is ddranking_eval.go.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/nets/augment"
	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/fileio/boundedread"
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
	// CheckpointEvery is how often a training under way is saved, so that the evaluation,
	// run again with the same settings after it stopped, goes on from there
	// (ddranking_resume.go); 0 = DDRankingCheckpointEvery, negative = never (nothing of an
	// interrupted evaluation is kept).
	CheckpointEvery time.Duration
	// Notes, when set, hears what the evaluation resumes from.
	Notes func(string)
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
	if n, err := nets.New(dc.Arch, s[1], s[2], s[3], int64(art.Classes)); err != nil {
		return dc, config.FieldErrorf("arch", "%s", strings.TrimPrefix(err.Error(), "nets: "))
	} else {
		n.Close() // built to check it
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
	// WallSeconds is the evaluation's wall time; for a resumed one, the sum over its parts
	// (each interrupted part counted up to its last save).
	WallSeconds float64 `json:"wall_seconds"`
	// Resumed: some trainings come from an earlier, interrupted run of the same evaluation.
	Resumed bool `json:"resumed,omitempty"`
}

// errNoCache: the cache holds no usable entry for the key.
var errNoCache = errors.New("no cached full-data model")

// ReadDDRanking reads dir/evaluations/ddranking.json, nil when there is none.
func ReadDDRanking(dir string) (*DDRankingResult, error) {
	path := filepath.Join(dir, EvaluationsFolder, DDRankingFile)
	b, err := boundedread.ReadRegularFile(path, 16<<20, "benchmark evaluation")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r DDRankingResult
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if r.Protocol != ProtocolDDRanking || len(r.FullDataRecipe.LRs) == 0 {
		return nil, fmt.Errorf("%s: not a DD-Ranking evaluation written by ldtorch evaluate --protocol ddranking", path)
	}
	return &r, nil
}
