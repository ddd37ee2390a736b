package rundir

// checkpoints.go: the observer that writes the loop's whole state (engine.Loop.Snapshot)
// at meta-step boundaries: every CheckpointEvery meta-steps, after validations, at the end
// and on cancellation; the newest Keep are kept (the file format is labeldistill/checkpoint).

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/ldtorch/ldtorch/labeldistill/checkpoint"
	"github.com/ldtorch/ldtorch/labeldistill/engine"
	"github.com/ldtorch/ldtorch/torch/fileio/atomicfile"
)

// checkpointer is the observer that writes checkpoints into dir, keeping the newest keep.
type checkpointer struct {
	dir  string
	keep int
	last engine.Position // of the last checkpoint written or loaded
	// written is that checkpoint's time stamp (its meta's "written"), which with its step
	// names it (phases.go).
	written string
}

func (c *checkpointer) observer() engine.Observer {
	return engine.Observer{
		Name: "checkpoints",
		Stepped: func(l *engine.Loop) error {
			every := l.Config().CheckpointEvery
			// A checkpoint due with an epoch's last batch waits for its validation (epochEnd).
			if every > 0 && l.Position().Step%every == 0 && l.Position().NextBatch < l.StepsPerEpoch() {
				return c.write(l, "periodic", l.Position())
			}
			return nil
		},
		EpochEnd: func(l *engine.Loop, epoch int, validated bool) error {
			// At the engine.Position (next epoch, batch 0), before the next epoch's permutation.
			every := l.Config().CheckpointEvery
			reason := ""
			switch {
			case every > 0 && l.Position().Step%every == 0:
				reason = "periodic"
			case every == 0 && validated:
				reason = "validation"
			case epoch == l.Config().Epochs:
				reason = "final"
			}
			if reason == "" {
				return nil
			}
			return c.write(l, reason, engine.Position{Step: l.Position().Step, Epoch: epoch + 1})
		},
		End: func(l *engine.Loop, err error) error {
			if werr := c.write(l, "cancelled", l.Position()); werr != nil {
				return fmt.Errorf("the checkpoint on cancellation failed: %v", werr)
			}
			return nil
		},
	}
}

// write saves the loop's whole state as <dir>/ckpt-<step>.npz, to be resumed at pos, and
// prunes old ones. pos is the engine.Position after the last meta-step done: the current one, or
// the start of the next batch or epoch when the loop has not advanced to it yet. Non-finite
// state is refused with a *NonFiniteError (the previous checkpoints stay).
func (c *checkpointer) write(l *engine.Loop, reason string, pos engine.Position) error {
	// The state saved includes every step's checks and its observation by the reset rule.
	if err := l.ReadPending(); err != nil {
		return err
	}
	if c.last == pos {
		return nil
	}
	// What the observers wrote up to this engine.Position (the history) must survive whatever
	// follows the checkpoint.
	if err := l.Sync(); err != nil {
		return err
	}
	meta, arrays, err := l.Snapshot(reason, pos)
	if err != nil {
		return err
	}
	path := filepath.Join(c.dir, checkpoint.Name(pos.Step))
	if err := checkpoint.Write(path, meta, arrays); err != nil {
		return err
	}
	c.last, c.written = pos, meta.Written
	epochs := l.Config().Epochs
	l.Note(engine.Progress{Phase: "checkpoint", Epoch: min(pos.Epoch, epochs), Epochs: epochs, Message: fmt.Sprintf("wrote %s (%s)", path, reason)})
	if err := checkpoint.Prune(c.dir, c.keep); err != nil {
		l.Note(engine.Progress{Phase: "checkpoint", Message: fmt.Sprintf("warning: could not remove old checkpoints: %v", err)})
	}
	return nil
}

// PrepareCheckpointDir creates dir and proves it writable, so that an unusable folder fails
// before any work starts.
func PrepareCheckpointDir(dir string) error {
	if err := atomicfile.EnsureWritableDir(dir); err != nil {
		return fmt.Errorf("checkpoint folder %s is not writable: %w", dir, err)
	}
	return nil
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
