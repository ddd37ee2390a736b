package artifact

// ddranking_eval.go: running the DD-Ranking soft-label evaluation on an artifact
// (EvaluateDDRanking): the full-data teacher, the synthetic images with hard and with
// distilled labels, random real images with the teacher's labels, each trained on a
// learning-rate grid and tested.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/labeldistill/engine"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/fileio/atomicfile"
)

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
	// progress keeps the finished trainings and the one under way (ddranking_resume.go).
	progress *ddrProgress
	// cacheReadOnly: dc.CacheDir is there but cannot be written; its entries are read.
	cacheReadOnly bool
}

func evaluateDDRanking(ctx context.Context, art *Artifact, d *labeldistill.Data, dc DDRankingConfig) (*DDRankingResult, error) {
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
	cacheReadOnly := false
	if dc.CacheDir != "" {
		if err := atomicfile.EnsureWritableDir(dc.CacheDir); err != nil {
			// A cache folder that is there but not writable (shared, read-only) is read:
			// its entries serve, and a missing one is trained without being kept.
			if st, serr := os.Stat(dc.CacheDir); serr != nil || !st.IsDir() {
				return nil, config.NewFieldError("cache-dir", fmt.Errorf("cannot write the full-data cache into %s: %w", dc.CacheDir, err))
			}
			cacheReadOnly = true
		}
	}
	dev, err := evalDevice(dc.Device, dc.AllowTF32)
	if err != nil {
		return nil, err
	}
	net, err := nets.New(dc.Arch, s[1], s[2], s[3], int64(art.Classes))
	if err != nil {
		return nil, err
	}
	defer net.Close()
	sc := torch.NewScope()
	defer sc.Close()
	e := &ddrEval{ctx: ctx, dc: dc, cfg: cfg, net: net, dev: dev, cacheReadOnly: cacheReadOnly}
	e.syn, e.full = dc.DDRankingRecipes()
	var c torch.Chain
	shape := d.Shape
	split := func(sp *data.Split) (x, y *torch.Tensor) {
		if c.Err() != nil {
			return nil, nil
		}
		x, y, err := engine.SplitTensors(sp, shape, dev)
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

	hard, how := hardLabels(art, cfg)
	res.HardLabels = how
	dataDigest := splitsDigest(&d.TargetSet, &d.Validation, &d.Test)
	key := ddrKey{Format: ddrPartialFormat, Dataset: dc.Dataset, Arch: dc.Arch, Models: dc.Models, Seed: dc.Seed, Device: dc.Device,
		AllowTF32: dc.AllowTF32, Syn: e.syn, Full: e.full, Augment: dc.Augment, Distilled: distilledDigest(art, hard),
		Data: dataDigest, Group: train.MaxTogether}
	every := dc.CheckpointEvery
	if every == 0 {
		every = DDRankingCheckpointEvery
	}
	if e.progress, err = openProgress(evalDir, key, every, dc.Notes); err != nil {
		return nil, err
	}
	defer e.progress.close()

	// The full-data model: HLR's reference accuracy and the teacher of the random images.
	teacher, full, err := e.fullData(d, fx, fy, dataDigest)
	if err != nil {
		return nil, err
	}
	defer teacher.Close()
	res.FullData = full
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
	res.WallSeconds = e.progress.seconds()
	res.Resumed = e.progress.resumed
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(filepath.Join(evalDir, DDRankingFile), append(b, '\n')); err != nil {
		return nil, fmt.Errorf("writing %s: %w", filepath.Join(evalDir, DDRankingFile), err)
	}
	return res, e.progress.finish()
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
			name := fmt.Sprintf("%s, models %d to %d", label, first+1, first+k)
			val, epochs, test, done := e.progress.done(name, k)
			if !done {
				var err error
				if val, epochs, test, err = e.trainGroup(label, name, x, table, perModel, lr, seeds, first, k); err != nil {
					return out, err
				}
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

// trainGroup trains models first to first+k−1 of a training set at learning rate lr
// (progress label, resumable training name) and keeps the outcome in the progress folder.
func (e *ddrEval) trainGroup(label, name string, x, table *torch.Tensor, perModel bool, lr float64, seeds []uint64, first, k int) (val []float64, epochs []int, test []float64, err error) {
	gx, gt := x, table
	if perModel {
		per := x.Shape()[0] / int64(e.dc.Models)
		var c torch.Chain
		gx = c.T(x.Narrow(0, int64(first)*per, int64(k)*per))
		gt = c.T(table.Narrow(0, int64(first)*per, int64(k)*per))
		if c.Err() != nil {
			return nil, nil, nil, c.Err()
		}
	}
	val, epochs, test, err = e.train(label, gx, gt, perModel, e.syn.epochRecipe(lr, e.dc.Augment == AugmentDSA), seeds[first:first+k], e.progress.checkpoint(name))
	if err != nil {
		return nil, nil, nil, err
	}
	return val, epochs, test, e.progress.record(name, val, epochs, test)
}

// train trains len(seeds) models with recipe r and returns, per model, the best
// validation accuracy (a fraction; NaN when the model diverged before its first
// validation), its epoch and the test accuracy of the parameters from that epoch.
func (e *ddrEval) train(stage string, x, table *torch.Tensor, perModel bool, r train.EpochRecipe, seeds []uint64, ck *train.EpochCheckpoint) (val []float64, epochs []int, test []float64, err error) {
	models, val, epochs, _, err := e.trainModels(stage, x, table, perModel, r, seeds, ck)
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

// trainModels trains len(seeds) models with recipe r, saving the training at ck (nil:
// nowhere), and returns them at their best validation, with each model's accuracy there (a
// fraction), its epoch, and the training's wall seconds (over its parts).
func (e *ddrEval) trainModels(stage string, x, table *torch.Tensor, perModel bool, r train.EpochRecipe, seeds []uint64, ck *train.EpochCheckpoint) (*train.Models, []float64, []int, float64, error) {
	et := &train.EpochTrainer{Net: e.net, Cfg: e.cfg, Images: x, Labels: table, PerModel: perModel, Recipe: r, Device: e.dev, Checkpoint: ck}
	if e.dc.Progress != nil {
		et.Progress = func(done, total int) { e.dc.Progress(stage, done, total) }
	}
	res, err := et.Train(e.ctx, seeds, e.vx, e.vy)
	if err != nil {
		return nil, nil, nil, 0, fmt.Errorf("%s: %w", stage, err)
	}
	val := make([]float64, len(seeds))
	for i, v := range res.Validation {
		val[i] = v / 100 // NaN stays NaN
	}
	return res.Models, val, res.Epoch, res.Seconds, nil
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
