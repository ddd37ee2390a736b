package rundir

// history.go: the run history, OUT/metrics.jsonl, written as the run goes (WithHistory).
//
// Schema (HistorySchema = 1): one JSON object per line, told apart by "kind":
//
//	start       once, first: schema, ldtorch version, method, dataset, source, base_examples,
//	            seed, epochs, steps_per_epoch, total_steps, history_every, grad_var_window
//	step        every history_every meta-steps: step, epoch, label_loss (the target batch's
//	            CE), error (its top-1 error, %), moving_error (%, the reset window's mean;
//	            null until the window has filled), resets (so far), steps_T (T), grad_norm (‖∇_Ỹ L‖₂ of this step), seconds,
//	            distill_seconds, and at the end of each grad_var_window steps grad_var (see
//	            engine.GradVariance) over that window's steps
//	validation  after each validation: step, epoch, steps_T, accuracy (%), best (kept as
//	            the best labels so far), duration (s), seconds
//	resume      when a run continues from a checkpoint: step, seconds
//	phase       after the meta-loop: name ("test", then "baseline"), baseline (its key),
//	            mean, std (%), duration (s), seconds
//
// "seconds" is the wall time since the run started, the runs it resumes included. Lines
// are appended with one write each (a killed run leaves at most one partial last line) and
// synced before every checkpoint. On resume the file is cut back to the checkpoint: step
// lines up to its step, its validations, no phase lines, so the continued run adds each
// later line exactly once. The grad_var window in progress at a resume restarts there
// (its count says how many steps it covers).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/engine"
	"github.com/ldtorch/ldtorch/torch/fileio/atomicfile"
	"github.com/ldtorch/ldtorch/torch/fileio/boundedread"
)

// HistoryFile is the run history's name inside an output folder.
const HistoryFile = "metrics.jsonl"

// MaxHistoryBytes bounds a run history read back (resume, report): about three million
// meta-step lines, far more than the longest runs of the paper's settings write.
const MaxHistoryBytes = 1 << 30

// HistorySchema is the version of metrics.jsonl's schema.
const HistorySchema = 1

// History line kinds.
const (
	HistoryStart      = "start"
	HistoryStep       = "step"
	HistoryValidation = "validation"
	HistoryResume     = "resume"
	HistoryPhase      = "phase"
)

// HistoryRecord is one line of metrics.jsonl: the union of every kind's fields (a field a
// kind does not have reads as zero).
type HistoryRecord struct {
	Kind    string  `json:"kind"`
	Step    int     `json:"step"`
	Seconds float64 `json:"seconds"`

	// start
	Schema        int    `json:"schema,omitempty"`
	Version       string `json:"ldtorch_version,omitempty"`
	Method        string `json:"method,omitempty"`
	Dataset       string `json:"dataset,omitempty"`
	Source        string `json:"source,omitempty"`
	BaseExamples  int    `json:"base_examples,omitempty"`
	Seed          int64  `json:"seed,omitempty"`
	Epochs        int    `json:"epochs,omitempty"`
	StepsPerEpoch int    `json:"steps_per_epoch,omitempty"`
	TotalSteps    int    `json:"total_steps,omitempty"`
	HistoryEvery  int    `json:"history_every,omitempty"`
	GradVarWindow int    `json:"grad_var_window,omitempty"`

	// step (Epoch and T also validation)
	Epoch          int                  `json:"epoch,omitempty"`
	LabelLoss      float64              `json:"label_loss"`
	Error          float64              `json:"error"`
	MovingError    *float64             `json:"moving_error"` // null until the reset window has filled
	Resets         int                  `json:"resets"`
	T              int                  `json:"steps_T,omitempty"`
	GradNorm       float64              `json:"grad_norm"`
	DistillSeconds float64              `json:"distill_seconds"`
	GradVar        *engine.GradVariance `json:"grad_var,omitempty"`

	// validation
	Accuracy float64 `json:"accuracy"`
	Best     bool    `json:"best"`
	Duration float64 `json:"duration"`

	// phase
	Name     string  `json:"name,omitempty"`
	Baseline string  `json:"baseline,omitempty"`
	Mean     float64 `json:"mean"`
	Std      float64 `json:"std"`
}

// The lines as written: each kind with exactly its fields.
type (
	startLine struct {
		Kind          string  `json:"kind"`
		Step          int     `json:"step"`
		Seconds       float64 `json:"seconds"`
		Schema        int     `json:"schema"`
		Version       string  `json:"ldtorch_version"`
		Method        string  `json:"method"`
		Dataset       string  `json:"dataset"`
		Source        string  `json:"source"`
		BaseExamples  int     `json:"base_examples"`
		Seed          int64   `json:"seed"`
		Epochs        int     `json:"epochs"`
		StepsPerEpoch int     `json:"steps_per_epoch"`
		TotalSteps    int     `json:"total_steps"`
		HistoryEvery  int     `json:"history_every"`
		GradVarWindow int     `json:"grad_var_window"`
	}
	stepLine struct {
		Kind           string               `json:"kind"`
		Step           int                  `json:"step"`
		Epoch          int                  `json:"epoch"`
		LabelLoss      float64              `json:"label_loss"`
		Error          float64              `json:"error"`
		MovingError    *float64             `json:"moving_error"`
		Resets         int                  `json:"resets"`
		T              int                  `json:"steps_T"`
		GradNorm       float64              `json:"grad_norm"`
		Seconds        float64              `json:"seconds"`
		DistillSeconds float64              `json:"distill_seconds"`
		GradVar        *engine.GradVariance `json:"grad_var,omitempty"`
	}
	validationLine struct {
		Kind     string  `json:"kind"`
		Step     int     `json:"step"`
		Epoch    int     `json:"epoch"`
		T        int     `json:"steps_T"`
		Accuracy float64 `json:"accuracy"`
		Best     bool    `json:"best"`
		Duration float64 `json:"duration"`
		Seconds  float64 `json:"seconds"`
	}
	resumeLine struct {
		Kind    string  `json:"kind"`
		Step    int     `json:"step"`
		Seconds float64 `json:"seconds"`
	}
	phaseLine struct {
		Kind     string  `json:"kind"`
		Step     int     `json:"step"`
		Name     string  `json:"name"`
		Baseline string  `json:"baseline,omitempty"`
		Mean     float64 `json:"mean"`
		Std      float64 `json:"std"`
		Duration float64 `json:"duration"`
		Seconds  float64 `json:"seconds"`
	}
)

// history is the observer that writes the run history: a line per due meta-step (with
// the meta-gradient's norm and, at each window's end, its statistics), validation, resume
// and phase.
type history struct {
	cfg     config.Config
	f       *os.File
	path    string
	resumed bool
	// from is the history of the run resumed (beside its checkpoint folder), continued
	// when the resumed run writes its own history elsewhere (another --out).
	from  string
	stats GradStats // the meta-gradient statistics of the lines (nil: none)
}

// GradStats are the meta-gradient statistics of a history's step lines (gradvar.Window):
// its observer sees each meta-step's gradients; LastNorm is the latest one's L2 norm, and
// Variance the statistics of the gradients since its last call (a grad_var_window).
type GradStats interface {
	Observer() engine.Observer
	LastNorm() (float64, error)
	Variance() (engine.GradVariance, error)
}

func (h *history) observer() engine.Observer {
	return engine.Observer{
		Name:      "history",
		Start:     h.open,
		WantsRead: func(step int) bool { return h.due(step) },
		Read: func(l *engine.Loop, s engine.StepRecord) error {
			if !h.due(s.Step) {
				return nil
			}
			return h.stepLine(l, s)
		},
		Validated: func(l *engine.Loop, v engine.ValidationRecord, took time.Duration) error {
			return h.write(validationLine{Kind: HistoryValidation, Step: v.Step, Epoch: v.Epoch, T: v.T,
				Accuracy: v.Accuracy, Best: v == l.BestValidation(), Duration: took.Seconds(), Seconds: l.WallSeconds()})
		},
		Phase: func(l *engine.Loop, p engine.PhaseRecord) error {
			return h.write(phaseLine{Kind: HistoryPhase, Step: l.Position().Step, Name: p.Name, Baseline: p.Baseline, Mean: p.Mean,
				Std: p.Std, Duration: p.Took.Seconds(), Seconds: l.WallSeconds()})
		},
		Sync: h.sync,
		Close: func() {
			if h.f != nil {
				h.f.Close()
			}
		},
	}
}

// due reports whether meta-step step gets a history line (every HistoryEvery steps, and at
// the end of each GradVarWindow).
func (h *history) due(step int) bool {
	every, window := h.cfg.HistoryEvery, h.cfg.GradVarWindow
	return (every > 0 && step%every == 0) || (window > 0 && step%window == 0)
}

// open starts the history of a fresh run (truncating any file at path) or, when the run
// was resumed, cuts the file back to the loop's restored position.
func (h *history) open(l *engine.Loop) error {
	h.cfg = l.Config()
	var keep []byte
	if h.resumed {
		src := h.path
		if _, err := os.Lstat(h.path); errors.Is(err, os.ErrNotExist) && h.from != "" {
			src = h.from // resumed into another folder: its history so far comes along
		}
		old, err := boundedread.ReadRegularFile(src, MaxHistoryBytes, "run history")
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("history: %w", err)
		}
		var dropped []int
		keep, dropped = historyUpTo(l, old)
		if len(dropped) > 0 {
			l.Note(engine.Progress{Phase: "resume", Message: fmt.Sprintf("warning: %s: %s not a history line (damaged?) and dropped; the history misses what %s",
				src, linesWord(dropped), map[bool]string{true: "it held", false: "they held"}[len(dropped) == 1])})
		}
		if err := atomicfile.WriteFile(h.path, keep); err != nil {
			return fmt.Errorf("history: write %s: %w", h.path, err)
		}
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_APPEND
	if !h.resumed {
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(h.path, flags, 0o644)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	h.f = f
	if len(keep) == 0 {
		if err := h.write(newStartLine(l)); err != nil {
			return err
		}
	}
	if h.resumed {
		return h.write(resumeLine{Kind: HistoryResume, Step: l.Position().Step, Seconds: l.WallSeconds()})
	}
	return nil
}

func newStartLine(l *engine.Loop) startLine {
	perEpoch := l.StepsPerEpoch()
	c := l.Config()
	return startLine{Kind: HistoryStart, Schema: HistorySchema, Version: engine.Version, Method: c.Method, Dataset: c.Dataset,
		Source: c.Source, BaseExamples: c.BaseExamples, Seed: c.Seed, Epochs: c.Epochs, StepsPerEpoch: perEpoch,
		TotalSteps: perEpoch * c.Epochs, HistoryEvery: c.HistoryEvery, GradVarWindow: c.GradVarWindow}
}

// historyUpTo keeps the lines of an earlier history that describe the run up to its
// restored position: the start line, step and resume lines up to its step, and one line per
// restored validation (the file's own when present, else rebuilt from the checkpoint).
// Phase lines and a partial last line are dropped.
func historyUpTo(l *engine.Loop, old []byte) (kept []byte, dropped []int) {
	var out bytes.Buffer
	fileVal := map[[2]int][]byte{}
	lines := bytes.Split(old, []byte("\n"))
	// The last piece is "" after a final newline, else a line cut short by a kill.
	lines = lines[:len(lines)-1]
	var keptLines [][]byte
	for i, line := range lines {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var rec HistoryRecord
		if json.Unmarshal(line, &rec) != nil || rec.Kind == "" {
			dropped = append(dropped, i+1)
			continue
		}
		switch rec.Kind {
		case HistoryStart:
			if len(keptLines) == 0 {
				keptLines = append(keptLines, line)
			}
		case HistoryStep, HistoryResume:
			if rec.Step <= l.Position().Step {
				keptLines = append(keptLines, line)
			}
		case HistoryValidation:
			fileVal[[2]int{rec.Epoch, rec.Step}] = line
		}
	}
	// Validations go back between the step lines around them (validation at step s
	// follows step s's line).
	vi := 0
	emitValidationsBefore := func(step int) {
		for ; vi < len(l.Validations()) && l.Validations()[vi].Step < step; vi++ {
			v := l.Validations()[vi]
			line, ok := fileVal[[2]int{v.Epoch, v.Step}]
			if !ok {
				line, _ = json.Marshal(validationLine{Kind: HistoryValidation, Step: v.Step, Epoch: v.Epoch, T: v.T,
					Accuracy: v.Accuracy, Best: v == l.BestValidation()})
			}
			out.Write(line)
			out.WriteByte('\n')
		}
	}
	for _, line := range keptLines {
		var rec HistoryRecord
		_ = json.Unmarshal(line, &rec)
		if rec.Kind != HistoryStart {
			emitValidationsBefore(rec.Step)
		}
		out.Write(line)
		out.WriteByte('\n')
	}
	emitValidationsBefore(l.Position().Step + 1)
	return out.Bytes(), dropped
}

// linesWord names line numbers: "line 7 is", "lines 7, 9 are".
func linesWord(nums []int) string {
	if len(nums) == 1 {
		return fmt.Sprintf("line %d is", nums[0])
	}
	parts := make([]string, len(nums))
	for i, n := range nums {
		parts[i] = strconv.Itoa(n)
	}
	if len(parts) > 10 {
		parts = append(parts[:10], fmt.Sprintf("… (%d in all)", len(nums)))
	}
	return "lines " + strings.Join(parts, ", ") + " are"
}

// write appends one line with a single write.
func (h *history) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	if _, err := h.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("history %s: %w", h.path, err)
	}
	return nil
}

// sync makes the lines written so far durable (before each checkpoint).
func (h *history) sync() error {
	if h.f == nil {
		return nil
	}
	if err := h.f.Sync(); err != nil {
		return fmt.Errorf("history %s: %w", h.path, err)
	}
	return nil
}

// stepLine writes the line of meta-step s (due: every HistoryEvery steps; the statistics
// window's end adds grad_var). The label loss and error are what the meta-step read; the
// gradient norm and window statistics are read here, once per line (readDue made s the
// latest step, so the accumulator's last gradient is its).
func (h *history) stepLine(l *engine.Loop, s engine.StepRecord) error {
	window := h.cfg.GradVarWindow
	line := stepLine{Kind: HistoryStep, Step: s.Step, Epoch: s.Epoch, LabelLoss: s.Stats.LabelLoss, Error: s.Stats.Error,
		MovingError: finiteOrNil(l.Tracker().MovingError()), Resets: len(l.Tracker().Resets()), T: l.T(),
		Seconds: l.WallSeconds(), DistillSeconds: l.DistillSeconds()}
	if h.stats != nil {
		var err error
		if line.GradNorm, err = h.stats.LastNorm(); err != nil {
			return err
		}
		if window > 0 && s.Step%window == 0 {
			gv, err := h.stats.Variance()
			if err != nil {
				return err
			}
			line.GradVar = &gv
		}
	}
	return h.write(line)
}

func finiteOrNil(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// implausible says which value of the record no run writes ("" when none): a percentage
// outside 0…100, a negative loss, norm, variance, time or count. (JSON holds no NaN or
// infinity; finite values of any size are drawn.)
func (r HistoryRecord) implausible() string {
	pct := map[string]float64{"error": r.Error, "accuracy": r.Accuracy, "mean": r.Mean, "std": r.Std}
	if r.MovingError != nil {
		pct["moving_error"] = *r.MovingError
	}
	for _, k := range []string{"error", "moving_error", "accuracy", "mean", "std"} {
		if v, ok := pct[k]; ok && (v < 0 || v > 100) {
			return fmt.Sprintf("%s %g is not a percentage (0 to 100)", k, v)
		}
	}
	nonNeg := []struct {
		name string
		v    float64
	}{{"label_loss", r.LabelLoss}, {"grad_norm", r.GradNorm}, {"seconds", r.Seconds}, {"distill_seconds", r.DistillSeconds},
		{"duration", r.Duration}, {"step", float64(r.Step)}, {"epoch", float64(r.Epoch)}, {"resets", float64(r.Resets)}, {"steps_T", float64(r.T)}}
	if g := r.GradVar; g != nil {
		nonNeg = append(nonNeg, struct {
			name string
			v    float64
		}{"grad_var.variance", g.Variance}, struct {
			name string
			v    float64
		}{"grad_var.mean_square", g.MeanSquare}, struct {
			name string
			v    float64
		}{"grad_var.relative", g.Relative})
	}
	for _, x := range nonNeg {
		if x.v < 0 {
			return fmt.Sprintf("%s %g is negative", x.name, x.v)
		}
	}
	return ""
}

// ReadHistory parses a metrics.jsonl file. A partial last line (a run killed mid-write) is
// ignored; any other malformed line is an error naming it.
func ReadHistory(path string) ([]HistoryRecord, error) {
	data, err := boundedread.ReadRegularFile(path, MaxHistoryBytes, "run history")
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", path, pe.Err)
		}
		return nil, err
	}
	lines := strings.Split(string(data), "\n")
	var out []HistoryRecord
	for i, line := range lines {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var rec HistoryRecord
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			if i == len(lines)-1 { // no newline after it: cut short
				break
			}
			return nil, fmt.Errorf("%s: line %d: %v", path, i+1, strings.TrimPrefix(config.JSONError([]byte(line), err).Error(), "line 1, "))
		}
		if rec.Kind == "" {
			return nil, fmt.Errorf("%s: line %d has no \"kind\"", path, i+1)
		}
		if why := rec.implausible(); why != "" {
			return nil, fmt.Errorf("%s: line %d: %s (edited, or not written by ldtorch?)", path, i+1, why)
		}
		out = append(out, rec)
	}
	return out, nil
}
