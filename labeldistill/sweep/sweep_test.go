package sweep

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/labeldistill/selectbase"
	"github.com/ldtorch/ldtorch/torch/fileio/atomicfile"
)

func tinyGrid(t *testing.T) (*Grid, string) {
	t.Helper()
	dataDir, _ := filepath.Abs(sharedDataDir(t))
	path := filepath.Join(t.TempDir(), "grid.json")
	text := `{
  "title": "tiny table",
  "config": {"dataset": "mnist", "epochs": 2, "eval_models": 2, "baselines": ["true"], "baseline_steps": [5, 10],
             "baseline_max_steps": 10, "target_set_size": 2048, "validation_size": 500, "threads": 1, "data_dir": "` + dataDir + `"},
  "rows": [{"label": "LD RR", "set": {"method": "rr"}}],
  "columns": {"key": "base_examples", "values": [10, 20]},
  "paper": {"LD RR": {"10": "64.57 ± 2.67"}}
}`
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := ReadGrid(path)
	if err != nil {
		t.Fatal(err)
	}
	return g, t.TempDir()
}

// A sweep interrupted in its second cell, run again, skips the first and resumes the second.
func TestSweepResumesOnlyMissingCells(t *testing.T) {
	g, dir := tinyGrid(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var seen []string
	current := ""
	opts := Options{
		Cell: func(c Cell, i, n int, st State) {
			current = c.Column
			seen = append(seen, c.Column+":"+string(st))
		},
		Run: []labeldistill.RunOption{labeldistill.WithProgress(func(p labeldistill.Progress) {
			if current == "20" && p.Phase == "distill" && p.Step >= 1 {
				cancel()
			}
		})},
	}
	if err := Run(ctx, g, dir, opts); err == nil || ctx.Err() == nil {
		t.Fatalf("interrupted sweep: err %v", err)
	}
	if strings.Join(seen, " ") != "10:new 10:finished 20:new" {
		t.Fatalf("first pass: %v", seen)
	}
	// The summary after the interruption holds the finished cell only.
	md, _ := os.ReadFile(filepath.Join(dir, SummaryMD))
	if !strings.Contains(string(md), "1 of 2 cells finished") {
		t.Errorf("summary after interruption:\n%s", md)
	}
	seen, current = nil, ""
	if err := Run(context.Background(), g, dir, opts); err != nil {
		t.Fatal(err)
	}
	if strings.Join(seen, " ") != "10:done 20:resume 20:finished" {
		t.Fatalf("second pass: %v, want the first cell skipped and the second resumed", seen)
	}
	f, err := os.Open(filepath.Join(dir, SummaryCSV))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	// header + (LD RR, Baseline RR) × 2 columns
	if len(recs) != 5 || recs[1][0] != "LD RR" || recs[1][1] != "10" || recs[1][5] != "2" || recs[1][17] != "64.57 ± 2.67" {
		t.Errorf("summary.csv: %v", recs)
	}
	md, _ = os.ReadFile(filepath.Join(dir, SummaryMD))
	for _, want := range []string{"| | 10 | 20 |", "| LD RR (paper) | 64.57 ± 2.67 |", "| Baseline RR |", "2 of 2 cells finished"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("summary.md lacks %q:\n%s", want, md)
		}
	}
	// A cell finished by an earlier version, whose report lacks settings added since
	// (base_seed, learn), is the same cell, not a changed grid.
	report := filepath.Join(dir, CellsFolder, "ld-rr__10", artifact.ReportFile)
	dropRecordedSettings(t, report, "base_seed", "learn")
	seen = nil
	if err := Run(context.Background(), g, dir, opts); err != nil {
		t.Fatalf("sweep over a cell an earlier version finished: %v", err)
	}
	if strings.Join(seen, " ") != "10:done 20:done" {
		t.Errorf("third pass: %v, want both cells done", seen)
	}
	// A changed grid under the same folder is refused, naming the setting.
	g.Config = []byte(strings.Replace(string(g.Config), `"epochs": 2`, `"epochs": 3`, 1))
	if err := Run(context.Background(), g, dir, Options{}); err == nil || !strings.Contains(err.Error(), "epochs") {
		t.Errorf("changed grid: got %v", err)
	}
}

func TestGridErrors(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"unknown key": `{"config": {"epoch": 3}, "rows": [{"label": "a", "set": {}}], "columns": {"key": "seed", "values": [1]}}`,
		"dup label":   `{"rows": [{"label": "a", "set": {}}, {"label": "a", "set": {}}], "columns": {"key": "seed", "values": [1]}}`,
		"bad value":   `{"rows": [{"label": "a", "set": {"method": "xx"}}], "columns": {"key": "seed", "values": [1]}}`,
		"no columns":  `{"rows": [{"label": "a", "set": {}}]}`,
	} {
		p := filepath.Join(dir, "g.json")
		os.WriteFile(p, []byte(text), 0o644)
		if _, err := ReadGrid(p); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// A grid names its cells' base examples by a base_file template relative to the grid's
// folder: a cell whose file exists distils exactly those examples and records the file; one
// whose file is missing cannot run, and says how to make it.
func TestGridBaseFile(t *testing.T) {
	dataDir, _ := filepath.Abs(sharedDataDir(t))
	gdir := t.TempDir()
	path := filepath.Join(gdir, "grid.json")
	text := `{
  "config": {"dataset": "mnist", "method": "rr", "epochs": 1, "eval_models": 1, "baselines": [], "target_set_size": 500,
             "validation_size": 500, "threads": 1, "data_dir": "` + dataDir + `"},
  "base_file": "sel/mnist-{base_examples}-{base_seed}.txt",
  "rows": [{"label": "LD RR", "set": {}}],
  "columns": {"key": "base_examples", "values": [10, 20]}
}`
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := ReadGrid(path)
	if err != nil {
		t.Fatal(err)
	}
	cells, err := g.Cells(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want10 := filepath.Join(gdir, "sel", "mnist-10-1234.txt")
	if cells[0].BaseFilePath != want10 || cells[0].BaseFileErr == nil {
		t.Fatalf("cell 10: base file %q, %v", cells[0].BaseFilePath, cells[0].BaseFileErr)
	}
	// Make the 10-example file (kmeans, as select-base would), not the 20-example one.
	cfg := cells[0].Config.Config
	sel, err := selectbase.Select(context.Background(), cfg, selectbase.Options{Strategy: selectbase.KMeans})
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Dir(want10), 0o755)
	if err := sel.Write(want10); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if cells, err = g.Cells(dir, nil); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cells[0].Config.BaseIndices, sel.Indices) || cells[0].BaseFile == nil {
		t.Fatalf("cell 10 does not distil the file's examples: %v", cells[0].Config.BaseIndices)
	}
	if st, err := CellState(cells[1]); err != nil || st != CellNeedsBase {
		t.Fatalf("cell 20 without its file: %v %v", st, err)
	}
	if err := Run(context.Background(), g, dir, Options{Columns: []string{"20"}}); err == nil || !strings.Contains(err.Error(), "select-base") {
		t.Fatalf("running the cell without its file: %v", err)
	}
	if err := Run(context.Background(), g, dir, Options{Columns: []string{"10"}}); err != nil {
		t.Fatal(err)
	}
	// The folder keeps the grid with its base files named absolute, and running the grid
	// again (from another folder than the grid's: the test's) finds the cell finished.
	if b, err := os.ReadFile(filepath.Join(dir, GridFile)); err != nil || !strings.Contains(string(b), filepath.Join(gdir, "sel", "mnist-{base_examples}-{base_seed}.txt")) {
		t.Fatalf("the folder's grid.json does not name the base file absolute: %v\n%s", err, b)
	}
	if err := Run(context.Background(), g, dir, Options{Columns: []string{"10"}}); err != nil {
		t.Fatalf("running the grid again: %v", err)
	}
	// The same grid beside other base files (another folder) changes cell 10: refused.
	gdir2 := t.TempDir()
	os.MkdirAll(filepath.Join(gdir2, "sel"), 0o755)
	other := slices.Clone(sel.Indices)
	other[0], other[1] = other[1], other[0]
	var lines []string
	for _, i := range other {
		lines = append(lines, strconv.FormatInt(i, 10))
	}
	os.WriteFile(filepath.Join(gdir2, "sel", "mnist-10-1234.txt"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	os.WriteFile(filepath.Join(gdir2, "grid.json"), []byte(text), 0o644)
	g2, err := ReadGrid(filepath.Join(gdir2, "grid.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := Run(context.Background(), g2, dir, Options{Columns: []string{"10"}}); err == nil || !strings.Contains(err.Error(), "base_indices") {
		t.Fatalf("a grid naming other base examples for a finished cell: %v", err)
	}
	// A base file of the earlier run that cannot be read any more is named.
	os.Remove(want10)
	if err := Run(context.Background(), g2, dir, Options{Columns: []string{"10"}}); err == nil || !strings.Contains(err.Error(), want10) {
		t.Fatalf("the earlier run's base file gone: %v", err)
	}
	a, err := artifact.Read(cells[0].Config.Out)
	if err != nil {
		t.Fatal(err)
	}
	if o := a.Report.BaseOrigin; o == nil || o.Strategy != "kmeans" || o.File != want10 || o.FileSHA256 != sel.IndexFileSHA256 || !slices.Equal(a.BaseIndices, sel.Indices) {
		t.Fatalf("cell 10's record: %+v", a.Report.BaseOrigin)
	}
	recs := readCSV(t, filepath.Join(dir, SummaryCSV))
	if len(recs) != 2 || recs[1][len(recs[1])-1] != "kmeans" {
		t.Fatalf("summary.csv: %v", recs)
	}
	// An unknown placeholder is an error of the grid.
	os.WriteFile(path, []byte(strings.Replace(text, "{base_seed}", "{strategy}", 1)), 0o644)
	if _, err := ReadGrid(path); err == nil || !strings.Contains(err.Error(), "placeholder") {
		t.Fatalf("unknown placeholder: %v", err)
	}
}

func readCSV(t *testing.T, path string) [][]string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestSweepOfLearntImages: rows that learn images (learn images, method dd) run as cells
// like any other and are named as their runs are, their baselines as the paper's.
func TestSweepOfLearntImages(t *testing.T) {
	dataDir, _ := filepath.Abs(sharedDataDir(t))
	path := filepath.Join(t.TempDir(), "grid.json")
	text := `{
  "config": {"dataset": "mnist", "epochs": 2, "eval_models": 1, "baselines": ["true"], "baseline_steps": [5, 10],
             "baseline_max_steps": 10, "target_set_size": 2048, "validation_size": 500, "threads": 1, "data_dir": "` + dataDir + `"},
  "rows": [{"label": "Our DD", "set": {"learn": "images"}}, {"label": "DD", "set": {"method": "dd", "dd_steps": 1, "dd_epochs": 2}}],
  "columns": {"key": "base_examples", "values": [10]}
}`
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	g, err := ReadGrid(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := Run(context.Background(), g, dir, Options{}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, SummaryCSV))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, r := range recs[1:] {
		labels = append(labels, r[2]+"/"+r[7])
	}
	if got := strings.Join(labels, " "); got != "Our DD/ld Baseline/ld DD/dd Baseline/dd" {
		t.Errorf("summary.csv rows: %s", got)
	}
}

// A cell whose lock another process holds (another sweep of the folder) is left to it; the
// others run; once free, a rerun runs it.
func TestSweepLeavesABusyCell(t *testing.T) {
	g, dir := tinyGrid(t)
	cell := filepath.Join(dir, CellsFolder, "ld-rr__10")
	if err := os.MkdirAll(cell, 0o755); err != nil {
		t.Fatal(err)
	}
	// LockDir's flock belongs to its open file: a second open in this process is refused
	// like another process's.
	unlock := lockCell(t, cell)
	if got, err := runStates(g, dir); err != nil || got != "10:busy 20:new 20:finished" {
		t.Fatalf("with cell 10 held: %s, %v", got, err)
	}
	unlock()
	if got, err := runStates(g, dir); err != nil || got != "10:new 10:finished 20:done" {
		t.Fatalf("after its release: %s, %v", got, err)
	}
}

// A cell whose artifact is half written (distilled.npz, no report.json yet) while another
// process holds its lock is being finished there: other sweeps of the folder and their
// summaries take it for not finished, where without the lock it is a damaged cell.
func TestSweepReadsAHalfWrittenCellAsBusy(t *testing.T) {
	if _, err := os.Stat("/proc/locks"); err != nil {
		t.Skip("no /proc/locks (the lock is seen there):", err)
	}
	g, dir := tinyGrid(t)
	if err := Run(context.Background(), g, dir, Options{}); err != nil {
		t.Fatal(err)
	}
	cell := filepath.Join(dir, CellsFolder, "ld-rr__10")
	if err := os.Remove(filepath.Join(cell, artifact.ReportFile)); err != nil {
		t.Fatal(err)
	}
	unlock := lockCell(t, cell)
	if got, err := runStates(g, dir); err != nil || got != "10:busy 20:done" {
		t.Fatalf("with the half-written cell held: %s, %v", got, err)
	}
	md, err := os.ReadFile(filepath.Join(dir, SummaryMD))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "1 of 2 cells finished") {
		t.Fatalf("summary with the half-written cell held:\n%s", md)
	}
	unlock()
	if _, err := runStates(g, dir); err == nil || !strings.Contains(err.Error(), "no "+artifact.ReportFile) {
		t.Fatalf("the half-written cell, released: %v", err)
	}
}

// A cell whose writer finishes its artifact between another sweep's reading of the
// half-written files and that sweep's look at the lock is done, not damaged: the reading
// that counts is the one made once the lock is free (the case of `sweep --jobs 2` reading
// the cell its sibling job is just finishing).
func TestSweepReadsACellFinishedMeanwhileAsDone(t *testing.T) {
	g, dir := tinyGrid(t)
	if err := Run(context.Background(), g, dir, Options{}); err != nil {
		t.Fatal(err)
	}
	cell := filepath.Join(dir, CellsFolder, "ld-rr__10")
	report := filepath.Join(cell, artifact.ReportFile)
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(report); err != nil {
		t.Fatal(err)
	}
	// The writer puts report.json in place and releases the lock just before it is looked at.
	looked := 0
	lockHeldBy = func(d string) (string, bool) {
		if d == cell {
			looked++
			if err := os.WriteFile(report, b, 0o644); err != nil {
				t.Error(err)
			}
		}
		return atomicfile.HeldBy(d)
	}
	defer func() { lockHeldBy = atomicfile.HeldBy }()
	if got, err := runStates(g, dir); err != nil || got != "10:done 20:done" {
		t.Fatalf("with the cell finished meanwhile: %s, %v", got, err)
	}
	if looked == 0 {
		t.Fatal("the lock of the half-written cell was never looked at")
	}
}

// lockCell takes a cell folder's lock as a sweep running it does.
func lockCell(t *testing.T, cell string) (unlock func()) {
	t.Helper()
	unlock, err := atomicfile.LockDir(cell)
	if err != nil {
		t.Fatal(err)
	}
	return unlock
}

// runStates runs the grid into dir and returns the states its Cell callback saw, as
// "column:state" in order.
func runStates(g *Grid, dir string) (string, error) {
	var seen []string
	err := Run(context.Background(), g, dir, Options{Cell: func(c Cell, i, n int, st State) {
		seen = append(seen, c.Column+":"+string(st))
	}})
	return strings.Join(seen, " "), err
}

// dropRecordedSettings removes the named keys from the config a report.json records, as
// an earlier version that lacked them wrote it.
func dropRecordedSettings(t *testing.T, path string, keys ...string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep map[string]json.RawMessage
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(rep["config"], &cfg); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if _, ok := cfg[k]; !ok {
			t.Fatalf("%s records no %s", path, k)
		}
		delete(cfg, k)
	}
	if rep["config"], err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if b, err = json.Marshal(rep); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// A finished cell scored under the benchmark protocol shows in the summary: a section of
// summary.md with its accuracies and scores, and summary-ddranking.csv; the other cell is
// "–". An evaluation of other labels than the cell's is not shown.
func TestSummaryShowsDDRankingEvaluations(t *testing.T) {
	g, dir := tinyGrid(t)
	if err := Run(context.Background(), g, dir, Options{Columns: []string{"10"}}); err != nil {
		t.Fatal(err)
	}
	cell := filepath.Join(dir, CellsFolder, "ld-rr__10")
	art, err := artifact.Read(cell)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := artifact.EvalDataConfig(art, "")
	if err != nil {
		t.Fatal(err)
	}
	d, err := labeldistill.LoadData(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := artifact.EvaluateDDRanking(context.Background(), art, d, artifact.DDRankingConfig{Arch: "lenet", Epochs: 1, Models: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteSummary(g, dir); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, SummaryMD))
	f4 := func(v float64) string { return strconv.FormatFloat(v, 'f', 4, 64) }
	for _, want := range []string{
		"## The benchmark protocol (DD-Ranking's soft-label evaluation)",
		"of 1 of 1 finished cells (lenet, 1 epochs, 2 runs, augmentation dsa)",
		"| LD RR: distilled labels | " + f4(r.SoftLabel.Mean) + " ± " + f4(r.SoftLabel.Std) + " | – |",
		"| LD RR: hard labels, same images | " + f4(r.HardLabel.Mean) + " ± " + f4(r.HardLabel.Std) + " | – |",
		"| LD RR: random images, teacher's labels | " + f4(r.RandomSoftLabel.Mean) + " ± " + f4(r.RandomSoftLabel.Std) + " | – |",
		"| LD RR: hlr / ior / score | " + f4(r.HLR) + " / " + f4(r.IOR) + " / " + f4(r.Score) + " | – |",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("summary.md lacks %q:\n%s", want, md)
		}
	}
	rows := readCSV(t, filepath.Join(dir, SummaryDDRankingCSV))
	if len(rows) != 2 || rows[1][0] != "LD RR" || rows[1][1] != "10" || rows[1][2] != "lenet" || rows[1][6] != "dsa" ||
		rows[1][7] != f4(r.FullData.Accuracy) || rows[1][18] != f4(r.Score) || rows[1][21] != filepath.Join(CellsFolder, "ld-rr__10") {
		t.Errorf("%s: %q", SummaryDDRankingCSV, rows)
	}

	// The evaluation of other labels (its recorded SHA-256 not the cell's) is left out.
	path := filepath.Join(cell, artifact.EvaluationsFolder, artifact.DDRankingFile)
	r.DistilledSHA256 = strings.Repeat("0", 64)
	b, _ := json.Marshal(r)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteSummary(g, dir); err != nil {
		t.Fatal(err)
	}
	if md, _ := os.ReadFile(filepath.Join(dir, SummaryMD)); strings.Contains(string(md), "benchmark protocol") {
		t.Errorf("an evaluation of other labels is shown:\n%s", md)
	}
	if _, err := os.Stat(filepath.Join(dir, SummaryDDRankingCSV)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s of no evaluation is left: %v", SummaryDDRankingCSV, err)
	}
}
