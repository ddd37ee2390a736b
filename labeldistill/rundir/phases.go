package rundir

// phases.go: the phases after the meta-loop (the final test, then each baseline) survive a
// cut. They train many fresh models (a ConvNet-3 run on one core: 17 min of test models,
// 56 min of its true-label baseline), so a run stopped among them keeps the finished ones:
// when the run writes checkpoints, each finished phase's result is
// saved to <checkpoints>/phases.json, tied to the final checkpoint (its step and the time
// stamp in its meta); a resumed run whose newest checkpoint is that one, under the same
// settings and with no meta-step run since, takes those results from the file and trains
// only the phases not finished. The phase in progress is recorded as it goes (a baseline's
// step search; in a single-process CPU run each test model as it is scored), and a resume
// continues it after the last record.
// The results are those the uninterrupted run computes: the phases start from the kept
// values of the final checkpoint and draw their models from the run's seed.
//
// The file is not used (its phases are trained again) when the resume changes a setting
// other than where files are and how often they are written (threads and device change
// floating-point results), when the run resumed from another checkpoint or ran meta-steps
// after it (an extended run, or one resumed from an older checkpoint), or for the final test
// when the resumed run saves its test models (WithSaveModels), which the file does not
// hold. Only rank 0 writes it; every rank reads it on resume, so that all decide alike.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/engine"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch/fileio/atomicfile"
	"github.com/ldtorch/ldtorch/torch/fileio/boundedread"
)

const phasesFormat = "ldtorch phases 1"

// phasesFileMaxBytes bounds phases.json read back: a few baselines of at most thousands of
// models each.
const phasesFileMaxBytes = 64 << 20

// checkpointID names one checkpoint: its step and the time stamp written in its meta.
type checkpointID struct {
	Step    int    `json:"step"`
	Written string `json:"written"`
}

// unfinishedPhase is the phase in progress when the run was cut, with what it had finished:
// a baseline's step search, and the test models scored so far (models 0..len(Accuracies)-1).
type unfinishedPhase struct {
	Phase            string          `json:"phase"`                       // "test", or a baseline's key ("true_rr")
	Steps            int             `json:"steps,omitempty"`             // a baseline's searched step count (0: not searched)
	ValidationErrors map[int]float64 `json:"validation_errors,omitempty"` // that search's errors
	Accuracies       []*float64      `json:"accuracies,omitempty"`        // train.Nullable: null for a diverged model
	Seconds          float64         `json:"seconds"`                     // the phase's time up to the latest record
}

// PhasesState is phases.json.
type PhasesState struct {
	Format     string                             `json:"format"`
	Checkpoint checkpointID                       `json:"checkpoint"`
	Config     config.Config                      `json:"config"`
	DataDigest string                             `json:"data_digest"`
	WorldSize  int                                `json:"world_size"`
	Test       *engine.FinishedTest               `json:"test,omitempty"`
	Baselines  map[string]engine.FinishedBaseline `json:"baselines,omitempty"` // by key ("true_rr")
	Unfinished *unfinishedPhase                   `json:"unfinished,omitempty"`
}

// phases are the post-loop phases' results of one run: those taken from an earlier part
// (reused) and those it records (into dir; "" records nothing).
type phases struct {
	dir    string
	state  PhasesState
	reused PhasesState // what an earlier part finished; zero when nothing is reused
}

// changesRounding are the operational settings (config.IsOperational) that a resume may
// change but that change floating-point results: results computed under the old value are
// not reused. The other operational settings (where files are, how often they are written)
// leave the phases' results as they were.
var changesRounding = map[string]bool{"device": true, "threads": true, "allow_tf32": true}

// keepsResults reports whether a change of the setting named field leaves the phases'
// results as they were.
func keepsResults(field string) bool { return config.IsOperational(field) && !changesRounding[field] }

// newPhases sets up the phases of a run whose meta-loop ended at the checkpoint final
// (Written "": none written or loaded, then nothing is recorded). dir is the folder
// phases.json is written to (rank 0's checkpoint folder; "" for none); resumeDir, when the
// run resumed from final itself (no meta-step since), the folder it read it from, whose
// phases.json is reused where it matches. A phases.json that cannot be used is noted and
// trained past, never an error.
func newPhases(l *engine.Loop, dir, resumeDir string, final checkpointID) *phases {
	cfg := l.Config()
	if final.Written == "" || l.Position().Epoch != cfg.Epochs+1 || (dir == "" && resumeDir == "") {
		return &phases{} // no final checkpoint to tie results to, or nothing to record or reuse
	}
	// The data digest hashes every split: computed only when results are recorded or reused.
	key := PhasesState{Format: phasesFormat, Checkpoint: final, Config: cfg, DataDigest: l.DataDigest(), WorldSize: l.WorldSize()}
	p := &phases{dir: dir, state: key}
	if resumeDir == "" {
		return p
	}
	path := filepath.Join(resumeDir, engine.PhasesFile)
	earlier, err := ReadPhases(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return p
	case err != nil:
		l.Note(engine.Progress{Phase: "resume", Message: fmt.Sprintf("warning: %s not used, the phases after the meta-loop run again: %v", path, err)})
		return p
	}
	why := ""
	switch {
	case earlier.Checkpoint != final:
		why = fmt.Sprintf("it belongs to checkpoint step %d written %s, the run resumed from step %d written %s",
			earlier.Checkpoint.Step, earlier.Checkpoint.Written, final.Step, final.Written)
	case earlier.DataDigest != key.DataDigest:
		why = "it was computed on other data"
	case earlier.WorldSize != key.WorldSize:
		why = fmt.Sprintf("it was computed by %d process(es), this run has %d", earlier.WorldSize, key.WorldSize)
	default:
		for _, name := range config.Diff(earlier.Config, cfg) {
			if !keepsResults(name) {
				why = fmt.Sprintf("the setting %s changed since", name)
				break
			}
		}
	}
	if why != "" {
		l.Note(engine.Progress{Phase: "resume", Message: fmt.Sprintf("%s not used (%s): the phases after the meta-loop run again", path, why)})
		return p
	}
	p.reused = *earlier
	return p
}

// ReadPhases reads and checks a phases.json.
func ReadPhases(path string) (*PhasesState, error) {
	b, err := boundedread.ReadRegularFile(path, phasesFileMaxBytes, "finished phases file")
	if err != nil {
		return nil, err
	}
	var s PhasesState
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if s.Format != phasesFormat {
		return nil, fmt.Errorf("%s: format %q, want %q", path, s.Format, phasesFormat)
	}
	if t := s.Test; t != nil && len(t.Accuracies) == 0 {
		return nil, fmt.Errorf("%s: the test phase has no accuracies", path)
	}
	for k, b := range s.Baselines {
		if len(b.Result.Accuracies) == 0 {
			return nil, fmt.Errorf("%s: baseline %s has no accuracies", path, k)
		}
	}
	if u := s.Unfinished; u != nil {
		if u.Phase == "" || u.Steps < 0 || (u.Phase != "test" && u.Steps == 0) {
			return nil, fmt.Errorf("%s: the unfinished phase %q has no step search (steps %d)", path, u.Phase, u.Steps)
		}
		for i, a := range u.Accuracies {
			if a != nil && !(*a >= 0 && *a <= 100) {
				return nil, fmt.Errorf("%s: the unfinished phase %s: model %d's accuracy %v is not a percentage", path, u.Phase, i, *a)
			}
		}
	}
	return &s, nil
}

// save writes the results recorded so far (nothing when the run records none).
func (p *phases) save() error {
	if p.dir == "" {
		return nil
	}
	b, err := json.MarshalIndent(p.state, "", " ")
	if err != nil {
		return fmt.Errorf("%s: %w", engine.PhasesFile, err)
	}
	if err := atomicfile.WriteFile(filepath.Join(p.dir, engine.PhasesFile), append(b, '\n')); err != nil {
		return fmt.Errorf("saving the finished phases: %w", err)
	}
	return nil
}

// Test is the final test's result from an earlier part, or nil (engine.PhaseLog).
func (p *phases) Test() *engine.FinishedTest { return p.reused.Test }

// baseline is baseline key's result from an earlier part, or nil.
func (p *phases) Baseline(key string) *engine.FinishedBaseline {
	if b, ok := p.reused.Baselines[key]; ok {
		return &b
	}
	return nil
}

// testDone records the final test's result.
func (p *phases) TestDone(res *engine.Result, took time.Duration) error {
	p.state.Test = &engine.FinishedTest{Accuracies: slices.Clone(res.TestAccuracies), Mean: res.TestMean, Std: res.TestStd,
		Diverged: res.TestDiverged, Seconds: took.Seconds()}
	p.state.Unfinished = nil
	return p.save()
}

// baselineDone records baseline key's result.
func (p *phases) BaselineDone(key string, res engine.BaselineResult, took time.Duration) error {
	if p.state.Baselines == nil {
		p.state.Baselines = map[string]engine.FinishedBaseline{}
	}
	res.Accuracies = slices.Clone(res.Accuracies)
	res.ValidationErrors = maps.Clone(res.ValidationErrors)
	p.state.Baselines[key] = engine.FinishedBaseline{Result: res, Seconds: took.Seconds()}
	p.state.Unfinished = nil
	return p.save()
}

// phaseTraining is one phase being trained (the final test, or a baseline by its key), continued
// from what an earlier part of the run finished of it, and recorded as it goes.
type phaseTraining struct {
	l     *engine.Loop
	ph    *phases
	rec   unfinishedPhase // what is finished of the phase, the earlier part's included
	prior float64         // seconds the earlier part spent on it
	start time.Time
	// tracked: each test model is recorded as soon as it is scored (one process, the
	// models' bodies one after another: trained one at a time they give the same bits as
	// together, so a resume continues after the last recorded model).
	tracked bool
	warned  bool
}

// begin starts phase, continuing an earlier part's record of it when reuse is true (the
// final test does not when it saves its models: the record holds no models).
func (p *phases) Begin(l *engine.Loop, phase string, reuse bool) engine.PhaseRun {
	r := &phaseTraining{l: l, ph: p, rec: unfinishedPhase{Phase: phase}, start: time.Now(),
		tracked: p.dir != "" && p.state.WorldSize == 1 && train.Mode(l.Device()) == nets.BodyPerModel}
	if u := p.reused.Unfinished; reuse && u != nil && u.Phase == phase && len(u.Accuracies) <= l.Config().EvalModels {
		r.rec = *u
		r.rec.Accuracies = slices.Clone(u.Accuracies)
		r.rec.ValidationErrors = maps.Clone(u.ValidationErrors)
		r.prior = u.Seconds
		l.AddPriorWall(u.Seconds)
	}
	return r
}

// Took is the phase's time, the earlier part's included.
func (r *phaseTraining) Took() time.Duration {
	return time.Duration(r.prior*float64(time.Second)) + time.Since(r.start)
}

// Accuracies are the finished models' accuracies (NaN: diverged), in model order.
func (r *phaseTraining) Accuracies() []float64 { return train.FromNullable(r.rec.Accuracies) }

// Search is a baseline's finished step search (steps 0: none).
func (r *phaseTraining) Search() (int, map[int]float64) { return r.rec.Steps, r.rec.ValidationErrors }

// Tracked says each test model is recorded as soon as it is scored.
func (r *phaseTraining) Tracked() bool { return r.tracked }

// Searched records a baseline's step search.
func (r *phaseTraining) Searched(steps int, errs map[int]float64) {
	r.rec.Steps, r.rec.ValidationErrors = steps, maps.Clone(errs)
	r.record()
}

// Scored records test models scored in order after those recorded.
func (r *phaseTraining) Scored(accs []float64) {
	r.rec.Accuracies = append(r.rec.Accuracies, train.Nullable(accs)...)
	r.record()
}

// record saves the phase's progress; a failure is a warning, given once.
func (r *phaseTraining) record() {
	r.rec.Seconds = r.Took().Seconds()
	rec := r.rec
	r.ph.state.Unfinished = &rec
	if err := r.ph.save(); err != nil && !r.warned {
		r.warned = true
		phase := "baseline"
		if r.rec.Phase == "test" {
			phase = "test"
		}
		r.l.Note(engine.Progress{Phase: phase, Message: "warning: " + err.Error()})
	}
}

// removePhases deletes dir's phases.json, so that a fresh run's folder holds no results of
// an earlier run's.
func removePhases(dir string) error {
	err := os.Remove(filepath.Join(dir, engine.PhasesFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing an earlier run's %s: %w", engine.PhasesFile, err)
	}
	return nil
}
