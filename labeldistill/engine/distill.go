package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/checkpoint"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/torch/dist"
)

// distill.go: a distillation from start to end: the run's inputs, the meta-loop with its
// observers (the data-parallel checks, the history, checkpoints, progress), a resume, the
// final test and the baselines.

// Options are what Distill runs with besides the configuration (labeldistill's RunOptions).
type Options struct {
	Start         time.Time // when the run started (its wall time counts from here)
	Progress      func(Progress)
	CheckpointDir string
	ResumeDir     string
	Keep          int
	KeepSet       bool
	HistoryPath   string
	Group         *dist.Group
	BaseSplit     BaseSplit
	Learn         func(*Inputs) ([]learnable, error) // nil: what cfg.Learn says (tests give others)
	SaveModels    string
	Dataset       *Data          // the data (nil: cfg's, loaded from disk)
	BaseFile      *data.BaseFile // where cfg's base indices were read from (nil: not from a file)
}

// Distill runs a distillation from start to end: the meta-loop with its observers, the
// final test and the baselines (labeldistill.Distill's work, under its options).
func Distill(ctx context.Context, cfg config.Config, o Options) (*Result, error) {
	start := o.Start
	cfg, err := cfg.Resolved()
	if err != nil {
		return nil, err
	}
	ckptDir, resumeDir := o.CheckpointDir, ""
	if o.ResumeDir != "" {
		if resumeDir, err = resolveResumeDir(o.ResumeDir); err != nil {
			return nil, err
		}
		if ckptDir == "" {
			ckptDir = resumeDir
		}
	}
	par := &parallel{g: o.Group, baseSplit: o.BaseSplit}
	if par.rank() != 0 {
		var cancel context.CancelFunc
		ctx, cancel = followRoot(ctx)
		defer cancel()
		// only rank 0 writes; every rank reads the checkpoint it resumes from
		ckptDir, o.HistoryPath = "", ""
	}
	writeCkpts := ckptDir != "" && cfg.CheckpointEvery >= 0
	if writeCkpts {
		if err := prepareCheckpointDir(ckptDir); err != nil {
			return nil, err
		}
	}
	var saver *train.ModelSaver
	if o.SaveModels != "" {
		if saver, err = train.NewModelSaver(o.SaveModels); err != nil {
			return nil, fmt.Errorf("save models: %w", err)
		}
	}
	in, err := prepareRun(cfg, o.Dataset, o.BaseFile)
	if err != nil {
		return nil, err
	}
	defer in.close()
	if c := in.cfg; resumeDir == "" && c.BaseIndices != nil && c.BaseSelection == config.SelectBalanced {
		if err := checkBalanced(in.ds.Base.Labels, in.ds.Classes); err != nil {
			return nil, err
		}
	}
	if o.Progress != nil {
		for _, w := range in.ds.Warnings {
			o.Progress(Progress{Phase: "data", Message: "warning: " + w})
		}
	}
	l, err := newLoop(in, par, o.Learn)
	if err != nil {
		return nil, err
	}
	defer l.close()
	l.clock.start = start
	l.observers = par.observer()
	if o.HistoryPath != "" {
		h := &history{path: o.HistoryPath, resumed: resumeDir != ""}
		if dir, err := resolveResumeDir(resumeDir); err == nil && resumeDir != "" && filepath.Base(filepath.Clean(dir)) == "checkpoints" {
			h.from = filepath.Join(filepath.Dir(filepath.Clean(dir)), HistoryFile)
		}
		l.observers = append(l.observers, h.observer())
	}
	ckpt := &checkpointer{dir: ckptDir, keep: checkpoint.DefaultKeep, last: position{-1, -1, -1}}
	resumedAt := position{-1, -1, -1}
	if o.KeepSet {
		ckpt.keep = o.Keep
	}
	if writeCkpts {
		l.observers = append(l.observers, ckpt.observer())
	}
	if o.Progress != nil {
		l.observers = append(l.observers, progressObserver(o.Progress))
	}
	if resumeDir != "" {
		if ckpt.last, ckpt.written, err = l.resume(resumeDir); err != nil {
			return nil, err
		}
		resumedAt = ckpt.last
	} else if writeCkpts {
		if err := removePhases(ckptDir); err != nil {
			return nil, err
		}
	}
	if err := par.checkShards(in.cfg, in.ds.TargetSet.N); err != nil {
		return nil, err
	}
	if err := l.run(ctx); err != nil {
		return nil, err
	}
	if l.best.labels == nil {
		return nil, &DivergedError{Purpose: "validation", Models: len(l.vals), Steps: l.T(), Field: "eval_lr", LR: in.cfg.EvalLR}
	}
	// The phases after the meta-loop are tied to the final checkpoint, when there is one;
	// those of an earlier part are reused only when this part ran no meta-step (it resumed
	// from that final checkpoint).
	var final checkpointID // none (Written "") unless the loop ended at a checkpoint
	phasesDir, reuseFrom := "", ""
	if ckpt.last == l.pos && ckpt.written != "" {
		final = checkpointID{Step: l.pos.step, Written: ckpt.written}
	}
	if writeCkpts {
		phasesDir = ckptDir
	}
	if resumeDir != "" && resumedAt == l.pos {
		reuseFrom = resumeDir
	}
	ph := l.newPhases(phasesDir, reuseFrom, final)
	res := l.result()
	if err := l.testPhase(ctx, res, saver, ph); err != nil {
		return nil, err
	}
	if res.Baselines, err = l.baselines(ctx, ph); err != nil {
		return nil, err
	}
	res.WallSeconds = l.wallSeconds()
	return res, nil
}

// checkBalanced refuses listed base examples said to be balanced whose classes are not
// equally represented (a fresh run's check: runs from before base_selection "given"
// recorded "balanced" for any list, and resume as they ran).
func checkBalanced(labels []int64, classes int) error {
	counts := make([]int, classes)
	for _, c := range labels {
		if c >= 0 && int(c) < classes {
			counts[c]++
		}
	}
	for _, n := range counts {
		if n != counts[0] {
			parts := make([]string, classes)
			for c, n := range counts {
				parts[c] = fmt.Sprintf("%d: %d", c, n)
			}
			return config.FieldErrorf("base_selection", "balanced, but the examples listed in base_indices are not (examples per class %s); leave base_selection out (given) or set unbalanced",
				strings.Join(parts, ", "))
		}
	}
	return nil
}
