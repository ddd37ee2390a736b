package labeldistill

// phases_test.go: a run cut among the phases after its meta-loop (the final test and the
// baselines) resumes without training the finished ones again, ends exactly like the
// uninterrupted run, and trains them again where their results cannot be trusted: another
// thread count, a damaged phases.json, test models to save.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/engine"
	"github.com/ldtorch/ldtorch/labeldistill/internal/testkit"
	"github.com/ldtorch/ldtorch/labeldistill/rundir"
)

// phaseRun is what a run's progress said about its phases.
type phaseRun struct {
	messages []string // "phase: message"
	trained  []string // the phases that trained models ("test", "baseline")
}

func (r *phaseRun) said(part string) bool {
	return slices.ContainsFunc(r.messages, func(m string) bool { return strings.Contains(m, part) })
}

// phaseProgress records progress into r and cancels the run when the baseline named cutAt
// starts ("" never).
func phaseProgress(r *phaseRun, cutAt string) (context.Context, RunOption) {
	ctx, cancel := context.WithCancel(context.Background())
	return ctx, WithProgress(func(p Progress) {
		if p.Message != "" {
			r.messages = append(r.messages, p.Phase+": "+p.Message)
		}
		if (p.Phase == "test" || p.Phase == "baseline") && p.Total > 0 && !slices.Contains(r.trained, p.Phase) {
			r.trained = append(r.trained, p.Phase)
		}
		if cutAt != "" && p.Phase == "baseline" && p.Message == cutAt {
			cancel()
		}
	})
}

func TestResumeReusesFinishedPhases(t *testing.T) {
	testkit.RestoreThreads(t)
	ds := testkit.SmallDataset(t)
	cfg := testkit.SmallConfig(config.MethodRR)
	cfg.Baselines = []string{config.BaselineTrue, config.BaselineSmooth}
	cfg.BaselineSteps = []int{10, 50, 100} // a short search: the phases are what is tested
	want, err := Distill(context.Background(), cfg, WithData(ds))
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Baselines) != 2 {
		t.Fatalf("baselines %v: want true_rr and smooth_rr", want.Baselines)
	}

	// The distillation cut as its smooth baseline starts (the test and the true-label
	// baseline finished), once; each case resumes a copy of its folder.
	cutDir := t.TempDir()
	var cr phaseRun
	ctx, progress := phaseProgress(&cr, config.BaselineSmooth)
	if _, err := Distill(ctx, cfg, WithData(ds), WithCheckpointDir(cutDir), progress); !errors.Is(err, context.Canceled) {
		t.Fatalf("cut at the smooth baseline: got %v, want context.Canceled", err)
	}
	s, err := rundir.ReadPhases(filepath.Join(cutDir, engine.PhasesFile))
	if err != nil {
		t.Fatal(err)
	}
	if s.Test == nil || len(s.Baselines) != 1 || !reflect.DeepEqual(s.Baselines["true_rr"].Result, want.Baselines["true_rr"]) {
		t.Fatalf("%s after the cut: test %v, baselines %v; want the test and true_rr", engine.PhasesFile, s.Test, s.Baselines)
	}
	cut := func(t *testing.T) string {
		dir := filepath.Join(t.TempDir(), "checkpoints")
		if err := os.CopyFS(dir, os.DirFS(cutDir)); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	resume := func(t *testing.T, c config.Config, dir string, opts ...RunOption) (*Result, *phaseRun) {
		var r phaseRun
		ctx, progress := phaseProgress(&r, "")
		got, err := Distill(ctx, c, append([]RunOption{WithData(ds), WithResume(dir), progress}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return got, &r
	}

	t.Run("reused", func(t *testing.T) {
		dir := cut(t)
		history := filepath.Join(t.TempDir(), rundir.HistoryFile)
		got, r := resume(t, cfg, dir, WithHistory(history))
		requireSameResult(t, "resumed among the phases", got, want)
		if !reflect.DeepEqual(got.Baselines, want.Baselines) {
			t.Fatalf("baselines %+v, uninterrupted %+v", got.Baselines, want.Baselines)
		}
		if !slices.Equal(r.trained, []string{"baseline"}) || !r.said("test models' accuracies are those finished before the resume") ||
			!r.said("true: the result finished before the resume") || r.said("smooth: the result finished") {
			t.Fatalf("trained %v, messages %q: want only the smooth baseline trained", r.trained, r.messages)
		}
		s, err := rundir.ReadPhases(filepath.Join(dir, engine.PhasesFile))
		if err != nil {
			t.Fatal(err)
		}
		if s.Test == nil || len(s.Baselines) != 2 {
			t.Fatalf("%s after the resume: test %v, baselines %v; want all three phases", engine.PhasesFile, s.Test, s.Baselines)
		}
		if got.WallSeconds < s.Test.Seconds+s.Baselines["true_rr"].Seconds {
			t.Fatalf("wall %.3f s: less than the reused phases' %.3f + %.3f s", got.WallSeconds, s.Test.Seconds, s.Baselines["true_rr"].Seconds)
		}
		var phaseLines []string
		for _, h := range readHistoryT(t, history) {
			if h.Kind == rundir.HistoryPhase {
				phaseLines = append(phaseLines, h.Name+" "+h.Baseline)
			}
		}
		if wantLines := []string{"test ", "baseline true_rr", "baseline smooth_rr"}; !slices.Equal(phaseLines, wantLines) {
			t.Fatalf("history's phase lines %q, want %q", phaseLines, wantLines)
		}
		// Resumed once more, the finished run trains nothing.
		again, r := resume(t, cfg, dir)
		requireSameResult(t, "resumed after the end", again, want)
		if len(r.trained) != 0 || !reflect.DeepEqual(again.Baselines, want.Baselines) {
			t.Fatalf("resumed after the end: trained %v, baselines %+v", r.trained, again.Baselines)
		}
	})

	t.Run("other threads", func(t *testing.T) {
		dir := cut(t)
		c := cfg
		c.Threads = 2
		_, r := resume(t, c, dir)
		if !slices.Equal(r.trained, []string{"test", "baseline"}) || !r.said("not used (the setting threads changed since)") {
			t.Fatalf("trained %v, messages %q: want every phase trained again, saying why", r.trained, r.messages)
		}
	})

	t.Run("extended", func(t *testing.T) {
		dir := cut(t)
		c := cfg
		c.Epochs++ // the run goes on past the final checkpoint: its phases are another run's
		_, r := resume(t, c, dir)
		if !slices.Equal(r.trained, []string{"test", "baseline"}) || r.said("finished before the resume") {
			t.Fatalf("trained %v, messages %q: want every phase trained again", r.trained, r.messages)
		}
	})

	t.Run("damaged file", func(t *testing.T) {
		dir := cut(t)
		if err := os.WriteFile(filepath.Join(dir, engine.PhasesFile), []byte(`{"format": "ldtorch phases 1", "test": {`), 0o644); err != nil {
			t.Fatal(err)
		}
		got, r := resume(t, cfg, dir)
		requireSameResult(t, "resumed past a damaged "+engine.PhasesFile, got, want)
		if !slices.Equal(r.trained, []string{"test", "baseline"}) || !r.said("warning: "+filepath.Join(dir, engine.PhasesFile)+" not used") {
			t.Fatalf("trained %v, messages %q: want every phase trained again, with a warning", r.trained, r.messages)
		}
	})

	t.Run("saving test models", func(t *testing.T) {
		dir := cut(t)
		models := t.TempDir()
		got, r := resume(t, cfg, dir, WithSaveModels(models))
		requireSameResult(t, "resumed saving models", got, want)
		if !slices.Equal(r.trained, []string{"test", "baseline"}) || !r.said("true: the result finished before the resume") {
			t.Fatalf("trained %v, messages %q: want the test trained (its models saved) and the true baseline reused", r.trained, r.messages)
		}
		if entries, err := os.ReadDir(models); err != nil || len(entries) == 0 {
			t.Fatalf("saved models: %v, %d files", err, len(entries))
		}
	})

	t.Run("fresh run clears an earlier run's", func(t *testing.T) {
		dir := cut(t)
		var r phaseRun
		ctx, progress := phaseProgress(&r, "")
		// Cancelled as soon as it starts: it must not leave the cut run's phases behind.
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := Distill(cctx, cfg, WithData(ds), WithCheckpointDir(dir), progress); !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v, want context.Canceled", err)
		}
		if _, err := os.Stat(filepath.Join(dir, engine.PhasesFile)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s after a fresh run in the folder: %v, want it removed", engine.PhasesFile, err)
		}
	})
}

// A run cut inside a phase (after some of its test models were scored, or after a
// baseline's step search) resumes after the last recorded model: only the rest trains, and
// the results are the uninterrupted run's bit for bit (which trained its models together,
// the cut run one at a time).
func TestResumeWithinAPhase(t *testing.T) {
	testkit.RestoreThreads(t)
	ds := testkit.SmallDataset(t)
	cfg := testkit.SmallConfig(config.MethodRR)
	cfg.EvalModels = 4
	cfg.Baselines = []string{config.BaselineTrue}
	cfg.BaselineSteps = []int{10, 50, 100}
	want, err := Distill(context.Background(), cfg, WithData(ds))
	if err != nil {
		t.Fatal(err)
	}

	// progress lists what a run said and the work totals of the test models it trained, and
	// cancels it once a quarter of the models named by cutIn ("test", "true: test models")
	// is done and the next one is under way.
	type seen struct {
		messages []string
		totals   map[string]int // by "phase: message": the largest Total reported
	}
	progress := func(s *seen, cutIn string) (context.Context, RunOption) {
		ctx, cancel := context.WithCancel(context.Background())
		s.totals = map[string]int{}
		return ctx, WithProgress(func(p Progress) {
			what := p.Phase + ": " + p.Message
			if p.Message != "" {
				s.messages = append(s.messages, what)
			}
			if p.Total > 0 {
				s.totals[what] = max(s.totals[what], p.Total)
				if (what == cutIn || (cutIn == "test" && p.Phase == "test")) && 4*p.Done > p.Total+p.Total/4 {
					cancel()
				}
			}
		})
	}
	said := func(s *seen, part string) bool {
		return slices.ContainsFunc(s.messages, func(m string) bool { return strings.Contains(m, part) })
	}

	for _, tc := range []struct {
		name, cutIn, phase string
	}{
		{"test", "test", "test"},
		{"baseline", "baseline: true: test models", "true_rr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var cut seen
			ctx, opt := progress(&cut, tc.cutIn)
			if _, err := Distill(ctx, cfg, WithData(ds), WithCheckpointDir(dir), opt); !errors.Is(err, context.Canceled) {
				t.Fatalf("cut in %s: got %v, want context.Canceled", tc.cutIn, err)
			}
			s, err := rundir.ReadPhases(filepath.Join(dir, engine.PhasesFile))
			if err != nil {
				t.Fatal(err)
			}
			u := s.Unfinished
			if u == nil || u.Phase != tc.phase || len(u.Accuracies) != 1 {
				t.Fatalf("%s after the cut: unfinished %+v; want %s with one model", engine.PhasesFile, u, tc.phase)
			}
			if tc.phase != "test" && (u.Steps != want.Baselines[tc.phase].Steps || !reflect.DeepEqual(u.ValidationErrors, want.Baselines[tc.phase].ValidationErrors)) {
				t.Fatalf("recorded step search %d %v, uninterrupted %d %v", u.Steps, u.ValidationErrors, want.Baselines[tc.phase].Steps, want.Baselines[tc.phase].ValidationErrors)
			}

			var r seen
			ctx, opt = progress(&r, "")
			got, err := Distill(ctx, cfg, WithData(ds), WithResume(dir), opt)
			if err != nil {
				t.Fatal(err)
			}
			requireSameResult(t, "resumed within "+tc.phase, got, want)
			if !reflect.DeepEqual(got.Baselines, want.Baselines) {
				t.Fatalf("baselines %+v, uninterrupted %+v", got.Baselines, want.Baselines)
			}
			// Three of the four models trained: three quarters of the cut run's total.
			models := "baseline: true: test models"
			if tc.phase == "test" {
				models = "test: "
			}
			if g, w := r.totals[models], cut.totals[models]*3/4; g != w {
				t.Fatalf("resumed: the %q work totals %d, want %d (three of the four models)", models, g, w)
			}
			if tc.phase == "test" {
				if !said(&r, "1 of the 4 test models were scored before the resume") {
					t.Fatalf("messages %q: want the test's recorded model named", r.messages)
				}
			} else if !said(&r, "true: its step search (") || !said(&r, "and 1 of the 4 test models finished before the resume") ||
				r.totals["baseline: true: step search"] != 0 {
				t.Fatalf("messages %q, totals %v: want the step search taken from the record, not run", r.messages, r.totals)
			}
			s, err = rundir.ReadPhases(filepath.Join(dir, engine.PhasesFile))
			if err != nil {
				t.Fatal(err)
			}
			if s.Unfinished != nil || s.Test == nil || len(s.Baselines) != 1 {
				t.Fatalf("%s after the resume: unfinished %+v, test %v, baselines %v", engine.PhasesFile, s.Unfinished, s.Test, s.Baselines)
			}
			if got.WallSeconds < u.Seconds {
				t.Fatalf("wall %.3f s: less than the cut phase's recorded %.3f s", got.WallSeconds, u.Seconds)
			}
		})
	}
}
