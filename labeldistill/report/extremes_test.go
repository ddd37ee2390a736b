package report

// extremes_test.go: the figures of a run's history stay bounded in time and memory for any
// value a history line can hold, finite or not: the largest and smallest float64s, the
// smallest denormal, NaN and both infinities in every numeric field, on one line or on
// every line, and the extreme integers in the integer fields.

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/engine"
	"github.com/ldtorch/ldtorch/labeldistill/rundir"
)

// extremeHistory is a short plausible history: a start line, steps 1..6 (with gradient
// windows from step 3), two validations, resets at step 4, a resume line, the test phase.
func extremeHistory() []rundir.HistoryRecord {
	recs := []rundir.HistoryRecord{{Kind: rundir.HistoryStart, Step: 0, Schema: 1, Method: "rr", Dataset: "mnist", Source: "mnist",
		BaseExamples: 20, Seed: 1, Epochs: 2, StepsPerEpoch: 3, TotalSteps: 6, HistoryEvery: 1, GradVarWindow: 2}}
	for s := 1; s <= 6; s++ {
		me := 90 - float64(s)
		r := rundir.HistoryRecord{Kind: rundir.HistoryStep, Step: s, Epoch: (s-1)/3 + 1, LabelLoss: 2.3 - 0.1*float64(s), Error: 91 - float64(s),
			MovingError: &me, Resets: s / 4, T: s, GradNorm: 1e-4 * float64(s), Seconds: float64(s), DistillSeconds: 0.1 * float64(s)}
		if s >= 3 {
			r.GradVar = &engine.GradVariance{Count: 2, Variance: 1e-9 * float64(s), MeanSquare: 2e-9 * float64(s), Relative: 0.5}
		}
		recs = append(recs, r)
		if s%3 == 0 {
			recs = append(recs, rundir.HistoryRecord{Kind: rundir.HistoryValidation, Step: s, Epoch: s / 3, T: s, Accuracy: 10 + float64(s), Best: true, Duration: 0.2, Seconds: float64(s)})
		}
		if s == 4 {
			recs = append(recs, rundir.HistoryRecord{Kind: rundir.HistoryResume, Step: s, Seconds: float64(s)})
		}
	}
	return append(recs, rundir.HistoryRecord{Kind: rundir.HistoryPhase, Step: 6, Name: "test", Mean: 12, Std: 1, Duration: 0.3, Seconds: 7})
}

// floatFields set each float field of a record (those of its kind and the others alike).
var floatFields = map[string]func(*rundir.HistoryRecord, float64){
	"seconds":          func(r *rundir.HistoryRecord, v float64) { r.Seconds = v },
	"label_loss":       func(r *rundir.HistoryRecord, v float64) { r.LabelLoss = v },
	"error":            func(r *rundir.HistoryRecord, v float64) { r.Error = v },
	"moving_error":     func(r *rundir.HistoryRecord, v float64) { r.MovingError = &v },
	"grad_norm":        func(r *rundir.HistoryRecord, v float64) { r.GradNorm = v },
	"distill_seconds":  func(r *rundir.HistoryRecord, v float64) { r.DistillSeconds = v },
	"accuracy":         func(r *rundir.HistoryRecord, v float64) { r.Accuracy = v },
	"duration":         func(r *rundir.HistoryRecord, v float64) { r.Duration = v },
	"mean":             func(r *rundir.HistoryRecord, v float64) { r.Mean = v },
	"std":              func(r *rundir.HistoryRecord, v float64) { r.Std = v },
	"grad_var.var":     func(r *rundir.HistoryRecord, v float64) { withGradVar(r).Variance = v },
	"grad_var.meansq":  func(r *rundir.HistoryRecord, v float64) { withGradVar(r).MeanSquare = v },
	"grad_var.rel":     func(r *rundir.HistoryRecord, v float64) { withGradVar(r).Relative = v },
	"grad_var.count":   func(r *rundir.HistoryRecord, v float64) { withGradVar(r).Count = clampInt(v) },
	"step":             func(r *rundir.HistoryRecord, v float64) { r.Step = clampInt(v) },
	"epoch":            func(r *rundir.HistoryRecord, v float64) { r.Epoch = clampInt(v) },
	"resets":           func(r *rundir.HistoryRecord, v float64) { r.Resets = clampInt(v) },
	"steps_T":          func(r *rundir.HistoryRecord, v float64) { r.T = clampInt(v) },
	"grad_var_window":  func(r *rundir.HistoryRecord, v float64) { r.GradVarWindow = clampInt(v) },
	"total_steps":      func(r *rundir.HistoryRecord, v float64) { r.TotalSteps = clampInt(v) },
	"steps_per_epoch":  func(r *rundir.HistoryRecord, v float64) { r.StepsPerEpoch = clampInt(v) },
	"base_examples":    func(r *rundir.HistoryRecord, v float64) { r.BaseExamples = clampInt(v) },
	"history_every":    func(r *rundir.HistoryRecord, v float64) { r.HistoryEvery = clampInt(v) },
	"epochs":           func(r *rundir.HistoryRecord, v float64) { r.Epochs = clampInt(v) },
	"grad_var(absent)": func(r *rundir.HistoryRecord, v float64) { r.GradVar = nil },
}

func withGradVar(r *rundir.HistoryRecord) *engine.GradVariance {
	if r.GradVar == nil {
		r.GradVar = &engine.GradVariance{Count: 2}
	}
	return r.GradVar
}

// clampInt is v as an int field can hold it: the extreme integers for the extreme floats,
// 0 for NaN, the nearest integer otherwise.
func clampInt(v float64) int {
	switch {
	case math.IsNaN(v):
		return 0
	case v >= math.MaxInt64:
		return math.MaxInt
	case v <= math.MinInt64:
		return math.MinInt
	}
	return int(math.Round(v))
}

var extremeValues = []float64{1e308, -1e308, math.MaxFloat64, 5e-324, math.NaN(), math.Inf(1), math.Inf(-1)}

// drawBounded draws the history's two figures and fails the test when they take longer
// than limit or allocate more than maxAlloc bytes between them.
func drawBounded(t *testing.T, what string, recs []rundir.HistoryRecord) {
	t.Helper()
	const limit, maxAlloc = 20 * time.Second, 512 << 20
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := learningCurvesFigure(recs, []int{4}, "labels")
		if err == nil {
			_, err = gradVarianceFigure(recs, nil)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
	case <-time.After(limit):
		t.Fatalf("%s: the figures still drawing after %v", what, limit)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if a := after.TotalAlloc - before.TotalAlloc; a > maxAlloc {
		t.Errorf("%s: the figures allocated %d MiB", what, a>>20)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("%s: the figures took %v", what, d)
	}
}

// TestFiguresBoundedForAnyHistoryValue: every numeric field of every line, or of one step
// line, holding one extreme value (TestFiguresBoundedForEachField, in the long suite, sets
// each field alone).
func TestFiguresBoundedForAnyHistoryValue(t *testing.T) {
	for _, v := range extremeValues {
		every := extremeHistory()
		for i := range every {
			setAll(&every[i], v)
		}
		drawBounded(t, fmt.Sprintf("every field %g on every line", v), every)
		one := extremeHistory()
		setAll(&one[3], v)
		drawBounded(t, fmt.Sprintf("every field %g on one line", v), one)
	}
}

// setAll sets every numeric field of r to v.
func setAll(r *rundir.HistoryRecord, v float64) {
	for name, set := range floatFields {
		if name != "grad_var(absent)" {
			set(r, v)
		}
	}
}

// TestHistoryFileExtremes: the values written as text into metrics.jsonl (what an edited
// or damaged file holds, JSON's NaN and infinities among them) are refused by the reader
// naming the line, or drawn within the bounds.
func TestHistoryFileExtremes(t *testing.T) {
	fields := []string{"label_loss", "error", "moving_error", "grad_norm", "seconds", "distill_seconds", "steps_T", "resets", "step", "epoch"}
	texts := []string{"1e308", "-1e308", "5e-324", "NaN", "Infinity", "-Infinity", "1e999", "-1e999"}
	dir := t.TempDir()
	for _, f := range fields {
		for _, v := range texts {
			var b strings.Builder
			b.WriteString(`{"kind":"start","step":0,"seconds":0,"schema":1,"ldtorch_version":"0.1.0","method":"rr","dataset":"mnist","source":"mnist","base_examples":20,"seed":1,"epochs":1,"steps_per_epoch":3,"total_steps":3,"history_every":1,"grad_var_window":2}` + "\n")
			for s := 1; s <= 3; s++ {
				line := map[string]string{"label_loss": "2.3", "error": "90", "moving_error": "90", "grad_norm": "0.0001", "seconds": fmt.Sprint(s),
					"distill_seconds": "0.1", "steps_T": fmt.Sprint(s), "resets": "0", "step": fmt.Sprint(s), "epoch": "1"}
				line[f] = v
				fmt.Fprintf(&b, `{"kind":"step","step":%s,"epoch":%s,"label_loss":%s,"error":%s,"moving_error":%s,"resets":%s,"steps_T":%s,"grad_norm":%s,"seconds":%s,"distill_seconds":%s}`+"\n",
					line["step"], line["epoch"], line["label_loss"], line["error"], line["moving_error"], line["resets"], line["steps_T"], line["grad_norm"], line["seconds"], line["distill_seconds"])
			}
			path := filepath.Join(dir, "metrics.jsonl")
			if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			recs, err := rundir.ReadHistory(path)
			if err != nil {
				if !strings.Contains(err.Error(), "line ") {
					t.Errorf("%s %s: refused without naming the line: %v", f, v, err)
				}
				continue
			}
			drawBounded(t, fmt.Sprintf("%s %s in the file", f, v), recs)
		}
	}
}
