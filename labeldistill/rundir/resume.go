package rundir

// resume.go: continuing a run from its newest valid checkpoint: corrupt checkpoints are
// skipped with a warning, one of another configuration or other data is refused naming the
// differences, and the loop's state is restored from it (checkpoint.go lists that state).

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ldtorch/ldtorch/labeldistill/checkpoint"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/engine"
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

// ResolveResumeDir returns the checkpoint folder of a --resume argument: dir itself when it
// holds checkpoints, else dir/checkpoints when that is a folder.
func ResolveResumeDir(dir string) (string, error) {
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

// ReadCheckpoint reads and verifies one checkpoint file and its meta.
func ReadCheckpoint(path string) (*checkpoint.File, *engine.CheckpointMeta, error) {
	f, err := checkpoint.Read(path)
	if err != nil {
		return nil, nil, err
	}
	var m engine.CheckpointMeta
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
func newestCheckpoint(dir string, skip func(error)) (*checkpoint.File, *engine.CheckpointMeta, error) {
	paths, err := checkpoint.Files(dir)
	if err != nil {
		return nil, nil, resumeErrorf("%w", err)
	}
	if len(paths) == 0 {
		return nil, nil, resumeErrorf("no checkpoint (%s) in %s", checkpoint.Pattern, dir)
	}
	var problems []string
	for _, p := range paths {
		f, m, err := ReadCheckpoint(p)
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
	_, m, err := ReadCheckpoint(path)
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
	if ckptDir, err = ResolveResumeDir(dir); err != nil {
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
// data is refused with an error naming the difference. It returns the engine.Position resumed
// at and the checkpoint's time stamp.
func resume(l *engine.Loop, dir string) (engine.Position, string, error) {
	f, m, err := newestCheckpoint(dir, func(err error) {
		l.Note(engine.Progress{Phase: "resume", Message: fmt.Sprintf("warning: skipping invalid checkpoint: %v", err)})
	})
	if err != nil {
		return engine.Position{}, "", err
	}
	if err := compatible(l, f.Path, m); err != nil {
		return engine.Position{}, "", err
	}
	if err := l.Restore(f, m); err != nil {
		return engine.Position{}, "", fmt.Errorf("resume from %s: %w", f.Path, err)
	}
	// The index file the base examples were read from, when this call does not name it.
	if o, was := l.Origin(), m.BaseOrigin; o != nil && o.File == "" && was != nil && was.Selection == o.Selection {
		o.File, o.FileSHA256, o.Strategy, o.Settings = was.File, was.FileSHA256, was.Strategy, was.Settings
	}
	// The allowed changes (more epochs, threads, device, ...) are recorded (Restore).
	changed := ""
	if r := l.ResumeChanges(); len(r) > 0 {
		changed = " (changed: " + strings.Join(r, "; ") + ")"
	}
	l.Note(engine.Progress{Phase: "resume", Epoch: min(l.Position().Epoch, l.Config().Epochs), Epochs: l.Config().Epochs,
		Message: fmt.Sprintf("resumed from %s at meta-step %d%s", f.Path, l.Position().Step, changed)})
	if v := torch.Version(); m.LibtorchVersion != "" && m.LibtorchVersion != v {
		l.Note(engine.Progress{Phase: "resume", Message: fmt.Sprintf("warning: %s was written with libtorch %s, this is libtorch %s: the run continues, but not bit-identically to an uninterrupted run (kernels and random streams may differ)",
			f.Path, m.LibtorchVersion, v)})
	}
	return l.Position(), m.Written, nil
}

// compatible refuses a checkpoint written under another configuration or data.
func compatible(l *engine.Loop, path string, m *engine.CheckpointMeta) error {
	cfg, ds := l.Config(), l.Data()
	if conflicts := config.ResumeConflicts(m.Config, cfg); len(conflicts) > 0 {
		var lines []string
		for _, d := range config.DiffDetails(m.Config, cfg) {
			name, _, _ := strings.Cut(d, ":")
			if slices.Contains(conflicts, name) {
				lines = append(lines, d)
			}
		}
		return resumeErrorf("%s was written under a different configuration (checkpoint -> now): %s",
			path, strings.Join(lines, "; "))
	}
	now := l.NetworkSHA256()
	for _, arch := range slices.Sorted(maps.Keys(m.NetworkSHA256)) {
		if was, is := m.NetworkSHA256[arch], now[arch]; is != "" && is != was {
			// the same file name (the config matched) with other contents: other parameters,
			// another initialisation, maybe another network
			return resumeErrorf("%s was written through %s as it was then; the file has changed since (sha256 %s -> %s): restore the file, or start a new run",
				path, arch, was, is)
		}
	}
	var diffs []string
	names := map[string]bool{}
	for k := range m.DataSHA256 {
		names[k] = true
	}
	for k := range ds.Files {
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
		b, okB := ds.Files[k]
		switch {
		case !okA:
			diffs = append(diffs, fmt.Sprintf("%s: not used by the checkpointed run", k))
		case !okB:
			diffs = append(diffs, fmt.Sprintf("%s: used by the checkpointed run (sha256 %s) but not now", k, a))
		case a != b:
			diffs = append(diffs, fmt.Sprintf("%s: sha256 %s -> %s", k, a, b))
		}
	}
	if n := m.WorldSize; n != 0 && n != l.WorldSize() {
		// A data-parallel run's arithmetic depends on its world size (each rank's shard of
		// the outer batch, the order of the sums): resuming with another would silently mix
		// two computations. (Checkpoints from before world_size was recorded have 0.)
		return resumeErrorf("%s was written by a run of %d process(es), this one has %d: resume it with %d (ldtorch distill --nproc %d, or torchrun with as many)",
			path, n, l.WorldSize(), n, n)
	}
	if digest := l.DataDigest(); len(diffs) == 0 && m.DataDigest != digest {
		diffs = append(diffs, fmt.Sprintf("the data trained on (splits and base examples) differ: digest %s -> %s", m.DataDigest, digest))
	}
	if len(diffs) > 0 {
		return resumeErrorf("%s was written with different data (checkpoint -> now): %s", path, strings.Join(diffs, "; "))
	}
	return nil
}
