package engine

// resume.go: continuing a run from its newest valid checkpoint: corrupt checkpoints are
// skipped with a warning, one of another configuration or other data is refused naming the
// differences, and the loop's state is restored from it (checkpoint.go lists that state).

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ldtorch/ldtorch/labeldistill/checkpoint"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/torch"
)

// ResumeError is why a run cannot be resumed from a checkpoint folder (none there, none
// valid, another configuration or other data); Msg is the sentence after "resume: ". Err,
// when set, is the underlying error.
type ResumeError struct {
	Msg string
	Err error
}

func (e *ResumeError) Error() string { return "resume: " + e.Msg }
func (e *ResumeError) Unwrap() error { return e.Err }

func resumeErrorf(format string, args ...any) *ResumeError {
	err := fmt.Errorf(format, args...)
	return &ResumeError{Msg: err.Error(), Err: errors.Unwrap(err)}
}

// resolveResumeDir returns the checkpoint folder of a --resume argument: dir itself when it
// holds checkpoints, else dir/checkpoints when that is a folder.
func resolveResumeDir(dir string) (string, error) {
	if !isDir(dir) {
		return "", resumeErrorf("%s is not a folder", dir)
	}
	if paths, err := checkpoint.Files(dir); err == nil && len(paths) == 0 {
		if sub := filepath.Join(dir, "checkpoints"); isDir(sub) {
			return sub, nil
		}
	}
	return dir, nil
}

// readCheckpoint reads and verifies one checkpoint file and its meta.
func readCheckpoint(path string) (*checkpoint.File, *checkpointMeta, error) {
	f, err := checkpoint.Read(path)
	if err != nil {
		return nil, nil, err
	}
	var m checkpointMeta
	if err := f.Meta(&m); err != nil {
		return nil, nil, err
	}
	if m.Config.Learn == "" { // written before learn existed: its run learnt labels
		m.Config.Learn = config.LearnLabels
	}
	return f, &m, nil
}

// newestCheckpoint reads the newest valid checkpoint of the checkpoint folder dir, telling
// skip about each invalid one it passes.
func newestCheckpoint(dir string, skip func(error)) (*checkpoint.File, *checkpointMeta, error) {
	paths, err := checkpoint.Files(dir)
	if err != nil {
		return nil, nil, resumeErrorf("%w", err)
	}
	if len(paths) == 0 {
		return nil, nil, resumeErrorf("no checkpoint (%s) in %s", checkpoint.Pattern, dir)
	}
	var problems []string
	for _, p := range paths {
		f, m, err := readCheckpoint(p)
		if err != nil {
			problems = append(problems, err.Error())
			skip(err)
			continue
		}
		return f, m, nil
	}
	return nil, nil, resumeErrorf("no valid checkpoint in %s: %s", dir, strings.Join(problems, "; "))
}

// ReadCheckpointMeta reads and verifies a checkpoint file and returns its meta as JSON (for
// tools and tests); it fails on any corruption.
func ReadCheckpointMeta(path string) ([]byte, error) {
	_, m, err := readCheckpoint(path)
	if err != nil {
		return nil, err
	}
	return json.MarshalIndent(m, "", "  ")
}

// CheckpointConfig returns the configuration of the newest valid checkpoint in dir (a
// checkpoint folder, or an output folder holding checkpoints/), the checkpoint's path and
// the folder the checkpoints are in: what `--resume DIR` alone continues with. Invalid
// checkpoints are skipped like on resume; with none valid the error is resume's.
func CheckpointConfig(dir string) (cfg config.Config, path, ckptDir string, err error) {
	if ckptDir, err = resolveResumeDir(dir); err != nil {
		return cfg, "", "", err
	}
	f, m, err := newestCheckpoint(ckptDir, func(error) {})
	if err != nil {
		return cfg, "", "", err
	}
	return m.Config, f.Path, ckptDir, nil
}

// resume loads the newest valid checkpoint in dir into the freshly set-up loop. Corrupt
// checkpoints are skipped with a warning; a checkpoint of another configuration or other
// data is refused with an error naming the difference. It returns the position resumed
// at and the checkpoint's time stamp.
func (l *Loop) resume(dir string) (position, string, error) {
	f, m, err := newestCheckpoint(dir, func(err error) {
		l.note(Progress{Phase: "resume", Message: fmt.Sprintf("warning: skipping invalid checkpoint: %v", err)})
	})
	if err != nil {
		return position{}, "", err
	}
	if err := l.compatible(f.Path, m); err != nil {
		return position{}, "", err
	}
	if err := l.restore(f, m); err != nil {
		return position{}, "", fmt.Errorf("resume from %s: %w", f.Path, err)
	}
	// The index file the base examples were read from, when this call does not name it.
	if o, was := l.in.origin, m.BaseOrigin; o != nil && o.File == "" && was != nil && was.Selection == o.Selection {
		o.File, o.FileSHA256, o.Strategy, o.Settings = was.File, was.FileSHA256, was.Strategy, was.Settings
	}
	// The allowed changes (more epochs, threads, device, ...) are recorded.
	l.resumed = config.DiffDetails(m.Config, l.in.cfg)
	changed := ""
	if len(l.resumed) > 0 {
		changed = " (changed: " + strings.Join(l.resumed, "; ") + ")"
	}
	l.note(Progress{Phase: "resume", Epoch: min(l.pos.epoch, l.in.cfg.Epochs), Epochs: l.in.cfg.Epochs,
		Message: fmt.Sprintf("resumed from %s at meta-step %d%s", f.Path, l.pos.step, changed)})
	if v := torch.Version(); m.LibtorchVersion != "" && m.LibtorchVersion != v {
		l.note(Progress{Phase: "resume", Message: fmt.Sprintf("warning: %s was written with libtorch %s, this is libtorch %s: the run continues, but not bit-identically to an uninterrupted run (kernels and random streams may differ)",
			f.Path, m.LibtorchVersion, v)})
	}
	return l.pos, m.Written, nil
}

// compatible refuses a checkpoint written under another configuration or data.
func (l *Loop) compatible(path string, m *checkpointMeta) error {
	in := l.in
	if conflicts := config.ResumeConflicts(m.Config, in.cfg); len(conflicts) > 0 {
		var lines []string
		for _, d := range config.DiffDetails(m.Config, in.cfg) {
			name, _, _ := strings.Cut(d, ":")
			if slices.Contains(conflicts, name) {
				lines = append(lines, d)
			}
		}
		return resumeErrorf("%s was written under a different configuration (checkpoint -> now): %s",
			path, strings.Join(lines, "; "))
	}
	var diffs []string
	names := map[string]bool{}
	for k := range m.DataSHA256 {
		names[k] = true
	}
	for k := range in.ds.Files {
		names[k] = true
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range names {
			if !yield(k) {
				return
			}
		}
	}) {
		a, okA := m.DataSHA256[k]
		b, okB := in.ds.Files[k]
		switch {
		case !okA:
			diffs = append(diffs, fmt.Sprintf("%s: not used by the checkpointed run", k))
		case !okB:
			diffs = append(diffs, fmt.Sprintf("%s: used by the checkpointed run (sha256 %s) but not now", k, a))
		case a != b:
			diffs = append(diffs, fmt.Sprintf("%s: sha256 %s -> %s", k, a, b))
		}
	}
	if n := m.WorldSize; n != 0 && n != l.par.size() {
		// A data-parallel run's arithmetic depends on its world size (each rank's shard of
		// the outer batch, the order of the sums): resuming with another would silently mix
		// two computations. (Checkpoints from before world_size was recorded have 0.)
		return resumeErrorf("%s was written by a run of %d process(es), this one has %d: resume it with %d (ldtorch distill --nproc %d, or torchrun with as many)",
			path, n, l.par.size(), n, n)
	}
	if digest := in.dataDigest(); len(diffs) == 0 && m.DataDigest != digest {
		diffs = append(diffs, fmt.Sprintf("the data trained on (splits and base examples) differ: digest %s -> %s", m.DataDigest, digest))
	}
	if len(diffs) > 0 {
		return resumeErrorf("%s was written with different data (checkpoint -> now): %s", path, strings.Join(diffs, "; "))
	}
	return nil
}

// restore loads a verified, compatible checkpoint into the loop.
func (l *Loop) restore(f *checkpoint.File, m *checkpointMeta) error {
	cfg := l.in.cfg
	perEpoch := l.stepsPerEpoch()
	nTarget := l.in.ds.TargetSet.N
	switch {
	case m.StepsPerEpoch != perEpoch || m.TargetSize != nTarget:
		return fmt.Errorf("checkpoint has %d steps per epoch over %d target examples, the run %d over %d", m.StepsPerEpoch, m.TargetSize, perEpoch, nTarget)
	case m.Epoch < 1 || m.Epoch > cfg.Epochs+1 || m.NextBatch < 0 || m.NextBatch > perEpoch ||
		(m.Epoch == cfg.Epochs+1 && m.NextBatch != 0) || m.Step != (m.Epoch-1)*perEpoch+m.NextBatch:
		return fmt.Errorf("inconsistent position: step %d, epoch %d, batch %d", m.Step, m.Epoch, m.NextBatch)
	}
	var tr ResetTracker
	if err := json.Unmarshal(m.Tracker, &tr); err != nil {
		return err
	}
	observed := m.Step
	if l.dd != nil {
		observed = 0 // method dd has no reset rule
	}
	if tr.Window() != cfg.ResetWindow || tr.MeanOfLast() != cfg.ResetMeanOfLast || tr.TotalSteps() != observed {
		return fmt.Errorf("reset tracker (window %d, mean of last %d, %d steps) does not match the run (%d, %d, %d steps)",
			tr.Window(), tr.MeanOfLast(), tr.TotalSteps(), cfg.ResetWindow, cfg.ResetMeanOfLast, observed)
	}
	model := l.model
	if len(m.Params) != len(model.specs) || len(m.Buffers) != len(l.in.net.Buffers) {
		return fmt.Errorf("checkpoint holds %d parameters and %d buffers, the model has %d and %d", len(m.Params), len(m.Buffers), len(model.specs), len(l.in.net.Buffers))
	}
	for i, sp := range model.specs {
		if m.Params[i] != sp.Name {
			return fmt.Errorf("parameter %d is %q in the checkpoint, %q in the model", i, m.Params[i], sp.Name)
		}
	}
	for i, b := range l.in.net.Buffers {
		if m.Buffers[i] != b.Name {
			return fmt.Errorf("buffer %d is %q in the checkpoint, %q in the model", i, m.Buffers[i], b.Name)
		}
	}
	for _, nt := range l.tensorState() {
		a, err := f.Array(nt.name)
		if err != nil {
			return err
		}
		if err := checkpoint.RestoreTensor(nt.t, a); err != nil {
			return err
		}
	}
	l.best.labels, l.best.images, l.best.lrs, l.order = nil, nil, nil, nil
	for _, st := range l.arrayStates(position{m.Step, m.Epoch, m.NextBatch}) {
		a, err := f.Array(st.name)
		if !st.needed(m) && err != nil {
			continue // absent and not required
		}
		if err != nil {
			return err
		}
		if err := st.load(a); err != nil {
			return err
		}
	}
	for _, sc := range l.scalarStates(m) {
		sc.load()
	}
	l.tracker = &tr
	l.pos = position{m.Step, m.Epoch, m.NextBatch}
	return nil
}
