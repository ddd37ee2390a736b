package artifact

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
)

// TestEvaluateResumes: an evaluation stopped while its second of four models trains keeps
// the first in its progress folder; the same evaluation run again trains only the other
// three and gives the uninterrupted accuracies bit for bit (that one trained its models
// together, these one at a time); the folder goes when it ends. Other settings, or a damaged
// record, train every model.
func TestEvaluateResumes(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, smallResult(t, config.MethodLD)); err != nil {
		t.Fatal(err)
	}
	art, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	test := &data.Split{N: 64, C: 1, H: 28, W: 28, Classes: 10, Images: make([]float32, 64*784), Labels: make([]int64, 64)}
	for i := range test.Images {
		test.Images[i] = float32((i*7)%13) / 13
	}
	for i := range test.Labels {
		test.Labels[i] = int64(i % 10)
	}
	ec := EvalConfig{Models: 4, Steps: 20}
	want, err := Evaluate(context.Background(), art, test, ec)
	if err != nil {
		t.Fatal(err)
	}

	evalDir := filepath.Join(dir, EvaluationsFolder)
	// run evaluates with progress kept, cancelling once the second model is under way when cut
	// is set, and returns the result, the notes and the work total it reported.
	run := func(t *testing.T, ec EvalConfig, cut bool) (*EvalResult, []string, int, error) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var notes []string
		total := 0
		ec.ProgressDir = evalDir
		ec.Notes = func(s string) { notes = append(notes, s) }
		ec.Progress = func(done, tot int) {
			total = max(total, tot)
			if cut && 8*done > 3*tot {
				cancel()
			}
		}
		res, err := Evaluate(ctx, art, test, ec)
		return res, notes, total, err
	}
	partial := func(t *testing.T) string {
		t.Helper()
		m, err := filepath.Glob(filepath.Join(evalDir, evalPartialPrefix+"*", progressStateFile))
		if err != nil || len(m) != 1 {
			t.Fatalf("progress records %v (%v), want one", m, err)
		}
		return m[0]
	}

	_, _, cutTotal, err := run(t, ec, true)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cut: got %v, want context.Canceled", err)
	}
	state := partial(t)
	kept, err := os.ReadFile(state)
	if err != nil {
		t.Fatal(err)
	}
	var st evalState
	if err := json.Unmarshal(kept, &st); err != nil || len(st.Accuracy) != 1 || st.Accuracy[0] == nil || *st.Accuracy[0] != want.Accuracies[0] {
		t.Fatalf("%s after the cut: %s (%v); want model 0's accuracy %v alone", state, kept, err, want.Accuracies[0])
	}

	t.Run("other settings", func(t *testing.T) {
		other := ec
		other.Seed = 99
		_, notes, total, err := run(t, other, false)
		if err != nil || total != cutTotal || slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, "resuming") }) {
			t.Fatalf("another seed: %v, total %d (want %d), notes %q", err, total, cutTotal, notes)
		}
		partial(t) // the cut evaluation's record is still there
	})

	t.Run("damaged record", func(t *testing.T) {
		if err := os.WriteFile(state, []byte(`{"key": {`), 0o644); err != nil {
			t.Fatal(err)
		}
		got, notes, total, err := run(t, ec, false)
		if err != nil || total != cutTotal || !slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, "is unreadable: its models are trained again") }) {
			t.Fatalf("damaged: %v, total %d (want %d), notes %q", err, total, cutTotal, notes)
		}
		if !sameAccuracies(got.Accuracies, want.Accuracies) {
			t.Fatalf("damaged record: accuracies %v, want %v", got.Accuracies, want.Accuracies)
		}
	})

	t.Run("resumed", func(t *testing.T) {
		if err := os.MkdirAll(filepath.Dir(state), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(state, kept, 0o644); err != nil {
			t.Fatal(err)
		}
		got, notes, total, err := run(t, ec, false)
		if err != nil {
			t.Fatal(err)
		}
		if !sameAccuracies(got.Accuracies, want.Accuracies) || got.Mean != want.Mean {
			t.Fatalf("resumed: accuracies %v, uninterrupted %v", got.Accuracies, want.Accuracies)
		}
		if total != cutTotal*3/4 || !slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, "resuming: 1 of the 4 models were scored") }) {
			t.Fatalf("resumed: work total %d, want %d (three models); notes %q", total, cutTotal*3/4, notes)
		}
		if _, err := os.Stat(filepath.Dir(state)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the finished evaluation's progress folder: %v, want it removed", err)
		}
	})
}

func sameAccuracies(a, b []float64) bool {
	return slices.EqualFunc(a, b, func(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) })
}
