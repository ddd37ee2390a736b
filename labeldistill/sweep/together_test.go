package sweep

// together_test.go: a sweep with Together distils a column's seeds in one computation;
// each cell's artifact is the one the sweep makes cell by cell, also after the together
// run was interrupted and resumed; cells of another shape or method run alone beside them.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/internal/testkit"
)

// seedsGrid: LD RR with three seeds (one shape: run together), LD RR at other base sizes
// (another shape: alone) and LD (another method: alone).
func seedsGrid(t *testing.T) *Grid {
	t.Helper()
	dataDir, _ := filepath.Abs(sharedDataDir(t))
	path := filepath.Join(t.TempDir(), "grid.json")
	text := `{
  "title": "seeds",
  "config": {"dataset": "mnist", "epochs": 2, "eval_models": 2, "baselines": [], "base_examples": 20, "inner_batch": 10,
             "outer_batch": 256, "target_set_size": 2048, "validation_size": 500, "reset_window": 3, "checkpoint_every": 4,
             "threads": 1, "data_dir": "` + dataDir + `"},
  "rows": [{"label": "LD RR", "set": {"method": "rr"}}, {"label": "LD", "set": {"method": "ld"}}],
  "columns": [{"label": "1", "set": {"seed": 1}}, {"label": "2", "set": {"seed": 2}}, {"label": "3", "set": {"seed": 3}},
              {"label": "10 base", "set": {"seed": 1, "base_examples": 10}}]
}`
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := ReadGrid(path)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestSweepTogetherIsCellByCell(t *testing.T) {
	testkit.RestoreThreads(t)
	g := seedsGrid(t)
	alone := t.TempDir()
	if err := Run(context.Background(), g, alone, Options{Rows: []string{"LD RR"}}); err != nil {
		t.Fatal(err)
	}

	// Together, interrupted at meta-step 6 of the first cell (the three seeds stepped as
	// one), then run again: it resumes the three together from their checkpoints.
	together := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var seen []string
	opts := Options{Rows: []string{"LD RR"}, Together: 3,
		Cell: func(c Cell, i, n int, st State) { seen = append(seen, c.Column+":"+string(st)) },
		Run: []labeldistill.RunOption{labeldistill.WithProgress(func(p labeldistill.Progress) {
			if p.Phase == "distill" && p.Step >= 6 {
				cancel()
			}
		})},
	}
	if err := Run(ctx, g, together, opts); !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted together sweep: %v", err)
	}
	want := []string{"1:new", "2:new", "3:new"}
	if !slices.Equal(seen, want) {
		t.Errorf("interrupted sweep told %v, want %v", seen, want)
	}
	for _, col := range []string{"1", "2", "3"} {
		if entries, _ := os.ReadDir(filepath.Join(together, "cells", "ld-rr__"+col, "checkpoints")); len(entries) == 0 {
			t.Errorf("cell %s left no checkpoint when interrupted", col)
		}
	}
	// A copy whose cell 2 lost its newest checkpoint (a sweep killed while writing them):
	// the three stand at different meta-steps and are resumed one by one.
	mixed := t.TempDir()
	if err := os.CopyFS(mixed, os.DirFS(together)); err != nil {
		t.Fatal(err)
	}
	ck := filepath.Join(mixed, "cells", "ld-rr__2", "checkpoints")
	entries, _ := os.ReadDir(ck)
	if len(entries) < 2 {
		t.Fatalf("cell 2 holds %d checkpoints, want two or more", len(entries))
	}
	os.RemoveAll(filepath.Join(ck, entries[len(entries)-1].Name()))
	os.Remove(filepath.Join(mixed, "cells", "ld-rr__2", ".ldtorch.lock"))
	seen = nil
	opts.Run = nil
	if err := Run(context.Background(), g, mixed, opts); err != nil {
		t.Fatal(err)
	}
	if want := []string{"1:resume", "2:resume", "3:resume", "1:finished", "2:finished", "3:finished", "10 base:new", "10 base:finished"}; !slices.Equal(seen, want) {
		t.Errorf("sweep of checkpoints at different steps told %v, want %v", seen, want)
	}
	seen = nil
	if err := Run(context.Background(), g, together, opts); err != nil {
		t.Fatal(err)
	}
	want = []string{"1:resume", "2:resume", "3:resume", "1:finished", "2:finished", "3:finished", "10 base:new", "10 base:finished"}
	if !slices.Equal(seen, want) {
		t.Errorf("resumed sweep told %v, want %v", seen, want)
	}
	for _, dir := range []string{together, mixed} {
		for _, id := range []string{"ld-rr__1", "ld-rr__2", "ld-rr__3", "ld-rr__10-base"} {
			a, err := artifact.Read(filepath.Join(alone, "cells", id))
			if err != nil {
				t.Fatal(err)
			}
			b, err := artifact.Read(filepath.Join(dir, "cells", id))
			if err != nil {
				t.Fatal(err)
			}
			if !testkit.SameBits(a.Labels, b.Labels) || !slices.Equal(a.Report.TestAccuracies, b.Report.TestAccuracies) || a.Report.T != b.Report.T {
				t.Errorf("%s cell %s: T %d test %v, cell by cell T %d test %v (labels the same bits: %v)", filepath.Base(dir), id,
					b.Report.T, b.Report.TestAccuracies, a.Report.T, a.Report.TestAccuracies, testkit.SameBits(a.Labels, b.Labels))
			}
		}
	}
	a1, _ := artifact.Read(filepath.Join(alone, "cells", "ld-rr__1"))
	a2, _ := artifact.Read(filepath.Join(alone, "cells", "ld-rr__2"))
	if testkit.SameBits(a1.Labels, a2.Labels) {
		t.Error("seeds 1 and 2 learnt the same labels: the comparison could not fail")
	}
}

// TestSweepTogetherLeavesOtherMethods: LD cells of a --together sweep run one by one.
func TestSweepTogetherLeavesOtherMethods(t *testing.T) {
	testkit.RestoreThreads(t)
	g := seedsGrid(t)
	dir := t.TempDir()
	var seen []string
	opts := Options{Rows: []string{"LD"}, Columns: []string{"1", "2"}, Together: 4,
		Cell: func(c Cell, i, n int, st State) { seen = append(seen, c.Column+":"+string(st)) }}
	if err := Run(context.Background(), g, dir, opts); err != nil {
		t.Fatal(err)
	}
	if want := []string{"1:new", "1:finished", "2:new", "2:finished"}; !slices.Equal(seen, want) {
		t.Errorf("told %v, want %v", seen, want)
	}
	if key, ok := labeldistill.CanDistillTogether(mustCell(t, g, dir, "ld__1").Config); ok {
		t.Errorf("an LD cell may be distilled together (key %q)", key)
	}
}

func mustCell(t *testing.T, g *Grid, dir, id string) Cell {
	t.Helper()
	cells, err := g.Cells(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cells {
		if c.ID == id {
			return c
		}
	}
	t.Fatalf("no cell %s (have %d)", id, len(cells))
	return Cell{}
}

// TestDistillTogetherRefusesSharedFolders: two runs that would write one checkpoint folder
// are refused before any work, naming the second run and the folder.
func TestDistillTogetherRefusesSharedFolders(t *testing.T) {
	g := seedsGrid(t)
	cells, err := g.Cells(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ck := filepath.Join(t.TempDir(), "checkpoints")
	rs := []config.Resolved{cells[0].Config, cells[1].Config}
	opts := [][]labeldistill.RunOption{{labeldistill.WithCheckpointDir(ck)}, {labeldistill.WithCheckpointDir(ck + "/")}}
	_, err = labeldistill.DistillTogether(context.Background(), rs, opts)
	var re *labeldistill.RunError
	if !errors.As(err, &re) || re.Index != 1 || !strings.Contains(err.Error(), ck) || !strings.Contains(err.Error(), "as run 1 does") {
		t.Errorf("two runs into one checkpoint folder: %v", err)
	}
	if _, err := os.Stat(ck); err == nil {
		t.Errorf("%s created by a refused call", ck)
	}
}
