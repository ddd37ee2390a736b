// Package rundir keeps a distillation's files: its checkpoints (written by an observer of
// the meta-loop, every CheckpointEvery meta-steps, after validations, at the end and on
// cancellation), the resume from the newest valid one, the run history (metrics.jsonl)
// and the record of the phases after the meta-loop (phases.json). Folder is the
// engine.RunFolder that labeldistill.Distill gives the engine; everything here is written
// against the loop's exported state (engine.Loop's Snapshot, Restore and accessors).
package rundir

import (
	"path/filepath"

	"github.com/ldtorch/ldtorch/labeldistill/checkpoint"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/engine"
)

// Folder is a run's files: CheckpointDir (checkpoints and phases.json; "" for none),
// ResumeDir (the checkpoint folder, or the output folder holding one, to continue from;
// "" for a fresh run), Keep (the newest checkpoints kept; KeepSet false: the default
// checkpoint.DefaultKeep) and HistoryPath (metrics.jsonl; "" for none). Only rank 0
// writes; every rank reads the checkpoint it resumes from.
type Folder struct {
	CheckpointDir, ResumeDir string
	Keep                     int
	KeepSet                  bool
	HistoryPath              string
	// GradStats, when set, gives the history its meta-gradient statistics (the gradient
	// norm of each line, the window variance); nil writes none.
	GradStats GradStats

	resumeDir  string // ResumeDir's checkpoint folder, resolved by Prepare
	writeCkpts bool
	ckpt       *checkpointer
}

// Prepare resolves the folders and checks them before any work (engine.RunFolder).
func (f *Folder) Prepare(cfg config.Config, rank int) error {
	ckptDir := f.CheckpointDir
	if f.ResumeDir != "" {
		var err error
		if f.resumeDir, err = ResolveResumeDir(f.ResumeDir); err != nil {
			return err
		}
		if ckptDir == "" {
			ckptDir = f.resumeDir
		}
	}
	if rank != 0 {
		// only rank 0 writes; every rank reads the checkpoint it resumes from
		ckptDir, f.HistoryPath = "", ""
	}
	f.writeCkpts = ckptDir != "" && cfg.CheckpointEvery >= 0
	if f.writeCkpts {
		if err := PrepareCheckpointDir(ckptDir); err != nil {
			return err
		}
	}
	f.ckpt = &checkpointer{dir: ckptDir, keep: checkpoint.DefaultKeep, last: engine.Position{Step: -1, Epoch: -1, NextBatch: -1}}
	if f.KeepSet {
		f.ckpt.keep = f.Keep
	}
	return nil
}

// Resuming says whether the run continues from a checkpoint.
func (f *Folder) Resuming() bool { return f.resumeDir != "" }

// Observers are the history's and the checkpoints' (engine.RunFolder).
func (f *Folder) Observers(l *engine.Loop) []engine.Observer {
	var obs []engine.Observer
	if f.HistoryPath != "" {
		if f.GradStats != nil {
			obs = append(obs, f.GradStats.Observer())
		}
		h := &history{path: f.HistoryPath, resumed: f.resumeDir != "", stats: f.GradStats}
		if f.resumeDir != "" && filepath.Base(filepath.Clean(f.resumeDir)) == "checkpoints" {
			h.from = filepath.Join(filepath.Dir(filepath.Clean(f.resumeDir)), HistoryFile)
		}
		obs = append(obs, h.observer())
	}
	if f.writeCkpts {
		obs = append(obs, f.ckpt.observer())
	}
	return obs
}

// Resume restores l from the newest valid checkpoint when resuming, or removes an earlier
// run's phases.json from a fresh run's checkpoint folder (engine.RunFolder).
func (f *Folder) Resume(l *engine.Loop) (engine.Position, error) {
	none := engine.Position{Step: -1, Epoch: -1, NextBatch: -1}
	if f.resumeDir == "" {
		if f.writeCkpts {
			return none, removePhases(f.ckpt.dir)
		}
		return none, nil
	}
	pos, written, err := resume(l, f.resumeDir)
	if err != nil {
		return none, err
	}
	f.ckpt.last, f.ckpt.written = pos, written
	return pos, nil
}

// Phases is the record of the phases after the meta-loop (engine.RunFolder): tied to the
// final checkpoint, when the loop ended at one; those of an earlier part are reused only
// when this part ran no meta-step (it resumed from that final checkpoint).
func (f *Folder) Phases(l *engine.Loop, resumedAt engine.Position) engine.PhaseLog {
	var final checkpointID // none (Written "") unless the loop ended at a checkpoint
	phasesDir, reuseFrom := "", ""
	pos := l.Position()
	if f.ckpt.last == pos && f.ckpt.written != "" {
		final = checkpointID{Step: pos.Step, Written: f.ckpt.written}
	}
	if f.writeCkpts {
		phasesDir = f.ckpt.dir
	}
	if f.resumeDir != "" && resumedAt == pos {
		reuseFrom = f.resumeDir
	}
	return newPhases(l, phasesDir, reuseFrom, final)
}
