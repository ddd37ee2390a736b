// ddranking.go: `ldtorch evaluate --protocol ddranking`: the DD-Ranking benchmark's
// soft-label evaluation of an artifact and its scores (artifact.EvaluateDDRanking).

package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/torch"
)

func (e *env) evaluateDDRanking(c *cli.Context, dir string) error {
	dc := artifact.DDRankingConfig{Arch: c.String("arch"), Augment: c.String("augment"), Seed: c.Int64("seed"),
		Device: c.String("device"), Dataset: c.String("dataset"), AllowTF32: c.Bool("allow-tf32"), CacheDir: c.String("cache-dir")}
	dc.Epochs, dc.Models = c.Int("epochs"), c.Int("models")
	if c.IsSet("epochs") {
		if err := countFlag("epochs", dc.Epochs, 1, config.MaxEvalEpochs, "each epoch trains every model on the whole training set once"); err != nil {
			return err
		}
	}
	if c.IsSet("models") {
		if err := countFlag("models", dc.Models, 1, config.MaxEvalModels, config.WhyModels); err != nil {
			return err
		}
	}
	if c.IsSet("cache-dir") && dc.CacheDir == "" {
		return usageErrorf("--cache-dir needs a folder")
	}
	switch every := c.Duration("checkpoint-every"); {
	case every < 0:
		return usageErrorf("--checkpoint-every: must be a wall time of 0 (keep nothing) or more, got %v", every)
	case every == 0:
		dc.CheckpointEvery = -1
	default:
		dc.CheckpointEvery = every
	}
	threads := c.Int("threads")
	if threads < 0 || threads > config.MaxThreads() {
		return usageErrorf("--threads: must be 0 (libtorch's default) or between 1 and %d, got %d", config.MaxThreads(), threads)
	}
	art, err := readArtifact(dir)
	if err != nil {
		return err
	}
	if dc, err = dc.Resolved(art); err != nil {
		return evaluateError(err, dir, c)
	}
	cfg, err := artifact.EvalDataConfig(art, dc.Dataset)
	if err != nil {
		return evaluateError(err, dir, c)
	}
	if c.IsSet("data-dir") {
		cfg.DataDir = c.String("data-dir")
	}
	if dc.CacheDir == "" {
		dataDir, err := data.DataDir(cfg.DataDir)
		if err != nil {
			return usageErrorf("--data-dir: %v", err)
		}
		dc.CacheDir = artifact.DefaultDDRankingCache(dataDir)
	}
	if _, err := checkRuntime(dc.Device); err != nil {
		return err
	}
	if threads <= 0 {
		threads = torch.NumThreads()
	}
	if err := torch.SetNumThreads(threads); err != nil {
		return failuref("--threads %d: %v", threads, err)
	}
	d, err := labeldistill.LoadData(cfg)
	if err != nil {
		return err
	}
	syn, full := dc.DDRankingRecipes()
	pr := newProgress(e.stderr, false, c.Bool("quiet"))
	dc.Progress = pr.stageEpochs
	dc.Notes = pr.message
	pr.note("DD-Ranking protocol: %d runs of %s models on %d distilled images (hard and distilled labels) and %d random images each, "+
		"%d epochs × %d learning rates; full data %d images, %d epochs (cached in %s); validation %d, test %d %s images",
		dc.Models, dc.Arch, art.Shape[0], art.Shape[0], syn.Epochs, len(syn.LRs), d.TargetSet.N, full.Epochs, dc.CacheDir,
		d.Validation.N, d.Test.N, cfg.Dataset)
	res, err := artifact.EvaluateDDRanking(c.Context, art, d, dc)
	if err := evaluationError(c, dir, err); err != nil {
		var ee *exitError
		if errors.As(err, &ee) && ee.code == exitInterrupted && dc.CheckpointEvery > 0 {
			where := filepath.Join(dir, artifact.EvaluationsFolder, "ddranking-partial-*")
			if dc.CacheDir != "" {
				// The full-data model's training is kept beside its cache entry, where
				// any evaluation needing that model goes on with it.
				where += "; the full-data model's in " + dc.CacheDir
			}
			ee.msg = fmt.Sprintf("interrupted; the same command goes on from the last save (every %v, in %s)", dc.CheckpointEvery, where)
		}
		return err
	}
	if c.Bool("json") {
		return printJSON(e.stdout, res)
	}
	cached := ""
	if res.FullData.Cached {
		cached = ", cached"
	}
	fmt.Fprintf(e.stdout, "%s: DD-Ranking soft-label protocol, %s, %d runs, %d epochs (full data %d), augmentation %s, seed %d\n",
		dir, res.Arch, res.Models, res.Recipe.Epochs, res.FullDataRecipe.Epochs, dc.Augment, res.Seed)
	fmt.Fprintf(e.stdout, "test accuracy (fraction; lr and epoch chosen on validation):\n")
	fmt.Fprintf(e.stdout, "  full data, hard labels        %.4f (%d images%s)\n", res.FullData.Accuracy, res.FullData.Images, cached)
	for _, l := range []struct {
		name string
		r    artifact.DDRankingLabels
	}{{"distilled images, hard labels", res.HardLabel}, {"distilled images and labels", res.SoftLabel}, {"random images, teacher labels", res.RandomSoftLabel}} {
		fmt.Fprintf(e.stdout, "  %-30s %.4f ± %.4f (lr %v)\n", l.name, l.r.Mean, l.r.Std, l.r.LRs)
	}
	fmt.Fprintf(e.stdout, "hlr %.4f ± %.4f   ior %.4f ± %.4f   score %.4f ± %.4f (population std over %d runs)\n",
		res.HLR, res.HLRStd, res.IOR, res.IORStd, res.Score, res.ScoreStd, res.Models)
	if res.Resumed {
		fmt.Fprintf(e.stdout, "resumed: some trainings come from an earlier, interrupted run of this evaluation (wall %s over its parts)\n",
			time.Duration(res.WallSeconds*float64(time.Second)).Round(time.Second))
	}
	fmt.Fprintf(e.stdout, "written to %s\n", filepath.Join(dir, artifact.EvaluationsFolder, artifact.DDRankingFile))
	return nil
}
