// Package selectbase chooses the base examples of a distillation (`ldtorch select-base`):
// N class-balanced examples from the target-set part of a dataset's train split, drawn
// under the base seed exactly as `ldtorch distill` splits it, by one of five strategies:
//
//   - paper: the supplementary material's "optimized base examples": K random balanced
//     sets (the first is the set `distill` draws itself with the base seed), each trained
//     M times from scratch with true labels (the baselines' recipe: the run's arch, Adam at
//     eval_lr, eval_batch examples a step), validation accuracy every 50 steps up to
//     baseline_max_steps (1,000; 1,700 above 100 base examples); the set with the best mean
//     validation accuracy at any of those steps wins (the earliest set on ties).
//   - kmeans: per class, k-means (k = N/C, k-means++ seeding from the base seed) on the
//     images' pixel values in [0, 1]; the real image nearest each centroid.
//   - herding: per class, herding (the pick that brings the picks' mean closest to the
//     class mean, greedily; the first is the example nearest the mean) on the features of a
//     briefly trained network.
//   - kcenter: per class, k-centre greedy (farthest-first from a seeded random first pick)
//     on the same features.
//   - random: the balanced draw `distill` makes itself with the base seed.
//
// "Briefly trained" (herding and kcenter, as DeepCore trains its model before selecting):
// one network of the run's arch trained with true labels on the whole target set, Adam at
// eval_lr, batches of 256 drawn at random, for FeatureEpochs passes' worth of steps
// (default 10, DeepCore's documented selection epochs); the features are its body's
// output (the input of its last linear layer) in evaluation mode.
//
// Every random choice derives from the base seed, so that a selection is a function of the
// dataset, N, the base seed and the settings. The result is written as an index file that
// `distill --base-indices` reads (a select-base header line, then one index per line) and
// a JSON file beside it with the settings and every score (Write). The paper strategy
// keeps each finished candidate in a progress folder (atomically written files) and, run
// again, continues from them; its candidates can be spread over the ranks of a group.
// The package uses labeldistill's public API only.
package selectbase

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/labeldistill/engine"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/dist"
)

// The strategies.
const (
	Paper   = "paper"
	KMeans  = "kmeans"
	Herding = "herding"
	KCenter = "kcenter"
	Random  = "random"
)

// Strategies lists the strategies' names.
var Strategies = []string{Paper, KMeans, Herding, KCenter, Random}

// Defaults of Options.
const (
	DefaultCandidates    = 50
	DefaultRepeats       = 3
	DefaultFeatureEpochs = 10
	// ValidateEvery is the paper strategy's interval of validation, in training steps.
	ValidateEvery = 50
	// FeatureBatch is the batch of the feature network's training.
	FeatureBatch = 256
	// KMeansMaxIterations bounds Lloyd's iterations.
	KMeansMaxIterations = 100
)

// Options control Select. Zero values take the defaults.
type Options struct {
	Strategy      string
	Candidates    int // paper: K random sets
	Repeats       int // paper: M trainings of each
	FeatureEpochs int // herding, kcenter: the feature network's training, in passes over the target set
	// Data is preloaded data (nil: cfg's dataset is read from disk). Its TargetSet must be the
	// whole target set.
	Data *labeldistill.Data
	// ProgressDir keeps the paper strategy's finished candidates ("" keeps none): a run
	// finds the ones there, checks they belong to the same selection, and trains only the
	// others.
	ProgressDir string
	// Group spreads the paper strategy's candidates over its ranks (nil: one process).
	Group *dist.Group
	// Progress hears what is being done (called on Select's goroutine).
	Progress func(Progress)
}

// Progress is a report of Select.
type Progress struct {
	Phase       string // "data", "candidate", "features", "select"
	Done, Total int
	Message     string
}

// Settings are a strategy's settings, as the index file's header and the JSON record them.
type Settings struct {
	// paper
	Candidates    int     `json:"candidates,omitempty"`
	Repeats       int     `json:"repeats,omitempty"`
	ValidateEvery int     `json:"validate_every,omitempty"`
	MaxSteps      int     `json:"max_steps,omitempty"`
	Arch          string  `json:"arch,omitempty"`
	LR            float64 `json:"lr,omitempty"`
	Batch         int     `json:"batch,omitempty"`
	// herding, kcenter: the feature network (Arch, LR too)
	FeatureEpochs int `json:"feature_epochs,omitempty"`
	FeatureSteps  int `json:"feature_steps,omitempty"`
	FeatureBatch  int `json:"feature_batch,omitempty"`
	// kmeans
	MaxIterations int `json:"max_iterations,omitempty"`
	// Space is what the geometric strategies measure distances in: "pixels" (values in
	// [0, 1]) or "features".
	Space string `json:"space,omitempty"`
}

// Candidate is one of the paper strategy's random sets and its scores.
type Candidate struct {
	Index   int     `json:"candidate"`
	Seed    uint64  `json:"seed"` // the base seed of its draw (data.SelectBase)
	Indices []int64 `json:"indices"`
	// Accuracies[r][s] is repeat r's validation accuracy (%) after Steps[s] steps.
	Accuracies [][]float64 `json:"validation_accuracies"`
	// Mean[s] is the mean over the repeats; Best its largest value, at BestStep steps.
	Mean     []float64 `json:"mean_accuracies"`
	Best     float64   `json:"best_mean_accuracy"`
	BestStep int       `json:"best_step"`
}

// PaperResult is the paper strategy's outcome: every candidate's scores and the winner.
type PaperResult struct {
	Steps      []int       `json:"validation_steps"` // when the models were validated
	Candidates []Candidate `json:"candidates"`
	Chosen     int         `json:"chosen_candidate"`
	// Accuracy is the chosen candidate's best mean validation accuracy (%).
	Accuracy float64 `json:"validation_accuracy"`
}

// ClassResult is a geometric strategy's outcome in one class.
type ClassResult struct {
	Class int `json:"class"`
	Size  int `json:"size"` // the class's examples in the target set
	// k-means: Lloyd iterations run, whether they converged, and the inertia (Σ squared
	// distances to the nearest centroid). k-centre: the covering radius of the picks.
	Iterations int     `json:"iterations,omitempty"`
	Converged  bool    `json:"converged,omitempty"`
	Inertia    float64 `json:"inertia,omitempty"`
	Radius     float64 `json:"covering_radius,omitempty"`
}

// Selection is a finished selection: the JSON written beside the index file.
type Selection struct {
	Strategy       string            `json:"strategy"`
	Settings       Settings          `json:"settings"`
	Dataset        string            `json:"dataset"`
	BaseExamples   int               `json:"base_examples"`
	Seed           int64             `json:"seed"`
	BaseSeed       int64             `json:"base_seed"`
	ValidationSize int               `json:"validation_size"`
	DataSHA256     map[string]string `json:"data_sha256"`
	// Indices are the chosen examples' positions in the dataset's train file (what
	// base_indices takes), in selection order (class by class for the geometric
	// strategies); Classes their classes.
	Indices []int64 `json:"indices"`
	Classes []int64 `json:"classes"`
	// Scores, one per index: kmeans, the distance to its centroid; herding, the distance of
	// the picks' running mean to the class mean after it; kcenter, its distance to the
	// nearest earlier pick of its class.
	Scores       []float64     `json:"scores,omitempty"`
	ClassResults []ClassResult `json:"class_results,omitempty"`
	Paper        *PaperResult  `json:"paper,omitempty"`
	// FeatureNetAcc is the feature network's validation accuracy (%), herding and kcenter.
	FeatureNetAcc   float64 `json:"feature_network_validation_accuracy,omitempty"`
	Fingerprint     string  `json:"fingerprint"`
	IndexFileSHA256 string  `json:"index_file_sha256"`
	WallSeconds     float64 `json:"wall_seconds"`
	LdtorchVersion  string  `json:"ldtorch_version"`
	LibtorchVersion string  `json:"libtorch_version"`
}

// UsageError is a setting Select cannot work with; Flag names it (an Options field's
// flag: "strategy", "candidates", "repeats", "feature_epochs").
type UsageError struct{ Field, Msg string }

func (e *UsageError) Error() string { return e.Field + ": " + e.Msg }

// settings returns the strategy's settings under cfg (resolved).
func settings(o Options, cfg config.Config) Settings {
	switch o.Strategy {
	case Paper:
		return Settings{Candidates: o.Candidates, Repeats: o.Repeats, ValidateEvery: ValidateEvery,
			MaxSteps: cfg.BaselineMaxSteps, Arch: cfg.Arch, LR: cfg.EvalLR, Batch: cfg.EvalBatch}
	case KMeans:
		return Settings{MaxIterations: KMeansMaxIterations, Space: "pixels"}
	case Herding, KCenter:
		return Settings{Arch: cfg.Arch, LR: cfg.EvalLR, FeatureEpochs: o.FeatureEpochs, FeatureBatch: FeatureBatch, Space: "features"}
	}
	return Settings{}
}

// What the bounds of Options protect, for their messages.
const (
	WhyCandidates    = "each is a base set trained --repeats times"
	WhyRepeats       = "the repeats of a candidate train together, one model each"
	WhyFeatureEpochs = "each epoch trains the feature network on the whole target set once"
)

// withDefaults fills o's zero values and checks them.
func (o Options) withDefaults() (Options, error) {
	if o.Candidates == 0 {
		o.Candidates = DefaultCandidates
	}
	if o.Repeats == 0 {
		o.Repeats = DefaultRepeats
	}
	if o.FeatureEpochs == 0 {
		o.FeatureEpochs = DefaultFeatureEpochs
	}
	switch {
	case !slices.Contains(Strategies, o.Strategy):
		return o, &UsageError{"strategy", fmt.Sprintf("unknown strategy %q (want one of %v)", o.Strategy, Strategies)}
	case o.Candidates < 1 || o.Candidates > config.MaxSelectCandidates:
		return o, &UsageError{"candidates", config.CountMessage(int64(o.Candidates), 1, config.MaxSelectCandidates,
			WhyCandidates)}
	case o.Repeats < 1 || o.Repeats > config.MaxEvalModels:
		return o, &UsageError{"repeats", config.CountMessage(int64(o.Repeats), 1, config.MaxEvalModels,
			WhyRepeats)}
	case o.FeatureEpochs < 1 || o.FeatureEpochs > config.MaxEvalEpochs:
		return o, &UsageError{"feature_epochs", config.CountMessage(int64(o.FeatureEpochs), 1, config.MaxEvalEpochs,
			WhyFeatureEpochs)}
	case o.Group != nil && o.Group.Size() > 1 && o.Strategy != Paper:
		return o, &UsageError{"strategy", fmt.Sprintf("only the paper strategy spreads its work over ranks, not %s", o.Strategy)}
	}
	return o, nil
}

// selector is one Select call's state.
type selector struct {
	o    Options
	cfg  config.Config
	ds   *labeldistill.Data
	dev  torch.Device
	net  *nets.Net
	sel  *Selection
	seed uint64 // the base seed: every random choice derives from it
}

func (s *selector) note(p Progress) {
	if s.o.Progress != nil {
		s.o.Progress(p)
	}
}

// Select chooses cfg.BaseExamples base examples of cfg.Dataset with o.Strategy. cfg's
// seeds, data settings, arch, eval_lr, eval_batch and baseline_max_steps apply, as in
// `ldtorch distill`; target_set_size does not (the base examples come from the whole
// target set). Bad settings are *config.FieldError (of cfg) or *UsageError (of o).
func Select(ctx context.Context, cfg config.Config, o Options) (*Selection, error) {
	return torch.Guard("selectbase", func() (*Selection, error) { return selectBase(ctx, cfg, o) })
}

func selectBase(ctx context.Context, cfg config.Config, o Options) (*Selection, error) {
	start := time.Now()
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	// The whole target set; the balanced checks are Select's own (naming base_examples).
	cfg.TargetSetSize, cfg.BaseIndices, cfg.BaseSelection = 0, nil, config.SelectUnbalanced
	if cfg, err = cfg.Resolved(); err != nil {
		return nil, err
	}
	if err := checkMaxSteps(o, cfg); err != nil {
		return nil, err
	}
	if cfg.IsCrossDataset() {
		return nil, config.FieldErrorf("source", "select-base chooses from the target dataset itself; %s differs from %s", cfg.Source, cfg.Dataset)
	}
	if err := torch.CheckABI(); err != nil {
		return nil, err
	}
	s := &selector{o: o, cfg: cfg, seed: uint64(cfg.BaseSelectionSeed())}
	if s.dev, err = torch.ParseDevice(cfg.Device); err != nil {
		return nil, config.NewFieldError("device", err)
	}
	if s.dev.IsCUDA() && !torch.CUDAIsAvailable() {
		return nil, config.FieldErrorf("device", "%s requested but CUDA is not available in this libtorch", cfg.Device)
	}
	if cfg.Threads > 0 {
		if err := torch.SetNumThreads(cfg.Threads); err != nil {
			return nil, err
		}
	}
	s.note(Progress{Phase: "data", Message: "reading " + cfg.Dataset})
	if s.ds = o.Data; s.ds == nil {
		if s.ds, err = labeldistill.LoadData(cfg); err != nil {
			return nil, err
		}
	}
	ts := &s.ds.TargetSet
	n := cfg.BaseExamples
	if ts.Classes <= 0 || n%ts.Classes != 0 {
		return nil, config.FieldErrorf("base_examples", "select-base chooses N/C examples of each class: N = %d is not a multiple of the %d classes", n, ts.Classes)
	}
	for c, have := range ts.ClassCounts() {
		if have < n/ts.Classes {
			return nil, config.FieldErrorf("base_examples", "%d per class, but class %d has only %d examples in the target set", n/ts.Classes, c, have)
		}
	}
	if s.net, err = nets.New(cfg.Arch, s.ds.Shape[0], s.ds.Shape[1], s.ds.Shape[2], int64(s.ds.Classes)); err != nil {
		return nil, err
	}
	defer s.net.Close()
	s.sel = &Selection{Strategy: o.Strategy, Dataset: cfg.Dataset, BaseExamples: n, Seed: cfg.Seed,
		BaseSeed: cfg.BaseSelectionSeed(), ValidationSize: cfg.ValidationSize, DataSHA256: s.ds.Files,
		LdtorchVersion: labeldistill.Version, LibtorchVersion: torch.Version()}
	s.sel.Settings = settings(o, cfg)
	s.sel.Fingerprint = fingerprint(s.sel)
	switch o.Strategy {
	case Random:
		b, err := data.SelectBase(ts, data.Balanced, n, s.seed)
		if err != nil {
			return nil, config.NewFieldError("base_examples", err)
		}
		s.take(b.Indices, nil)
	case KMeans:
		err = s.kmeans(ctx)
	case Herding, KCenter:
		err = s.geometric(ctx)
	case Paper:
		err = s.paper(ctx)
	}
	if err != nil {
		return nil, err
	}
	s.sel.WallSeconds = time.Since(start).Seconds()
	return s.sel, nil
}

// take records the target-set rows chosen (and their scores, may be nil).
func (s *selector) take(rows []int, scores []float64) {
	ts := &s.ds.TargetSet
	for _, r := range rows {
		s.sel.Indices = append(s.sel.Indices, int64(ts.Index[r]))
		s.sel.Classes = append(s.sel.Classes, ts.Labels[r])
	}
	s.sel.Scores = append(s.sel.Scores, scores...)
}

// classRows lists the target-set rows of each class, in target-set order.
func (s *selector) classRows() [][]int {
	ts := &s.ds.TargetSet
	out := make([][]int, ts.Classes)
	for i, y := range ts.Labels {
		out[y] = append(out[y], i)
	}
	return out
}

// rng is a PCG stream of the base seed for one purpose and class.
func (s *selector) rng(purpose string, class int) *rand.PCG {
	return rand.NewPCG(train.Seed(s.seed, purpose, class), 0x5e1ec7)
}

// kmeans: per class, k-means on the pixel values in [0, 1] and the real image nearest each
// centroid.
func (s *selector) kmeans(ctx context.Context) error {
	ts := &s.ds.TargetSet
	x := pixels(ts, s.ds.NormMean, s.ds.NormStd)
	p := points{x: x, d: ts.ImageSize()}
	k := s.cfg.BaseExamples / ts.Classes
	for c, rows := range s.classRows() {
		s.note(Progress{Phase: "select", Done: c, Total: ts.Classes, Message: fmt.Sprintf("k-means, class %d", c)})
		km, err := kMeans(ctx, p, rows, k, s.rng("select-base-kmeans", c), KMeansMaxIterations)
		if err != nil {
			return err
		}
		picks := nearestDistinct(p, rows, km.centroids)
		s.takePicks(picks)
		s.sel.ClassResults = append(s.sel.ClassResults, ClassResult{Class: c, Size: len(rows), Iterations: km.iterations, Converged: km.converged, Inertia: km.inertia})
	}
	return nil
}

func (s *selector) takePicks(picks []pick) {
	rows := make([]int, len(picks))
	scores := make([]float64, len(picks))
	for i, pk := range picks {
		rows[i], scores[i] = pk.row, pk.score
	}
	s.take(rows, scores)
}

// pixels undoes a split's normalisation: the values p/255 in [0, 1].
func pixels(sp *data.Split, mean, std []float64) []float32 {
	out := make([]float32, len(sp.Images))
	hw := sp.H * sp.W
	for i, v := range sp.Images {
		c := (i / hw) % sp.C
		m, sd := 0.0, 1.0
		if c < len(mean) && c < len(std) {
			m, sd = mean[c], std[c]
		}
		out[i] = float32(float64(v)*sd + m)
	}
	return out
}

// geometric: herding or k-centre greedy per class on the feature network's features.
func (s *selector) geometric(ctx context.Context) error {
	feats, acc, steps, err := s.features(ctx)
	if err != nil {
		return err
	}
	s.sel.Settings.FeatureSteps = steps
	s.sel.FeatureNetAcc = acc
	ts := &s.ds.TargetSet
	p := points{x: feats, d: int(s.net.FeatureDim)}
	k := s.cfg.BaseExamples / ts.Classes
	for c, rows := range s.classRows() {
		s.note(Progress{Phase: "select", Done: c, Total: ts.Classes, Message: fmt.Sprintf("%s, class %d", s.o.Strategy, c)})
		cr := ClassResult{Class: c, Size: len(rows)}
		var picks []pick
		if s.o.Strategy == Herding {
			picks, err = herding(ctx, p, rows, k)
		} else {
			picks, cr.Radius, err = kCenterGreedy(ctx, p, rows, k, below(s.rng("select-base-kcenter", c), len(rows)))
		}
		if err != nil {
			return err
		}
		s.takePicks(picks)
		s.sel.ClassResults = append(s.sel.ClassResults, cr)
	}
	return nil
}

// features trains the feature network (see the package comment) and returns the target
// set's features (n × FeatureDim), its validation accuracy and its step count.
func (s *selector) features(ctx context.Context) (feats []float32, acc float64, steps int, err error) {
	ts := &s.ds.TargetSet
	steps = s.o.FeatureEpochs * ((ts.N + FeatureBatch - 1) / FeatureBatch)
	err = torch.WithScope(func(_ *torch.Scope) error {
		x, table, err := s.upload(ts, true)
		if err != nil {
			return err
		}
		vx, vy, err := engine.SplitTensors(&s.ds.Validation, s.ds.Shape, s.dev)
		if err != nil {
			return err
		}
		tr := &train.Trainer{Net: s.net, Cfg: s.cfg, Images: x, Labels: table, Batch: FeatureBatch, Opt: train.AdamSpec(s.cfg.EvalLR), Device: s.dev,
			Progress: func(done, total int) {
				if done%50 == 0 || done == total {
					s.note(Progress{Phase: "features", Done: done, Total: total, Message: "training the feature network"})
				}
			}}
		m, err := tr.TrainOne(ctx, steps, train.Seed(s.seed, "select-base-features", 0), nil)
		if err != nil {
			return err
		}
		defer m.Close()
		if acc, err = m.Accuracy(ctx, vx, vy); err != nil {
			return err
		}
		feats = make([]float32, 0, ts.N*int(s.net.FeatureDim))
		return torch.NoGrad(func() error {
			for lo := int64(0); lo < int64(ts.N); lo += train.EvalChunk {
				if err := ctx.Err(); err != nil {
					return err
				}
				bs := torch.NewScope()
				var c torch.Chain
				xs := c.T(x.Narrow(0, lo, min(train.EvalChunk, int64(ts.N)-lo)))
				if c.Err() == nil {
					f, err := s.net.Features(m.Params[0], m.Buffers[0], xs, false)
					c.Check(err)
					if c.Err() == nil {
						v, err := f.Float32s()
						c.Check(err)
						feats = append(feats, v...)
					}
				}
				bs.Close()
				if c.Err() != nil {
					return c.Err()
				}
			}
			return nil
		})
	})
	if err == nil && len(feats) != ts.N*int(s.net.FeatureDim) {
		err = fmt.Errorf("selectbase: %d feature values for %d examples of %d", len(feats), ts.N, s.net.FeatureDim)
	}
	return feats, acc, steps, err
}

// upload puts a split's images and its one-hot true labels (N, classes) on the device, in
// the caller's scope; ok tells whether the table is wanted.
func (s *selector) upload(sp *data.Split, table bool) (x, y *torch.Tensor, err error) {
	x, labels, err := engine.SplitTensors(sp, s.ds.Shape, s.dev)
	if err != nil || !table {
		return x, labels, err
	}
	classes := s.ds.Classes
	t := make([]float32, sp.N*classes)
	for i, l := range sp.Labels {
		t[i*classes+int(l)] = 1
	}
	y, err = torch.FromFloat32(t, int64(sp.N), int64(classes))
	if err == nil && s.dev != torch.CPU {
		var moved *torch.Tensor
		moved, err = y.To(s.dev)
		y = moved
	}
	return x, y, err
}

// checkMaxSteps bounds the paper strategy's training (baseline_max_steps, its --max-steps)
// as every fresh model's steps are bounded.
func checkMaxSteps(o Options, cfg config.Config) error {
	if o.Strategy != Paper {
		return nil
	}
	return config.CheckCount("baseline_max_steps", int64(cfg.BaselineMaxSteps), 1, config.MaxTrainSteps, config.WhySteps)
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
