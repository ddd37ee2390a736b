package rundir

// out.go: a distillation's output folder and the rules by which one run uses it: a fresh
// run never mixes with an earlier run's files (its checkpoints would be pruned by the new
// run's, a resume would find them, its artifact would be replaced unasked), --overwrite
// clears the earlier checkpoints, and a run that fails early leaves no empty folder.

import (
	"os"
	"path/filepath"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/checkpoint"
	"github.com/ldtorch/ldtorch/labeldistill/engine"
)

// Out is an output folder: the artifact, checkpoints/ (with phases.json) and the history.
type Out struct {
	Dir string
	// Replacing says the folder holds an earlier run's artifact (replaced when this run
	// succeeds).
	Replacing bool
	old       []string // the earlier run's checkpoints
}

// EarlierRunError refuses a fresh run in a folder that holds an earlier run's artifact
// or checkpoints.
type EarlierRunError struct {
	Dir         string
	Artifact    bool // an artifact is there
	Checkpoints int  // checkpoints are there (the run can be resumed)
}

func (e *EarlierRunError) Error() string {
	return e.Dir + " already holds an earlier run"
}

// OpenOut checks dir for a run that resumes, overwrites or is fresh (neither).
// artifactFiles are the artifact's file names; a fresh run where one of them or a
// checkpoint is fails with *EarlierRunError.
func OpenOut(dir string, resume, overwrite bool, artifactFiles ...string) (*Out, error) {
	o := &Out{Dir: dir}
	o.old, _ = checkpoint.Files(o.CheckpointDir()) // none when the folder is absent
	for _, f := range artifactFiles {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			o.Replacing = true
		}
	}
	if !resume && !overwrite && (o.Replacing || len(o.old) > 0) {
		return nil, &EarlierRunError{Dir: dir, Artifact: o.Replacing, Checkpoints: len(o.old)}
	}
	return o, nil
}

// CheckpointDir is the folder of the run's checkpoints; HistoryPath its history.
func (o *Out) CheckpointDir() string { return filepath.Join(o.Dir, "checkpoints") }
func (o *Out) HistoryPath() string   { return filepath.Join(o.Dir, HistoryFile) }

// RemoveEarlierCheckpoints deletes the earlier run's checkpoints and finished phases
// (--overwrite: before a run that checkpoints, so that they do not mix; after one that
// does not, once its artifact replaced theirs).
func (o *Out) RemoveEarlierCheckpoints() {
	for _, p := range o.old {
		os.Remove(p)
	}
	os.Remove(filepath.Join(o.CheckpointDir(), engine.PhasesFile))
}

// Failed removes the checkpoint folder when it is empty: a run that failed early leaves
// no empty folder.
func (o *Out) Failed() { os.Remove(o.CheckpointDir()) }

// Checkpoints are how many checkpoints the folder holds now.
func (o *Out) Checkpoints() int {
	paths, _ := checkpoint.Files(o.CheckpointDir())
	return len(paths)
}

// PhasesSince is the phases.json written after t (what an interrupted run finished of the
// final test and the baselines), "" when there is none.
func (o *Out) PhasesSince(t time.Time) string {
	p := filepath.Join(o.CheckpointDir(), engine.PhasesFile)
	if st, err := os.Stat(p); err == nil && st.ModTime().After(t) {
		return p
	}
	return ""
}
