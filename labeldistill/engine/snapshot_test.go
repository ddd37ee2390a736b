package engine

// snapshot_test.go: the loop's state round trip (Snapshot, Restore) for this package's
// tests: a RunFolder that writes a checkpoint when the run is cancelled and resumes from
// the newest one, through the checkpoint file format alone (the run folder's own rules,
// periodic checkpoints included, are labeldistill/rundir's, tested there and in
// labeldistill's tests).

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/ldtorch/ldtorch/labeldistill/checkpoint"
	"github.com/ldtorch/ldtorch/labeldistill/config"
)

// snapshotFolder writes dir/ckpt-<step>.npz on cancellation, and resumes from the newest
// checkpoint there when resume is set.
type snapshotFolder struct {
	dir    string
	resume bool
}

func (f *snapshotFolder) Prepare(config.Config, int) error { return nil }
func (f *snapshotFolder) Resuming() bool                   { return f.resume }

func (f *snapshotFolder) Observers(*Loop) []Observer {
	return []Observer{{Name: "snapshots", End: func(l *Loop, _ error) error {
		if err := l.ReadPending(); err != nil {
			return err
		}
		meta, arrays, err := l.Snapshot("cancelled", l.Position())
		if err != nil {
			return err
		}
		return checkpoint.Write(filepath.Join(f.dir, checkpoint.Name(meta.Step)), meta, arrays)
	}}}
}

func (f *snapshotFolder) Resume(l *Loop) (Position, error) {
	none := Position{-1, -1, -1}
	if !f.resume {
		return none, nil
	}
	paths, err := checkpoint.Files(f.dir)
	if err != nil || len(paths) == 0 {
		return none, fmt.Errorf("no checkpoint in %s: %v", f.dir, err)
	}
	file, meta, err := readSnapshot(paths[0])
	if err != nil {
		return none, err
	}
	return l.Position(), l.Restore(file, meta)
}

func (f *snapshotFolder) Phases(*Loop, Position) PhaseLog { return NoPhaseLog{} }

// readSnapshot reads a checkpoint and its meta.
func readSnapshot(path string) (*checkpoint.File, *CheckpointMeta, error) {
	file, err := checkpoint.Read(path)
	if err != nil {
		return nil, nil, err
	}
	var m CheckpointMeta
	if err := file.Meta(&m); err != nil {
		return nil, nil, err
	}
	return file, &m, nil
}

// WithCheckpointDir checkpoints the run into dir when it is cancelled; WithResume continues
// it from there.
func WithCheckpointDir(dir string) RunOption {
	return func(o *Options) { o.Folder = &snapshotFolder{dir: dir} }
}

func WithResume(dir string) RunOption {
	return func(o *Options) { o.Folder = &snapshotFolder{dir: dir, resume: true} }
}

// cancelAt returns options that cancel ctx right after meta-step k, and collect messages.
func cancelAt(k int, msgs *[]string) (context.Context, RunOption) {
	ctx, cancel := context.WithCancel(context.Background())
	return ctx, WithProgress(func(p Progress) {
		if p.Message != "" && msgs != nil {
			*msgs = append(*msgs, p.Phase+": "+p.Message)
		}
		if k > 0 && p.Phase == "distill" && p.Step == k {
			cancel()
		}
	})
}
