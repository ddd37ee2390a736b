package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

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
	Start    time.Time // when the run started (its wall time counts from here)
	Progress func(Progress)
	Folder   RunFolder // the run's files: history, checkpoints, resume, phases (nil: none)
	// Observers are attached after the run folder's, before progress (a caller's own hooks:
	// statistics, early stopping by cancelling the context, …).
	Observers []Observer
	Group     *dist.Group
	BaseSplit BaseSplit
	Learn     func(*Inputs) ([]learnable, error) // nil: what cfg.Learn says (tests give others)
	// SaveModels: the final test's models are saved into this folder (train.ModelSaver).
	SaveModels string
	Dataset    *Data          // the data (nil: cfg's, loaded from disk)
	BaseFile   *data.BaseFile // where cfg's base indices were read from (nil: not from a file)
}

// RunFolder is where a run keeps its files (rundir.Folder): the history and checkpoint
// observers, the resume, and the record of the phases after the meta-loop.
type RunFolder interface {
	// Prepare checks, before any work, that the folders are usable for a run of cfg by
	// the process of rank (only rank 0 writes).
	Prepare(cfg config.Config, rank int) error
	// Resuming says whether the run continues from a checkpoint.
	Resuming() bool
	// Observers are attached to the fresh loop, after the data-parallel checks.
	Observers(l *Loop) []Observer
	// Resume restores l from its checkpoint when Resuming (else clears what an earlier run
	// left) and returns the position resumed at (Position{-1, -1, -1}: a fresh run).
	Resume(l *Loop) (Position, error)
	// Phases is the record of the phases after the meta-loop, which ended at l's position.
	Phases(l *Loop, resumedAt Position) PhaseLog
}

// Distill runs a distillation from start to end: the meta-loop with its observers, the
// final test and the baselines (labeldistill.Distill's work, under its options).
func Distill(ctx context.Context, r config.Resolved, o Options) (*Result, error) {
	par := &parallel{g: o.Group, baseSplit: o.BaseSplit}
	if par.rank() != 0 {
		var cancel context.CancelFunc
		ctx, cancel = followRoot(ctx)
		defer cancel()
	}
	run, err := openRun(ctx, r, o, par)
	if err != nil {
		return nil, err
	}
	defer run.close()
	if err := run.l.run(ctx); err != nil {
		return nil, err
	}
	return run.finish(ctx)
}

// openedRun is a distillation set up for its meta-loop: its inputs, the loop with its
// observers at the position it starts from, and what the phases after it need.
type openedRun struct {
	in        *Inputs
	l         *Loop
	folder    RunFolder
	saver     *train.ModelSaver
	resumedAt Position // Position{-1, -1, -1}: a fresh run
}

// openRun prepares the run r under o (the first half of Distill): the run folder, the
// inputs on the device, the loop, its observers and its resume.
func openRun(ctx context.Context, r config.Resolved, o Options, par *parallel) (*openedRun, error) {
	cfg := r.Config
	var err error
	if o.Folder != nil {
		if err := o.Folder.Prepare(cfg, par.rank()); err != nil {
			return nil, err
		}
	}
	resuming := o.Folder != nil && o.Folder.Resuming()
	run := &openedRun{folder: o.Folder, resumedAt: Position{-1, -1, -1}}
	if o.SaveModels != "" {
		if run.saver, err = train.NewModelSaver(o.SaveModels); err != nil {
			return nil, fmt.Errorf("save models: %w", err)
		}
	}
	if run.in, err = prepareRunContext(ctx, r, o.Dataset, o.BaseFile); err != nil {
		return nil, err
	}
	in := run.in
	if c := in.cfg; !resuming && c.BaseIndices != nil && c.BaseSelection == config.SelectBalanced {
		if err := checkBalanced(in.ds.Base.Labels, in.ds.Classes); err != nil {
			run.close()
			return nil, err
		}
	}
	if o.Progress != nil {
		for _, w := range in.ds.Warnings {
			o.Progress(Progress{Phase: "data", Message: "warning: " + w})
		}
	}
	if run.l, err = newLoop(in, par, o.Learn); err != nil {
		run.close()
		return nil, err
	}
	l := run.l
	l.clock.start = o.Start
	l.observers = par.observer()
	if o.Folder != nil {
		l.observers = append(l.observers, o.Folder.Observers(l)...)
	}
	l.observers = append(l.observers, o.Observers...)
	if o.Progress != nil {
		l.observers = append(l.observers, progressObserver(o.Progress))
	}
	if o.Folder != nil {
		if run.resumedAt, err = o.Folder.Resume(l); err != nil {
			run.close()
			return nil, err
		}
	}
	if err := par.checkShards(in.cfg, in.ds.TargetSet.N); err != nil {
		run.close()
		return nil, err
	}
	return run, nil
}

// finish is what follows the meta-loop (the second half of Distill): the kept values'
// final test and the baselines.
func (run *openedRun) finish(ctx context.Context) (*Result, error) {
	l := run.l
	if l.best.labels == nil {
		return nil, &DivergedError{Purpose: "validation", Models: len(l.vals), Steps: l.T(), Field: "eval_lr", LR: run.in.cfg.EvalLR}
	}
	var ph PhaseLog = NoPhaseLog{}
	if run.folder != nil {
		ph = run.folder.Phases(l, run.resumedAt)
	}
	res := l.result()
	if err := l.testPhase(ctx, res, run.saver, ph); err != nil {
		return nil, err
	}
	var err error
	if res.Baselines, err = l.baselines(ctx, ph); err != nil {
		return nil, err
	}
	res.WallSeconds = l.wallSeconds()
	return res, nil
}

func (run *openedRun) close() {
	if run.l != nil {
		run.l.close()
	}
	if run.in != nil {
		run.in.close()
	}
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
