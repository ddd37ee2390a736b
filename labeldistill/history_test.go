package labeldistill

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/internal/testkit"
	"github.com/ldtorch/ldtorch/labeldistill/rundir"
)

// comparable strips what differs between an uninterrupted and a resumed run: timings
// and resume lines.
func comparableHistory(recs []rundir.HistoryRecord) []rundir.HistoryRecord {
	var out []rundir.HistoryRecord
	for _, r := range recs {
		if r.Kind == rundir.HistoryResume {
			continue
		}
		r.Seconds, r.Duration, r.DistillSeconds = 0, 0, 0
		out = append(out, r)
	}
	return out
}

func readHistoryT(t *testing.T, path string) []rundir.HistoryRecord {
	t.Helper()
	recs, err := rundir.ReadHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestHistoryMatchesRun: every meta-step has its line (steps 1..total, in order), the
// resets and T agree with the result, the validations are the result's, the test phase
// carries the test accuracy, and the gradient statistics cover whole windows.
func TestHistoryMatchesRun(t *testing.T) {
	testkit.RestoreThreads(t)
	ds := testkit.SmallDataset(t)
	cfg := testkit.SmallConfig(config.MethodRR)
	cfg.GradVarWindow = 4
	cfg.CheckpointEvery = -1
	cfg.Baselines = []string{config.BaselineTrue}
	path := filepath.Join(t.TempDir(), rundir.HistoryFile)
	res, err := Distill(context.Background(), cfg, WithData(ds), WithHistory(path))
	if err != nil {
		t.Fatal(err)
	}
	recs := readHistoryT(t, path)
	if len(recs) == 0 || recs[0].Kind != rundir.HistoryStart || recs[0].Schema != rundir.HistorySchema || recs[0].TotalSteps != res.MetaSteps ||
		recs[0].Method != config.MethodRR || recs[0].Version != Version {
		t.Fatalf("first line %+v, want the start line of a %d-step rr run", recs[0], res.MetaSteps)
	}
	var steps []rundir.HistoryRecord
	var vals []ValidationRecord
	var phases []rundir.HistoryRecord
	for _, r := range recs[1:] {
		switch r.Kind {
		case rundir.HistoryStep:
			steps = append(steps, r)
		case rundir.HistoryValidation:
			vals = append(vals, ValidationRecord{Epoch: r.Epoch, Step: r.Step, T: r.T, Accuracy: r.Accuracy})
		case rundir.HistoryPhase:
			phases = append(phases, r)
		default:
			t.Fatalf("unexpected line %+v", r)
		}
	}
	if len(steps) != res.MetaSteps {
		t.Fatalf("%d step lines for %d meta-steps", len(steps), res.MetaSteps)
	}
	for i, s := range steps {
		if s.Step != i+1 || s.Epoch != i/8+1 {
			t.Fatalf("line %d: step %d epoch %d, want %d, %d", i, s.Step, s.Epoch, i+1, i/8+1)
		}
		if !(s.GradNorm > 0) || math.IsInf(s.GradNorm, 0) || !(s.LabelLoss > 0) || s.Error < 0 || s.Error > 100 || s.T < 1 {
			t.Fatalf("step line %+v: implausible values", s)
		}
		if i > 0 && (s.Resets < steps[i-1].Resets || s.Seconds < steps[i-1].Seconds) {
			t.Fatalf("step %d: resets or seconds went down", s.Step)
		}
		if (s.Step%4 == 0) != (s.GradVar != nil) {
			t.Fatalf("step %d: grad_var %+v, want it exactly at the end of each 4-step window", s.Step, s.GradVar)
		}
		if s.GradVar != nil && (s.GradVar.Count != 4 || !(s.GradVar.Variance > 0) || s.GradVar.Relative <= 0 || s.GradVar.Relative > 1) {
			t.Fatalf("step %d: grad_var %+v", s.Step, s.GradVar)
		}
	}
	last := steps[len(steps)-1]
	if last.Resets != len(res.Resets) || len(res.Resets) == 0 {
		t.Fatalf("last line counts %d resets, the run %v", last.Resets, res.Resets)
	}
	if !reflect.DeepEqual(vals, res.Validations) {
		t.Fatalf("history validations %+v, result %+v", vals, res.Validations)
	}
	if len(phases) != 2 || phases[0].Name != "test" || phases[0].Mean != res.TestMean || phases[0].Std != res.TestStd ||
		phases[1].Name != "baseline" || phases[1].Baseline != "true_rr" || phases[1].Mean != res.Baselines["true_rr"].Mean ||
		phases[0].Duration <= 0 {
		t.Fatalf("phase lines %+v", phases)
	}

	// Every k steps: lines at multiples of k, plus the windows' ends.
	cfg.HistoryEvery, cfg.GradVarWindow, cfg.Baselines = 5, 12, []string{}
	if _, err := Distill(context.Background(), cfg, WithData(ds), WithHistory(path)); err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, r := range readHistoryT(t, path) {
		if r.Kind == rundir.HistoryStep {
			got = append(got, r.Step)
		}
	}
	if want := []int{5, 10, 12, 15, 20, 24}; !reflect.DeepEqual(got, want) {
		t.Fatalf("history_every 5, window 12: step lines %v, want %v", got, want)
	}
}

// TestHistoryAfterResume: runs interrupted (mid-epoch, and at an epoch's end with its
// validation pending), with lines of steps past the checkpoint and a partial line added as
// a killed process would leave them, then resumed, end with the uninterrupted run's
// history: no step missing, none twice.
func TestHistoryAfterResume(t *testing.T) {
	testkit.RestoreThreads(t)
	ds := testkit.SmallDataset(t)
	cfg := testkit.SmallConfig(config.MethodLD)
	cfg.GradVarWindow = 4
	dir := t.TempDir()
	wholePath := filepath.Join(dir, "whole.jsonl")
	if _, err := Distill(context.Background(), cfg, WithData(ds), WithHistory(wholePath)); err != nil {
		t.Fatal(err)
	}
	want := comparableHistory(readHistoryT(t, wholePath))
	for _, cut := range []int{12, 16} {
		out := filepath.Join(dir, "cut", string(rune('a'+cut)))
		path := filepath.Join(out, rundir.HistoryFile)
		if err := os.MkdirAll(out, 0o755); err != nil {
			t.Fatal(err)
		}
		ckpt := filepath.Join(out, "checkpoints")
		ctx, opt := cancelAt(cut, nil)
		_, err := Distill(ctx, cfg, WithData(ds), opt, WithCheckpointDir(ckpt), WithHistory(path))
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cut %d: %v", cut, err)
		}
		// What a kill after the checkpoint leaves: later steps' lines and half a line.
		extra, _ := json.Marshal(rundir.HistoryRecord{Kind: rundir.HistoryStep, Step: cut + 1, Epoch: 9})
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(append(extra, '\n'))
		f.Write([]byte(`{"kind":"step","st`))
		f.Close()
		if _, err := rundir.ReadHistory(path); err != nil {
			t.Fatalf("cut %d: a partial last line must read: %v", cut, err)
		}

		// Resumed into another output folder (once): the history so far comes along (it
		// used to start at the checkpoint, without the earlier steps).
		if cut == 12 {
			other := filepath.Join(out, "other")
			if _, err := Distill(context.Background(), cfg, WithData(ds), WithResume(ckpt),
				WithCheckpointDir(filepath.Join(other, "checkpoints")), WithHistory(filepath.Join(other, rundir.HistoryFile))); err != nil {
				t.Fatalf("cut %d: resume into another folder: %v", cut, err)
			}
			if got := comparableHistory(readHistoryT(t, filepath.Join(other, rundir.HistoryFile))); !reflect.DeepEqual(got, want) {
				t.Fatalf("cut %d: resumed into another folder: %d lines, uninterrupted %d", cut, len(got), len(want))
			}
		}

		// A damaged line in the middle is dropped with a warning naming it.
		b, _ := os.ReadFile(path)
		lines := strings.SplitAfter(string(b), "\n")
		lines = append(lines[:3], append([]string{"{garbage\n"}, lines[3:]...)...)
		os.WriteFile(path, []byte(strings.Join(lines, "")), 0o644)
		var msgs []string
		if _, err := Distill(context.Background(), cfg, WithData(ds), WithResume(ckpt), WithHistory(path),
			WithProgress(func(p Progress) { msgs = append(msgs, p.Message) })); err != nil {
			t.Fatalf("cut %d: resume: %v", cut, err)
		}
		if !slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, "line 4 is not a history line") }) {
			t.Errorf("cut %d: no warning about the damaged line 4 in %q", cut, msgs)
		}
		recs := readHistoryT(t, path)
		resumes := 0
		for _, r := range recs {
			if r.Kind == rundir.HistoryResume {
				resumes++
				if r.Step != cut {
					t.Fatalf("cut %d: resume line at step %d", cut, r.Step)
				}
			}
		}
		if resumes != 1 {
			t.Fatalf("cut %d: %d resume lines", cut, resumes)
		}
		if got := comparableHistory(recs); !reflect.DeepEqual(got, want) {
			for i := range min(len(got), len(want)) {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Fatalf("cut %d: line %d is %+v, uninterrupted %+v", cut, i, got[i], want[i])
				}
			}
			t.Fatalf("cut %d: %d lines, uninterrupted %d", cut, len(got), len(want))
		}
	}
}

// TestReadHistoryRefusesImplausible: values no run writes are refused naming the line and
// value (a percentage beyond 100 drew a panel of 39-digit tick labels); huge losses read.
func TestReadHistoryRefusesImplausible(t *testing.T) {
	dir := t.TempDir()
	start := `{"kind":"start","step":0,"schema":1}` + "\n"
	for name, tc := range map[string]struct{ line, want string }{
		"huge loss":     {`{"kind":"step","step":1,"label_loss":1e308,"error":50}`, ""},
		"error 1e38":    {`{"kind":"step","step":1,"label_loss":2,"error":1e38}`, "line 2: error 1e+38 is not a percentage"},
		"accuracy -1":   {`{"kind":"validation","step":1,"accuracy":-1}`, "line 2: accuracy -1 is not a percentage"},
		"negative loss": {`{"kind":"step","step":1,"label_loss":-3}`, "line 2: label_loss -3 is negative"},
		"beyond float":  {`{"kind":"step","step":1,"label_loss":1e999}`, `line 2: column 38: key "label_loss": 1e999 is out of range`},
		"Infinity":      {`{"kind":"step","step":1,"label_loss":Infinity}`, "line 2: column 38: invalid character 'I'"},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_"))
		os.WriteFile(path, []byte(start+tc.line+"\n"), 0o644)
		_, err := rundir.ReadHistory(path)
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "Go struct") {
			t.Errorf("%s: a Go type in %v", name, err)
		}
	}
}
