package sweep

// sweep.go: a grid of distillations laid out like a paper table (rows × columns of config
// settings over a common config), run cell by cell into one folder, resumable as a whole,
// and summarised as summary.csv and summary.md.

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/torch/atomicfile"
	"github.com/ldtorch/ldtorch/torch/boundedread"
)

// Sweep file names inside a sweep folder.
const (
	GridFile    = "grid.json"
	SummaryCSV  = "summary.csv"
	SummaryMD   = "summary.md"
	CellsFolder = "cells"
)

// Grid is a sweep's grid file (JSON):
//
//	{
//	  "title":   "Table 1, MNIST: test accuracy (%)",
//	  "config":  {"dataset": "mnist", "baselines": ["true", "smooth"]},
//	  "rows":    [{"label": "LD", "set": {"method": "ld"}}, {"label": "LD RR", "set": {"method": "rr"}}],
//	  "columns": {"key": "base_examples", "values": [10, 20, 50, 100, 200, 500]},
//	  "paper":   {"LD": {"10": "60.89 ± 3.20"}, "Baseline": {"10": "48.35 ± 3.03"}}
//	}
//
// A cell's config is config.Default, then "config", then its row's "set", then its
// column's "set" (keys are Config's json names, as in a --config file). Rows and columns
// are each a list of {"label", "set"} or the shorthand {"key", "values"} (labels are the
// values). "paper" holds the published numbers by printed row label and column label;
// summary.md shows them in a "(paper)" row under each row.
//
// "base_file" (on the grid, a row or a column; a column's wins over its row's, a row's over
// the grid's) names an index file of base examples, as `distill --base-indices` takes it
// (one written by `ldtorch select-base`): the cell distils exactly those examples and
// records the file. In its name {base_examples}, {base_seed}, {seed} and {dataset} stand
// for the cell's settings; a relative name is relative to the grid file's folder.
type Grid struct {
	Title    string                       `json:"title"`
	Config   json.RawMessage              `json:"config"`
	BaseFile string                       `json:"base_file,omitempty"`
	Rows     GridAxis                     `json:"rows"`
	Columns  GridAxis                     `json:"columns"`
	Paper    map[string]map[string]string `json:"paper,omitempty"`
	Notes    string                       `json:"notes,omitempty"`
	dir      string                       // the grid file's folder (ReadGrid)
}

// GridEntry is one row or column: its label, the config keys it sets and, optionally, its
// cells' base-example file.
type GridEntry struct {
	Label    string          `json:"label"`
	Set      json.RawMessage `json:"set"`
	BaseFile string          `json:"base_file,omitempty"`
}

// GridAxis is a grid's rows or columns.
type GridAxis []GridEntry

// UnmarshalJSON accepts a list of entries or {"key": K, "values": [...]}.
func (a *GridAxis) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		var entries []GridEntry
		if err := strictUnmarshal(b, &entries); err != nil {
			var typ *json.UnmarshalTypeError
			if errors.As(err, &typ) && typ.Field == "" {
				return errors.New("want a list of {\"label\", \"set\"} objects")
			}
			return err
		}
		*a = entries
		return nil
	}
	var short struct {
		Key    string            `json:"key"`
		Values []json.RawMessage `json:"values"`
	}
	if len(b) == 0 || b[0] != '{' {
		return errors.New("want a list of {\"label\", \"set\"} or an object {\"key\", \"values\"}")
	}
	if err := strictUnmarshal(b, &short); err != nil {
		return err
	}
	if short.Key == "" || len(short.Values) == 0 {
		return errors.New("{\"key\", \"values\"} needs a key and at least one value")
	}
	for _, v := range short.Values {
		label := strings.Trim(string(v), `"`)
		set, _ := json.Marshal(map[string]json.RawMessage{short.Key: v})
		*a = append(*a, GridEntry{Label: label, Set: set})
	}
	return nil
}

func strictUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// Cell is one distillation of a grid.
type Cell struct {
	Row, Column string        // labels
	ID          string        // folder name under cells/
	Config      config.Config // resolved, Out = the cell's folder
	// BaseFile is the index file the cell's base_indices were read from (nil: none named).
	// BaseFileErr says why a named file could not be read (the cell cannot run until it
	// can); BaseFilePath is its path.
	BaseFile     *labeldistill.BaseFile
	BaseFilePath string
	BaseFileErr  error
}

// ReadGrid reads and checks a grid file: labels unique and non-empty, every cell's config
// valid, at most config.MaxGridCells cells. The file is read through config.MaxFileBytes
// (an endless stream given as the file is an error naming it and the bound); JSON errors
// give their line and column.
func ReadGrid(path string) (*Grid, error) { return ReadGridContext(context.Background(), path) }

// ReadGridContext is ReadGrid that gives up when ctx ends while a named pipe given as the
// file waits for its writer.
func ReadGridContext(ctx context.Context, path string) (*Grid, error) {
	b, err := boundedread.ReadFileContext(ctx, path, config.MaxFileBytes, "grid file")
	if err != nil {
		return nil, err
	}
	g, err := parseGrid(b, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return g, nil
}

// ParseGrid reads and checks a grid from JSON (see ReadGrid); relative base_file paths are
// taken from the current folder.
func ParseGrid(b []byte) (*Grid, error) { return parseGrid(b, "") }

// parseGrid is ParseGrid with relative base_file paths taken from dir.
func parseGrid(b []byte, dir string) (*Grid, error) {
	// The top level first (an object of known keys, nothing after it), with line and
	// column for syntax errors, then each part, named.
	var top struct {
		Title    string                       `json:"title"`
		Config   json.RawMessage              `json:"config"`
		BaseFile string                       `json:"base_file,omitempty"`
		Rows     json.RawMessage              `json:"rows"`
		Columns  json.RawMessage              `json:"columns"`
		Paper    map[string]map[string]string `json:"paper,omitempty"`
		Notes    string                       `json:"notes,omitempty"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&top); err != nil {
		return nil, config.JSONError(b, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("text after the JSON object")
	}
	g := &Grid{Title: top.Title, Config: top.Config, BaseFile: top.BaseFile, Paper: top.Paper, Notes: top.Notes, dir: dir}
	for _, axis := range []struct {
		name string
		raw  json.RawMessage
		dst  *GridAxis
	}{{"rows", top.Rows, &g.Rows}, {"columns", top.Columns, &g.Columns}} {
		if len(bytes.TrimSpace(axis.raw)) == 0 || string(bytes.TrimSpace(axis.raw)) == "null" {
			return nil, fmt.Errorf("needs %q: a list of {\"label\", \"set\"} or {\"key\", \"values\"}", axis.name)
		}
		if err := axis.dst.UnmarshalJSON(axis.raw); err != nil {
			return nil, fmt.Errorf("%s: %w", axis.name, config.JSONError(axis.raw, err))
		}
		if len(*axis.dst) == 0 {
			return nil, fmt.Errorf("%s: needs at least one entry", axis.name)
		}
	}
	if n := len(g.Rows) * len(g.Columns); n > config.MaxGridCells {
		return nil, fmt.Errorf("%d rows × %d columns: the cells %s", len(g.Rows), len(g.Columns),
			config.CountMessage(int64(n), 1, config.MaxGridCells, "each cell is a whole distillation"))
	}
	if _, err := g.Cells("", nil); err != nil {
		return nil, err
	}
	return g, nil
}

// maxFolderName is the longest file name Linux file systems take (NAME_MAX, in bytes).
const maxFolderName = 255

// Cells returns the grid's cells in row-major order, each config resolved with Out inside
// dir/cells; adjust (may be nil) is applied to every config before resolving (operational
// settings: threads, device, data dir).
func (g *Grid) Cells(dir string, adjust func(*config.Config)) ([]Cell, error) {
	base := config.Default()
	if len(g.Config) > 0 {
		var err error
		if base, err = overlayConfig(base, g.Config); err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
	}
	var cells []Cell
	ids := map[string]string{}
	for _, axis := range []struct {
		name    string
		entries GridAxis
	}{{"rows", g.Rows}, {"columns", g.Columns}} {
		seen := map[string]bool{}
		for _, e := range axis.entries {
			if e.Label == "" || seen[e.Label] {
				return nil, fmt.Errorf("%s: labels must be non-empty and unique, got %q", axis.name, e.Label)
			}
			seen[e.Label] = true
		}
	}
	for _, r := range g.Rows {
		rowCfg, err := overlayConfig(base, r.Set)
		if err != nil {
			return nil, fmt.Errorf("row %q: %w", r.Label, err)
		}
		for _, c := range g.Columns {
			cfg, err := overlayConfig(rowCfg, c.Set)
			if err != nil {
				return nil, fmt.Errorf("column %q: %w", c.Label, err)
			}
			cell := Cell{Row: r.Label, Column: c.Label}
			if cell.BaseFilePath, err = g.baseFilePath(r, c, cfg); err != nil {
				return nil, fmt.Errorf("cell %q/%q: %w", r.Label, c.Label, err)
			}
			if cell.BaseFilePath != "" {
				if cell.BaseFile, cell.BaseFileErr = labeldistill.ReadBaseFile(cell.BaseFilePath); cell.BaseFileErr == nil {
					cfg.BaseIndices = cell.BaseFile.Indices
				}
			}
			id := slug(r.Label) + "__" + slug(c.Label)
			if len(id) > maxFolderName {
				return nil, fmt.Errorf("cell %q/%q: its folder name %s… is %d bytes long, more than the %d a file name may have: shorten the labels",
					short(r.Label), short(c.Label), id[:40], len(id), maxFolderName)
			}
			if other, dup := ids[id]; dup {
				return nil, fmt.Errorf("cells %s and %q/%q have the same folder name %s", other, r.Label, c.Label, id)
			}
			ids[id] = fmt.Sprintf("%q/%q", r.Label, c.Label)
			cfg.Out = filepath.Join(dir, CellsFolder, id)
			if adjust != nil {
				adjust(&cfg)
			}
			if cfg, err = cfg.Resolved(); err != nil {
				return nil, fmt.Errorf("cell %q/%q: %w", r.Label, c.Label, err)
			}
			cell.ID, cell.Config = id, cfg
			cells = append(cells, cell)
		}
	}
	return cells, nil
}

// baseFilePath is the base_file of the cell of row r and column c (config cfg), with its
// placeholders filled and relative to the grid's folder; "" when none is named.
func (g *Grid) baseFilePath(r, c GridEntry, cfg config.Config) (string, error) {
	name := g.BaseFile
	for _, e := range []GridEntry{r, c} {
		if e.BaseFile != "" {
			name = e.BaseFile
		}
	}
	if name == "" {
		return "", nil
	}
	name = strings.NewReplacer("{base_examples}", strconv.Itoa(cfg.BaseExamples), "{base_seed}", strconv.FormatInt(cfg.BaseSelectionSeed(), 10),
		"{seed}", strconv.FormatInt(cfg.Seed, 10), "{dataset}", cfg.Dataset).Replace(name)
	if strings.ContainsAny(name, "{}") {
		return "", fmt.Errorf("base_file %q: unknown placeholder (known: {base_examples}, {base_seed}, {seed}, {dataset})", name)
	}
	if !filepath.IsAbs(name) && g.dir != "" {
		name = filepath.Join(g.dir, name)
	}
	return name, nil
}

// overlayConfig decodes a JSON object of config keys over c, with the checks of a config
// file (unknown or duplicate keys, wrong types).
func overlayConfig(c config.Config, set json.RawMessage) (config.Config, error) {
	if len(bytes.TrimSpace(set)) == 0 || string(bytes.TrimSpace(set)) == "null" {
		return c, nil
	}
	if _, err := config.Parse(set); err != nil { // key and type checks only
		return c, err
	}
	out := c
	// Slices must not alias the outer config's.
	out.NormMean, out.NormStd = slices.Clone(c.NormMean), slices.Clone(c.NormStd)
	out.Baselines, out.BaselineSteps, out.BaseIndices = slices.Clone(c.Baselines), slices.Clone(c.BaselineSteps), slices.Clone(c.BaseIndices)
	if c.BaseSeed != nil {
		seed := *c.BaseSeed
		out.BaseSeed = &seed
	}
	if err := json.Unmarshal(set, &out); err != nil {
		return c, err
	}
	return out, nil
}

// short cuts a label for a message to 40 characters.
func short(s string) string {
	if r := []rune(s); len(r) > 40 {
		return string(r[:40]) + "…"
	}
	return s
}

var nonSlug = regexp.MustCompile(`[^a-z0-9.+-]+`)

// slug turns a label into a folder name: "LD RR" → "ld-rr", "E → M" → "e-m".
func slug(s string) string {
	s = strings.Trim(nonSlug.ReplaceAllString(strings.ToLower(s), "-"), "-")
	if s == "" {
		s = "x"
	}
	return s
}

// State says what a sweep would do with a cell.
type State string

const (
	CellDone   State = "done"   // report.json and distilled.npz are there
	CellResume State = "resume" // checkpoints are there
	CellNew    State = "new"
	// CellNeedsBase: the cell's base_file cannot be read (not made yet).
	CellNeedsBase State = "needs-base-file"
)

// CellState reports a cell's state from its folder. A finished or checkpointed cell whose
// recorded settings differ from the cell's (other than operational ones) is an error: the
// grid changed under an existing sweep folder; so is a damaged artifact.
func CellState(cell Cell) (State, error) {
	rep, err := finished(cell)
	if err != nil {
		return "", err
	}
	if rep != nil {
		return CellDone, nil
	}
	dir := cell.Config.Out
	if cell.BaseFileErr != nil {
		return CellNeedsBase, nil
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "checkpoints", "ckpt-*.npz")); len(m) > 0 {
		ck, _, _, err := labeldistill.CheckpointConfig(filepath.Join(dir, "checkpoints"))
		if err != nil {
			return "", fmt.Errorf("cell %s: %w", cell.ID, err)
		}
		if diff := config.ResumeConflicts(ck, cell.Config); len(diff) > 0 {
			return "", fmt.Errorf("cell %s in %s was started with other settings (%s): the grid changed; use another sweep folder",
				cell.ID, dir, strings.Join(diff, "; "))
		}
		return CellResume, nil
	}
	return CellNew, nil
}

// finished returns a finished cell's report: nil when the cell has no artifact yet; an
// error when its artifact cannot be read or was made with other settings than the cell's.
func finished(cell Cell) (*artifact.Report, error) {
	dir := cell.Config.Out
	if !fileExistsAt(filepath.Join(dir, artifact.ReportFile)) && !fileExistsAt(filepath.Join(dir, artifact.DistilledFile)) {
		return nil, nil
	}
	a, err := artifact.Read(dir)
	if err != nil {
		return nil, fmt.Errorf("cell %s: %w", cell.ID, err)
	}
	if a.Report == nil {
		return nil, fmt.Errorf("cell %s: %s has %s but no %s", cell.ID, dir, artifact.DistilledFile, artifact.ReportFile)
	}
	if diff := settingsDiff(a.Report.Config, cell.Config); len(diff) > 0 {
		return nil, fmt.Errorf("cell %s in %s was run with other settings (%s): the grid changed; use another sweep folder",
			cell.ID, dir, strings.Join(DiffDetailsOf(a.Report.Config, cell.Config, diff), "; "))
	}
	return a.Report, nil
}

// settingsDiff lists the non-operational settings that differ between a finished run and
// a cell (unlike ResumeConflicts, more epochs is a difference: the cell asks for another run).
func settingsDiff(done, cell config.Config) []string {
	var out []string
	for _, n := range config.Diff(done, cell) {
		if !config.IsOperational(n) {
			out = append(out, n)
		}
	}
	return out
}

// DiffDetailsOf is DiffDetails restricted to the named fields.
func DiffDetailsOf(a, b config.Config, names []string) []string {
	var out []string
	for _, d := range config.DiffDetails(a, b) {
		name, _, _ := strings.Cut(d, ":")
		if slices.Contains(names, name) {
			out = append(out, d)
		}
	}
	return out
}

func fileExistsAt(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// CheckGridFile refuses a grid that gives a cell of an earlier grid of dir (its
// grid.json) other settings, before anything in dir is changed; cells only one of the two
// grids has (rows or columns added or dropped) are fine.
func CheckGridFile(g *Grid, dir string) error {
	path := filepath.Join(dir, GridFile)
	b, err := boundedread.ReadRegularFile(path, config.MaxFileBytes, "grid file")
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	old, err := ParseGrid(b)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	oldCells, err := old.Cells(dir, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	cells, err := g.Cells(dir, nil)
	if err != nil {
		return err
	}
	byID := map[string]Cell{}
	for _, c := range oldCells {
		byID[c.ID] = c
	}
	for _, c := range cells {
		o, ok := byID[c.ID]
		if !ok {
			continue
		}
		if diff := settingsDiff(o.Config, c.Config); len(diff) > 0 {
			return fmt.Errorf("%s was run with another grid (%s): cell %s would change (%s); use another sweep folder",
				dir, path, c.ID, strings.Join(DiffDetailsOf(o.Config, c.Config, diff), "; "))
		}
	}
	return nil
}

// Options control Run.
type Options struct {
	// Rows and Columns restrict the run to these labels (nil: all); the summary still
	// lists every cell.
	Rows, Columns []string
	// Adjust is applied to every cell's config (operational settings).
	Adjust func(*config.Config)
	// Cell is told about each cell before it runs (state: done, resume or new) and after
	// (state "finished").
	Cell func(cell Cell, index, total int, state State)
	// Run are the options of each cell's Distill (progress); Run adds the cell's
	// checkpoint folder, history and resume.
	Run []labeldistill.RunOption
}

// Run runs the grid's cells into dir (row-major, the selected ones), skipping
// finished cells and resuming checkpointed ones, then writes the summary. On
// cancellation the running cell checkpoints and Run returns ctx's error after writing
// the summary of what is finished; running it again continues.
func Run(ctx context.Context, g *Grid, dir string, o Options) error {
	cells, err := g.Cells(dir, o.Adjust)
	if err != nil {
		return err
	}
	for _, sel := range []struct {
		name   string
		labels []string
		has    func(Cell) string
	}{{"rows", o.Rows, func(c Cell) string { return c.Row }}, {"columns", o.Columns, func(c Cell) string { return c.Column }}} {
		for _, l := range sel.labels {
			if !slices.ContainsFunc(cells, func(c Cell) bool { return sel.has(c) == l }) {
				return fmt.Errorf("%s: no %s labelled %q in the grid", sel.name, strings.TrimSuffix(sel.name, "s"), l)
			}
		}
	}
	if err := CheckGridFile(g, dir); err != nil {
		return err
	}
	var todo []Cell
	states := map[string]State{}
	for _, c := range cells {
		if (o.Rows != nil && !slices.Contains(o.Rows, c.Row)) || (o.Columns != nil && !slices.Contains(o.Columns, c.Column)) {
			continue
		}
		st, err := CellState(c)
		if err != nil {
			return err
		}
		if st == CellNeedsBase {
			if errors.Is(c.BaseFileErr, os.ErrNotExist) {
				return fmt.Errorf("cell %s: base_file: %v (make it with ldtorch select-base --out %s)", c.ID, c.BaseFileErr, c.BaseFilePath)
			}
			return fmt.Errorf("cell %s: base_file: %v", c.ID, c.BaseFileErr)
		}
		states[c.ID] = st
		todo = append(todo, c)
	}
	if err := os.MkdirAll(filepath.Join(dir, CellsFolder), 0o755); err != nil {
		return err
	}
	gj, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, GridFile), append(gj, '\n')); err != nil {
		return err
	}
	var runErr error
	for i, c := range todo {
		st := states[c.ID]
		if o.Cell != nil {
			o.Cell(c, i+1, len(todo), st)
		}
		if st == CellDone {
			continue
		}
		run := o.Run
		if c.BaseFile != nil {
			run = append(slices.Clone(run), labeldistill.WithBaseFile(c.BaseFile))
		}
		if runErr = runCell(ctx, c, st, run); runErr != nil {
			runErr = fmt.Errorf("cell %s: %w", c.ID, runErr)
			break
		}
		if o.Cell != nil {
			o.Cell(c, i+1, len(todo), "finished")
		}
	}
	if err := WriteSummary(g, dir); err != nil {
		if runErr == nil {
			runErr = err
		} else {
			runErr = fmt.Errorf("%w; %s", runErr, SummaryNotWritten(err))
		}
	}
	return runErr
}

func runCell(ctx context.Context, c Cell, st State, run []labeldistill.RunOption) (err error) {
	// One writer per folder: the cell's own lock, as distill takes it, so that a distill
	// --resume of this cell is refused while the sweep runs it (and the other way round).
	_, statErr := os.Stat(c.Config.Out)
	created := errors.Is(statErr, os.ErrNotExist)
	if err := os.MkdirAll(c.Config.Out, 0o755); err != nil {
		return err
	}
	unlock, err := atomicfile.LockDir(c.Config.Out)
	if err != nil {
		return err
	}
	defer unlock()
	defer func() {
		// A new cell that failed before writing anything leaves no folder behind.
		if entries, _ := os.ReadDir(c.Config.Out); created && err != nil && len(entries) == 1 && entries[0].Name() == atomicfile.LockFile {
			os.Remove(filepath.Join(c.Config.Out, atomicfile.LockFile))
			os.Remove(c.Config.Out)
		}
	}()
	// Looked at again under the lock: another process may have finished or started it.
	if st, err = CellState(c); err != nil || st == CellDone {
		return err
	}
	ckpt := filepath.Join(c.Config.Out, "checkpoints")
	opts := append(slices.Clone(run), labeldistill.WithCheckpointDir(ckpt), labeldistill.WithHistory(filepath.Join(c.Config.Out, labeldistill.HistoryFile)))
	if st == CellResume {
		opts = append(opts, labeldistill.WithResume(ckpt))
	}
	res, err := labeldistill.Distill(ctx, c.Config, opts...)
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		os.Remove(ckpt) // only when empty: a cell that failed before its first checkpoint leaves none
		return err
	}
	return artifact.Write(c.Config.Out, res)
}

// Row is one printed row of a summary: the distilled labels of a grid row, or one of
// its baselines.
type Row struct {
	Label    string
	GridRow  string
	Baseline string // "" for the distilled labels; else a labeldistill.Result.Baselines key
}

// summaryCell is one finished cell's numbers.
type summaryCell struct {
	cell Cell
	rep  *artifact.Report
}

// WriteSummary writes dir/summary.csv (one line per finished cell and label set) and
// dir/summary.md (the paper's layout: one row per grid row and baseline, one column per
// grid column, mean ± std over the M models, the paper's numbers beneath; cells not
// finished show "–").
func WriteSummary(g *Grid, dir string) error {
	cells, err := g.Cells(dir, nil)
	if err != nil {
		return err
	}
	done := map[string]summaryCell{}
	for _, c := range cells {
		rep, err := finished(c)
		if err != nil {
			return err // a damaged cell, or one of another grid: never shown as not run
		}
		if rep != nil {
			done[c.ID] = summaryCell{c, rep}
		}
	}
	var csvBuf bytes.Buffer
	w := csv.NewWriter(&csvBuf)
	w.Write([]string{"row", "column", "labels", "mean", "std", "models", "steps", "method", "dataset", "source",
		"base_examples", "seed", "base_seed", "target_set_size", "epochs", "wall_seconds", "folder", "paper", "base_origin"})
	rowsOut := summaryRows(g, cells, done)
	for _, r := range rowsOut {
		for _, col := range g.Columns {
			sc, ok := done[slug(r.GridRow)+"__"+slug(col.Label)]
			if !ok {
				continue
			}
			mean, std, models, steps, ok := sc.value(r.Baseline)
			if !ok {
				continue
			}
			cfg := sc.rep.Config
			w.Write([]string{r.GridRow, col.Label, r.Label, f2(mean), f2(std), strconv.Itoa(models), strconv.Itoa(steps),
				cfg.Method, cfg.Dataset, cfg.Source, strconv.Itoa(cfg.BaseExamples), strconv.FormatInt(cfg.Seed, 10),
				strconv.FormatInt(cfg.BaseSelectionSeed(), 10), strconv.Itoa(cfg.TargetSetSize), strconv.Itoa(cfg.Epochs),
				strconv.FormatFloat(sc.rep.WallSeconds, 'f', 1, 64), filepath.Join(CellsFolder, sc.cell.ID), g.Paper[r.Label][col.Label], baseOriginText(sc.rep)})
		}
	}
	w.Flush()
	if err := atomicfile.WriteFile(filepath.Join(dir, SummaryCSV), csvBuf.Bytes()); err != nil {
		return err
	}

	var md strings.Builder
	title := g.Title
	if title == "" {
		title = "Sweep"
	}
	fmt.Fprintf(&md, "# %s\n\n", title)
	fmt.Fprintf(&md, "Test accuracy (%%), mean ± population std over the M fresh models of each cell; "+
		"%d of %d cells finished; – = not run or not finished.\n\n", len(done), len(cells))
	md.WriteString("| |")
	for _, c := range g.Columns {
		md.WriteString(" " + c.Label + " |")
	}
	md.WriteString("\n|---|")
	md.WriteString(strings.Repeat("---|", len(g.Columns)))
	md.WriteString("\n")
	for _, r := range rowsOut {
		md.WriteString("| " + r.Label + " |")
		for _, col := range g.Columns {
			text := "–"
			if sc, ok := done[slug(r.GridRow)+"__"+slug(col.Label)]; ok {
				if mean, std, _, _, ok := sc.value(r.Baseline); ok {
					text = f2(mean) + " ± " + f2(std)
				}
			}
			md.WriteString(" " + text + " |")
		}
		md.WriteString("\n")
		if p := g.Paper[r.Label]; len(p) > 0 {
			md.WriteString("| " + r.Label + " (paper) |")
			for _, col := range g.Columns {
				text := p[col.Label]
				if text == "" {
					text = " "
				}
				md.WriteString(" " + text + " |")
			}
			md.WriteString("\n")
		}
	}
	if g.Notes != "" {
		md.WriteString("\n" + g.Notes + "\n")
	}
	md.WriteString("\nPer-cell settings, seeds, steps and wall times: summary.csv; artifacts: cells/<row>__<column>/.\n")
	return atomicfile.WriteFile(filepath.Join(dir, SummaryMD), []byte(md.String()))
}

// SummaryNotWritten says why the summary was not rewritten after a run that failed or was
// interrupted.
func SummaryNotWritten(err error) string { return "the summary was not rewritten: " + err.Error() }

// baseOriginText is a cell's base examples in a word or two: the select-base strategy, or
// how the run drew them.
func baseOriginText(rep *artifact.Report) string {
	switch o := rep.BaseOrigin; {
	case o == nil:
		return ""
	case o.Strategy != "":
		return o.Strategy
	}
	return rep.BaseOrigin.Selection
}

func f2(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// value returns the numbers of the distilled labels (baseline "") or of a baseline.
func (sc summaryCell) value(baseline string) (mean, std float64, models, steps int, ok bool) {
	if baseline == "" {
		return sc.rep.TestMean, sc.rep.TestStd, len(sc.rep.TestAccuracies), sc.rep.T, true
	}
	b, ok := sc.rep.Baselines[baseline]
	if !ok {
		return 0, 0, 0, 0, false
	}
	return b.Mean, b.Std, len(b.Accuracies), b.Steps, true
}

// summaryRows lists the printed rows: each grid row, then the baselines its finished cells
// hold, named as in the paper (Baseline, Baseline LS, Baseline RR, Baseline RR LS; Teacher).
func summaryRows(g *Grid, cells []Cell, done map[string]summaryCell) []Row {
	var out []Row
	for _, r := range g.Rows {
		out = append(out, Row{Label: r.Label, GridRow: r.Label})
		var keys []string
		var method, name string
		for _, c := range cells {
			if c.Row != r.Label {
				continue
			}
			method, name = c.Config.Method, c.Config.MethodName()
			for _, b := range c.Config.Baselines {
				k := b
				if c.Config.Method == config.MethodRR {
					k += "_rr"
				}
				if !slices.Contains(keys, k) {
					keys = append(keys, k)
				}
			}
		}
		plain := r.Label == "LD" || r.Label == "LD RR" || r.Label == MethodNameOf(method) || r.Label == name
		for _, k := range keys {
			name := PaperBaselineName(k)
			if !plain {
				name = r.Label + ": " + name
			}
			out = append(out, Row{Label: name, GridRow: r.Label, Baseline: k})
		}
	}
	return out
}

// MethodNameOf is the paper's name of a method of label distillation: "LD", "LD RR" or,
// for method dd, "DD" (config.Config.MethodName also names runs that learn images).
func MethodNameOf(method string) string {
	switch method {
	case config.MethodRR:
		return "LD RR"
	case config.MethodDD:
		return "DD"
	}
	return "LD"
}

// PaperBaselineName names a Result.Baselines key as the paper does.
func PaperBaselineName(key string) string {
	base, rr := strings.CutSuffix(key, "_rr")
	name := map[string]string{config.BaselineTrue: "Baseline", config.BaselineSmooth: "Baseline LS", config.BaselineTeacher: "Teacher"}[base]
	if name == "" {
		name = base
	}
	switch {
	case rr && base == config.BaselineSmooth:
		return "Baseline RR LS"
	case rr:
		return name + " RR"
	}
	return name
}
