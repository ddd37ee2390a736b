package artifact

// ddranking_test.go: the DD-Ranking protocol: its scores on known accuracies, and the
// whole evaluation end to end on a tiny artifact of real MNIST images (2 epochs, 2 models,
// a few hundred images): the learning rate and epoch of every model chosen on validation,
// the scores computed from the accuracies reported, ddranking.json written, the full-data
// model cached and reused, and the same seed giving the same result.

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/config"
)

func TestDDRankingScores(t *testing.T) {
	for _, c := range []struct {
		full, hard, soft, random float64
		hlr, ior, score          float64
	}{
		// α = ½·0.05 − ½·0.19 = −0.07
		{0.99, 0.80, 0.90, 0.85, 0.19, 0.05, 0.24017775925847465},
		// nothing recovered, nothing gained: α = 0
		{0.9, 0.9, 0.7, 0.7, 0, 0, 0.26894142136999516},
		// the extremes of α: 1 and −1 map to 1 and 0
		{0, 1, 1, 0, -1, 1, 1},
		{1, 0, 0, 1, 1, -1, 0},
	} {
		hlr, ior, score := DDRankingScores(c.full, c.hard, c.soft, c.random)
		if math.Abs(hlr-c.hlr) > 1e-15 || math.Abs(ior-c.ior) > 1e-15 || math.Abs(score-c.score) > 1e-15 {
			t.Errorf("DDRankingScores(%v, %v, %v, %v) = %v, %v, %v; want %v, %v, %v",
				c.full, c.hard, c.soft, c.random, hlr, ior, score, c.hlr, c.ior, c.score)
		}
	}
}

// tinyMNISTArtifact writes an artifact of 10 real MNIST train images (one per class) with
// smoothed true labels and returns it with its data: 400 target-set images, 200
// validation and 300 test images.
func tinyMNISTArtifact(t *testing.T) (*Artifact, *labeldistill.Data) {
	t.Helper()
	trainSet, testSet := sharedMNIST(t)
	pool := normalised(trainSet, 0, 200)
	res := smallResult(t, config.MethodLD)
	const n, classes, size = 10, 10, 28 * 28
	res.Config.BaseExamples, res.Config.EvalBatch, res.Config.InnerBatch = n, n, n
	res.BaseShape = [4]int64{n, 1, 28, 28}
	res.BaseImages, res.BaseIndices, res.BaseClasses, res.Labels = nil, nil, nil, make([]float32, n*classes)
	for c := int64(0); c < classes; c++ {
		for j := range pool.N {
			if pool.Labels[j] == c {
				i := len(res.BaseClasses)
				res.BaseImages = append(res.BaseImages, pool.Image(j)...)
				res.BaseIndices, res.BaseClasses = append(res.BaseIndices, int64(j)), append(res.BaseClasses, c)
				for k := range classes {
					res.Labels[i*classes+k] = 0.02
				}
				res.Labels[i*classes+int(c)] = 0.82
				break
			}
		}
	}
	dir := t.TempDir()
	if err := Write(dir, res); err != nil {
		t.Fatal(err)
	}
	art, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	d := &labeldistill.Data{Target: "mnist", Source: "mnist", Classes: classes, Shape: [3]int64{1, 28, 28},
		TargetSet: *normalised(trainSet, 200, 400), Validation: *normalised(trainSet, 59000, 200), Test: *normalised(testSet, 0, 300)}
	return art, d
}

func TestDDRankingEndToEnd(t *testing.T) {
	art, d := tinyMNISTArtifact(t)
	cache := filepath.Join(t.TempDir(), "cache")
	// LeNet keeps it to seconds (ConvNet-3, the default, scores a few hundred images per
	// training in about a second on one CPU thread).
	dc := DDRankingConfig{Arch: config.ArchLeNet, Epochs: 2, Models: 2, CacheDir: cache}
	start := time.Now()
	res, err := EvaluateDDRanking(context.Background(), art, d, dc)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("hlr %.4f ior %.4f score %.4f; full %.3f hard %.3f soft %.3f random %.3f; %.1f s", res.HLR, res.IOR, res.Score,
		res.FullData.Accuracy, res.HardLabel.Mean, res.SoftLabel.Mean, res.RandomSoftLabel.Mean, time.Since(start).Seconds())

	// The recipe: the defaults with --epochs 2 (the schedule decays after half of them).
	r := res.Recipe
	if res.Arch != "lenet" || r.Epochs != 2 || r.StepSize != 1 || r.Batch != 256 || r.Momentum != 0.9 || r.WeightDecay != 5e-4 ||
		!reflect.DeepEqual(r.LRs, DDRankingLRs) || r.ValidateEvery != 20 || res.FullDataRecipe.Epochs != 2 ||
		!reflect.DeepEqual(res.FullDataRecipe.LRs, []float64{0.01}) || res.Models != 2 || res.Seed != art.Report.Config.Seed {
		t.Errorf("recipe %+v, full-data recipe %+v, arch %s, models %d, seed %d", r, res.FullDataRecipe, res.Arch, res.Models, res.Seed)
	}

	// Each model's learning rate and epoch are those with its best validation accuracy (the
	// smallest learning rate on ties), and its reported accuracy is that grid point's test
	// accuracy, a fraction.
	for _, k := range []struct {
		name string
		l    DDRankingLabels
	}{{"hard", res.HardLabel}, {"soft", res.SoftLabel}, {"random", res.RandomSoftLabel}} {
		l := k.l
		if len(l.Grid) != len(DDRankingLRs) || len(l.Accuracies) != 2 || l.Images != 10 {
			t.Fatalf("%s: %d grid points, %d accuracies, %d images", k.name, len(l.Grid), len(l.Accuracies), l.Images)
		}
		for i := range 2 {
			best := -1
			for g, pt := range l.Grid {
				if pt.Validation[i] != nil && (best < 0 || *pt.Validation[i] > *l.Grid[best].Validation[i]) {
					best = g
				}
				if pt.Epochs[i] != 2 && pt.Validation[i] != nil {
					t.Errorf("%s model %d lr %g: epoch %d, want 2 (the one validation of 2 epochs)", k.name, i, pt.LR, pt.Epochs[i])
				}
			}
			pt := l.Grid[best]
			if l.LRs[i] != pt.LR || l.Validation[i] != *pt.Validation[i] || l.Accuracies[i] != *pt.Test[i] || l.Epochs[i] != pt.Epochs[i] {
				t.Errorf("%s model %d: chose lr %g (validation %v, test %v), the validation picks lr %g (%v, %v)",
					k.name, i, l.LRs[i], l.Validation[i], l.Accuracies[i], pt.LR, *pt.Validation[i], *pt.Test[i])
			}
			if a := l.Accuracies[i]; a < 0 || a > 1 {
				t.Errorf("%s model %d: accuracy %v is not a fraction", k.name, i, a)
			}
		}
	}
	// The scores are DDRankingScores of the accuracies, run by run, and their means.
	var hlr, ior, score float64
	for i, run := range res.Runs {
		h, o, s := DDRankingScores(res.FullData.Accuracy, res.HardLabel.Accuracies[i], res.SoftLabel.Accuracies[i], res.RandomSoftLabel.Accuracies[i])
		if run != (DDRankingRun{HLR: h, IOR: o, Score: s}) {
			t.Errorf("run %d: %+v, want %v %v %v", i, run, h, o, s)
		}
		hlr, ior, score = hlr+h/2, ior+o/2, score+s/2
	}
	if math.Abs(res.HLR-hlr) > 1e-15 || math.Abs(res.IOR-ior) > 1e-15 || math.Abs(res.Score-score) > 1e-15 {
		t.Errorf("means %v %v %v, want %v %v %v", res.HLR, res.IOR, res.Score, hlr, ior, score)
	}
	if f := res.FullData; f.Cached || f.Images != 400 || f.Epoch != 2 || f.Accuracy < 0 || f.Accuracy > 1 || f.Validation < 0 || f.Validation > 1 {
		t.Errorf("full data: %+v (trained on the 400 target-set images, accuracies as fractions)", f)
	}

	// ddranking.json is the result.
	b, err := os.ReadFile(filepath.Join(art.Dir, EvaluationsFolder, DDRankingFile))
	if err != nil {
		t.Fatal(err)
	}
	var onDisk DDRankingResult
	if err := json.Unmarshal(b, &onDisk); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&onDisk, res) {
		t.Errorf("ddranking.json differs from the result returned")
	}

	// Again with the same seed: the full-data model comes from the cache, every number is
	// the same. A changed recipe does not use the cached model.
	again, err := EvaluateDDRanking(context.Background(), art, d, dc)
	if err != nil {
		t.Fatal(err)
	}
	if !again.FullData.Cached || again.FullData.CacheFile != res.FullData.CacheFile {
		t.Errorf("second run: full data %+v, want it read from %s", again.FullData, res.FullData.CacheFile)
	}
	same := func(a, b *DDRankingResult) bool {
		return reflect.DeepEqual(a.Runs, b.Runs) && reflect.DeepEqual(a.HardLabel, b.HardLabel) &&
			reflect.DeepEqual(a.SoftLabel, b.SoftLabel) && reflect.DeepEqual(a.RandomSoftLabel, b.RandomSoftLabel) &&
			a.FullData.Accuracy == b.FullData.Accuracy
	}
	if !same(res, again) {
		t.Errorf("the same seed gave another result:\n%+v\n%+v", res.Runs, again.Runs)
	}
	dc.Augment = AugmentNone
	other, err := EvaluateDDRanking(context.Background(), art, d, dc)
	if err != nil {
		t.Fatal(err)
	}
	if other.FullData.Cached || other.FullData.CacheFile == res.FullData.CacheFile {
		t.Errorf("another recipe (no augmentation) used the cached model: %+v", other.FullData)
	}
	if same(res, other) {
		t.Errorf("without augmentation every number is the same as with it")
	}
}

// Settings are checked against the artifact before anything trains.
func TestDDRankingConfigErrors(t *testing.T) {
	art, d := tinyMNISTArtifact(t)
	for _, c := range []struct {
		dc    DDRankingConfig
		field string
	}{
		{DDRankingConfig{Arch: "alexnet"}, "arch"},
		{DDRankingConfig{Arch: "vgg"}, "arch"},
		{DDRankingConfig{Models: -1}, "models"},
		{DDRankingConfig{Epochs: -3}, "epochs"},
		{DDRankingConfig{Augment: "mixup"}, "augment"},
		{DDRankingConfig{Device: "gpu"}, "device"},
		{DDRankingConfig{Dataset: "cifar10"}, "dataset"},
	} {
		_, err := EvaluateDDRanking(context.Background(), art, d, c.dc)
		var fe *config.FieldError
		if !asFieldError(err, &fe) || fe.Field != c.field {
			t.Errorf("%+v: error %v, want one naming %s", c.dc, err, c.field)
		}
	}
	if _, err := os.Stat(filepath.Join(art.Dir, EvaluationsFolder, DDRankingFile)); err == nil {
		t.Errorf("a refused evaluation wrote %s", DDRankingFile)
	}
	// The defaults: ConvNet-3, 5 runs, DSA, the report's seed.
	dc, err := DDRankingConfig{}.Resolved(art)
	if err != nil || dc.Arch != "convnet" || dc.Models != 5 || dc.Augment != "dsa" || dc.Seed != art.Report.Config.Seed || dc.Epochs != 0 {
		t.Errorf("defaults %+v, %v", dc, err)
	}
	syn, full := dc.DDRankingRecipes()
	if syn.Epochs != 1000 || syn.StepSize != 500 || full.Epochs != 200 || full.StepSize != 100 || syn.Batch != 256 || full.Batch != 256 {
		t.Errorf("default recipes %+v, %+v", syn, full)
	}
}

func asFieldError(err error, fe **config.FieldError) bool { return errors.As(err, fe) }
