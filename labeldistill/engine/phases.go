package engine

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
	"context"
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
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch/atomicfile"
	"github.com/ldtorch/ldtorch/torch/boundedread"
)

// PhasesFile is the name, inside a checkpoint folder, of the finished phases' results.
const PhasesFile = "phases.json"

const phasesFormat = "ldtorch phases 1"

// phasesFileMaxBytes bounds phases.json read back: a few baselines of at most thousands of
// models each.
const phasesFileMaxBytes = 64 << 20

// checkpointID names one checkpoint: its step and the time stamp written in its meta.
type checkpointID struct {
	Step    int    `json:"step"`
	Written string `json:"written"`
}

// finishedTest is the final test's outcome.
type finishedTest struct {
	Accuracies []float64 `json:"accuracies"`
	Mean       float64   `json:"mean"`
	Std        float64   `json:"std"`
	Diverged   int       `json:"diverged_models,omitempty"`
	Seconds    float64   `json:"seconds"`
}

// finishedBaseline is one baseline's outcome.
type finishedBaseline struct {
	Result  BaselineResult `json:"result"`
	Seconds float64        `json:"seconds"`
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

// phasesState is phases.json.
type phasesState struct {
	Format     string                      `json:"format"`
	Checkpoint checkpointID                `json:"checkpoint"`
	Config     config.Config               `json:"config"`
	DataDigest string                      `json:"data_digest"`
	WorldSize  int                         `json:"world_size"`
	Test       *finishedTest               `json:"test,omitempty"`
	Baselines  map[string]finishedBaseline `json:"baselines,omitempty"` // by key ("true_rr")
	Unfinished *unfinishedPhase            `json:"unfinished,omitempty"`
}

// phases are the post-loop phases' results of one run: those taken from an earlier part
// (reused) and those it records (into dir; "" records nothing).
type phases struct {
	dir    string
	state  phasesState
	reused phasesState // what an earlier part finished; zero when nothing is reused
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
func (l *Loop) newPhases(dir, resumeDir string, final checkpointID) *phases {
	in := l.in
	if final.Written == "" || l.pos.epoch != in.cfg.Epochs+1 || (dir == "" && resumeDir == "") {
		return &phases{} // no final checkpoint to tie results to, or nothing to record or reuse
	}
	// The data digest hashes every split: computed only when results are recorded or reused.
	key := phasesState{Format: phasesFormat, Checkpoint: final, Config: in.cfg, DataDigest: in.dataDigest(), WorldSize: l.par.size()}
	p := &phases{dir: dir, state: key}
	if resumeDir == "" {
		return p
	}
	path := filepath.Join(resumeDir, PhasesFile)
	earlier, err := readPhases(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return p
	case err != nil:
		l.note(Progress{Phase: "resume", Message: fmt.Sprintf("warning: %s not used, the phases after the meta-loop run again: %v", path, err)})
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
		for _, name := range config.Diff(earlier.Config, in.cfg) {
			if !keepsResults(name) {
				why = fmt.Sprintf("the setting %s changed since", name)
				break
			}
		}
	}
	if why != "" {
		l.note(Progress{Phase: "resume", Message: fmt.Sprintf("%s not used (%s): the phases after the meta-loop run again", path, why)})
		return p
	}
	p.reused = *earlier
	return p
}

// readPhases reads and checks a phases.json.
func readPhases(path string) (*phasesState, error) {
	b, err := boundedread.ReadRegularFile(path, phasesFileMaxBytes, "finished phases file")
	if err != nil {
		return nil, err
	}
	var s phasesState
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
		return fmt.Errorf("%s: %w", PhasesFile, err)
	}
	if err := atomicfile.WriteFile(filepath.Join(p.dir, PhasesFile), append(b, '\n')); err != nil {
		return fmt.Errorf("saving the finished phases: %w", err)
	}
	return nil
}

// test is the final test's result from an earlier part, or nil.
func (p *phases) test() *finishedTest { return p.reused.Test }

// baseline is baseline key's result from an earlier part, or nil.
func (p *phases) baseline(key string) *finishedBaseline {
	if b, ok := p.reused.Baselines[key]; ok {
		return &b
	}
	return nil
}

// testDone records the final test's result.
func (p *phases) testDone(res *Result, took time.Duration) error {
	p.state.Test = &finishedTest{Accuracies: slices.Clone(res.TestAccuracies), Mean: res.TestMean, Std: res.TestStd,
		Diverged: res.TestDiverged, Seconds: took.Seconds()}
	p.state.Unfinished = nil
	return p.save()
}

// baselineDone records baseline key's result.
func (p *phases) baselineDone(key string, res BaselineResult, took time.Duration) error {
	if p.state.Baselines == nil {
		p.state.Baselines = map[string]finishedBaseline{}
	}
	res.Accuracies = slices.Clone(res.Accuracies)
	res.ValidationErrors = maps.Clone(res.ValidationErrors)
	p.state.Baselines[key] = finishedBaseline{Result: res, Seconds: took.Seconds()}
	p.state.Unfinished = nil
	return p.save()
}

// phaseTraining is one phase being trained (the final test, or a baseline by its key), continued
// from what an earlier part of the run finished of it, and recorded as it goes.
type phaseTraining struct {
	l     *Loop
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
func (p *phases) begin(l *Loop, phase string, reuse bool, mode nets.BodyMode) *phaseTraining {
	r := &phaseTraining{l: l, ph: p, rec: unfinishedPhase{Phase: phase}, start: time.Now(),
		tracked: p.dir != "" && p.state.WorldSize == 1 && mode == nets.BodyPerModel}
	if u := p.reused.Unfinished; reuse && u != nil && u.Phase == phase && len(u.Accuracies) <= l.in.cfg.EvalModels {
		r.rec = *u
		r.rec.Accuracies = slices.Clone(u.Accuracies)
		r.rec.ValidationErrors = maps.Clone(u.ValidationErrors)
		r.prior = u.Seconds
		l.clock.priorWall += u.Seconds
	}
	return r
}

// took is the phase's time, the earlier part's included.
func (r *phaseTraining) took() time.Duration { return secondsDuration(r.prior) + time.Since(r.start) }

// accuracies are the finished models' accuracies (NaN: diverged), in model order.
func (r *phaseTraining) accuracies() []float64 { return train.FromNullable(r.rec.Accuracies) }

// searched records a baseline's step search.
func (r *phaseTraining) searched(steps int, errs map[int]float64) {
	r.rec.Steps, r.rec.ValidationErrors = steps, maps.Clone(errs)
	r.record()
}

// scored records test models scored in order after those recorded.
func (r *phaseTraining) scored(accs []float64) {
	r.rec.Accuracies = append(r.rec.Accuracies, train.Nullable(accs)...)
	r.record()
}

// record saves the phase's progress; a failure is a warning, given once.
func (r *phaseTraining) record() {
	r.rec.Seconds = r.took().Seconds()
	rec := r.rec
	r.ph.state.Unfinished = &rec
	if err := r.ph.save(); err != nil && !r.warned {
		r.warned = true
		phase := "baseline"
		if r.rec.Phase == "test" {
			phase = "test"
		}
		r.l.note(Progress{Phase: phase, Message: "warning: " + err.Error()})
	}
}

// removePhases deletes dir's phases.json, so that a fresh run's folder holds no results of
// an earlier run's.
func removePhases(dir string) error {
	err := os.Remove(filepath.Join(dir, PhasesFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing an earlier run's %s: %w", PhasesFile, err)
	}
	return nil
}

// testModels trains and scores the phase's M test models with tr for steps each (model i
// from Seed(seed, purpose, i)) and returns their accuracies (NaN: diverged), in model
// order: those r holds from an earlier part, then the rest, each recorded as it is scored
// when r is tracked. In a data-parallel run each rank trains its share (nothing is held or
// recorded there).
func (l *Loop) testModels(ctx context.Context, tr *train.Trainer, steps int, purpose string, r *phaseTraining) ([]float64, error) {
	in := l.in
	mode := train.Mode(in.dev)
	if l.par.size() > 1 {
		return l.par.evaluateSplit(func(lo, hi int) ([]float64, error) {
			return tr.TestRange(ctx, steps, lo, hi, in.seed, purpose, in.test.x, in.test.y, mode)
		}, in.cfg.EvalModels)
	}
	if r.tracked {
		tr.Together = 1
		tr.Scored = func(_ int, accs []float64) error {
			r.scored(accs)
			return nil
		}
		defer func() { tr.Scored = nil }()
	}
	done := r.accuracies()
	rest, err := tr.TestRange(ctx, steps, len(done), in.cfg.EvalModels, in.seed, purpose, in.test.x, in.test.y, mode)
	if err != nil {
		return nil, err
	}
	return append(done, rest...), nil
}
