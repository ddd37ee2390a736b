package sweep

// sweep.go: running a sweep, a grid of distillations laid out like a paper table (grid.go),
// cell by cell into one folder, resumable as a whole (each cell's state says what is left),
// and summarised as summary.csv and summary.md (summary.go).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/rundir"
	"github.com/ldtorch/ldtorch/torch/fileio/atomicfile"
	"github.com/ldtorch/ldtorch/torch/fileio/boundedread"
)

// Sweep file names inside a sweep folder.
const (
	GridFile   = "grid.json"
	SummaryCSV = "summary.csv"
	SummaryMD  = "summary.md"
	// SummaryDDRankingCSV holds the cells' DD-Ranking evaluations, when any cell has one.
	SummaryDDRankingCSV = "summary-ddranking.csv"
	CellsFolder         = "cells"
)

// State says what a sweep would do with a cell.
type State string

const (
	CellDone   State = "done"   // report.json and distilled.npz are there
	CellResume State = "resume" // checkpoints are there
	CellNew    State = "new"
	// CellNeedsBase: the cell's base_file cannot be read (not made yet).
	CellNeedsBase State = "needs-base-file"
	// CellBusy: another process (another sweep of the folder) holds the cell's lock; it is
	// left to that process.
	CellBusy State = "busy"
	// CellFinished: the cell was run to its end by this sweep.
	CellFinished State = "finished"
)

// CellState reports a cell's state from its folder. A finished or checkpointed cell whose
// recorded settings differ from the cell's (other than operational ones) is an error: the
// grid changed under an existing sweep folder; so is a damaged artifact, unless another
// process holds the cell's lock (it is writing the artifact: the cell is not finished yet).
func CellState(cell Cell) (State, error) { return cellState(cell, false) }

// cellState is CellState; locked says this process holds the cell's lock, so that nobody
// else can be writing its artifact and an incomplete one is damaged.
func cellState(cell Cell, locked bool) (State, error) {
	rep, err := finished(cell, locked)
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
		ck, _, _, err := rundir.CheckpointConfig(filepath.Join(dir, "checkpoints"))
		if err != nil {
			return "", fmt.Errorf("cell %s: %w", cell.ID, err)
		}
		if diff := config.ResumeConflicts(ck, cell.Config.Config); len(diff) > 0 {
			return "", fmt.Errorf("cell %s in %s was started with other settings (%s): the grid changed; use another sweep folder",
				cell.ID, dir, strings.Join(diff, "; "))
		}
		return CellResume, nil
	}
	return CellNew, nil
}

// finished returns a finished cell's report: nil when the cell has no artifact yet, or an
// incomplete one while another process holds the cell's lock (unless locked: this process
// holds it); an error when its artifact cannot be read or was made with other settings than
// the cell's.
func finished(cell Cell, locked bool) (*artifact.Report, error) {
	dir := cell.Config.Out
	if !fileExistsAt(filepath.Join(dir, artifact.ReportFile)) && !fileExistsAt(filepath.Join(dir, artifact.DistilledFile)) {
		return nil, nil
	}
	a, err := readArtifact(dir)
	if err != nil && !locked {
		// The artifact's files are written one after the other under the cell's lock: a
		// sweep or a summary reading the cell meanwhile sees part of them. While the lock is
		// held the cell is not finished; once it is free, its writer is done (it may have
		// finished since the read above) or gone, and a second reading is the one that counts.
		if _, held := lockHeldBy(dir); held {
			return nil, nil
		}
		a, err = readArtifact(dir)
	}
	if err != nil {
		return nil, fmt.Errorf("cell %s: %w", cell.ID, err)
	}
	if diff := settingsDiff(a.Report.Config, cell.Config.Config); len(diff) > 0 {
		return nil, fmt.Errorf("cell %s in %s was run with other settings (%s): the grid changed; use another sweep folder",
			cell.ID, dir, strings.Join(DiffDetailsOf(a.Report.Config, cell.Config.Config, diff), "; "))
	}
	return a.Report, nil
}

// readArtifact reads a finished cell's artifact: an error when it cannot be read or has no
// report.
func readArtifact(dir string) (*artifact.Artifact, error) {
	a, err := artifact.Read(dir)
	if err == nil && a.Report == nil {
		err = fmt.Errorf("%s has %s but no %s", dir, artifact.DistilledFile, artifact.ReportFile)
	}
	return a, err
}

// lockHeldBy is atomicfile.HeldBy; a test replaces it to finish a cell's artifact between
// the two readings of finished.
var lockHeldBy = atomicfile.HeldBy

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
	// The copy names its base files as the grid did; a relative name (a copy written
	// before names were stored absolute) is taken from the folder of the grid now given.
	old, err := parseGrid(b, g.dir)
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
		if o.BaseFilePath != "" && o.BaseFileErr != nil && o.BaseFilePath != c.BaseFilePath {
			return fmt.Errorf("%s was run with another grid (%s): cell %s distilled the base examples of %s, which cannot be read now (%v); use another sweep folder, or name that file in %s",
				dir, path, c.ID, o.BaseFilePath, o.BaseFileErr, path)
		}
		if diff := settingsDiff(o.Config.Config, c.Config.Config); len(diff) > 0 {
			return fmt.Errorf("%s was run with another grid (%s): cell %s would change (%s); use another sweep folder",
				dir, path, c.ID, strings.Join(DiffDetailsOf(o.Config.Config, c.Config.Config, diff), "; "))
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
	// Cell is told about each cell before it runs (state resume or new) and after: finished,
	// done (finished earlier, or by another sweep of the folder meanwhile) or busy (another
	// sweep of the folder runs it).
	Cell func(cell Cell, index, total int, state State)
	// Run are the options of each cell's Distill (progress); Run adds the cell's
	// checkpoint folder, history and resume.
	Run []labeldistill.RunOption
	// CellRun, when set, adds options of cell c's own (after Run's).
	CellRun func(c Cell) []labeldistill.RunOption
	// Together, above 1, distils up to this many cells of one shape in one computation
	// (labeldistill.DistillTogether: LD RR cells that learn labels, e.g. a column's seeds);
	// the others run one by one.
	Together int
}

// Selected reports whether cell c is in the rows and columns o restricts a run to.
func (o Options) Selected(c Cell) bool {
	return (o.Rows == nil || slices.Contains(o.Rows, c.Row)) && (o.Columns == nil || slices.Contains(o.Columns, c.Column))
}

// Run runs the grid's cells into dir (row-major, the selected ones), skipping
// finished cells and resuming checkpointed ones, then writes the summary. On
// cancellation the running cell checkpoints and Run returns ctx's error after writing
// the summary of what is finished; running it again continues. Several sweeps may run
// into one folder at once (one per core): each cell is run by the first that takes its
// lock, the others skip it (CellBusy), and the summary the last one writes holds all.
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
		if !o.Selected(c) {
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
	if err := writeGridFile(ctx, g, dir); err != nil {
		return err
	}
	var runErr error
	handled := map[string]bool{} // cells run together with an earlier one
	for i, c := range todo {
		if handled[c.ID] {
			continue
		}
		st := states[c.ID]
		if st != CellDone {
			if group := togetherGroup(todo, i, states, handled, o.Together); len(group) > 1 {
				if runErr = runTogether(ctx, todo, group, states, o); runErr != nil {
					break
				}
				continue
			}
			if st, runErr = runCell(ctx, c, i+1, len(todo), o); runErr != nil {
				runErr = fmt.Errorf("cell %s: %w", c.ID, runErr)
				break
			}
		}
		if o.Cell != nil {
			o.Cell(c, i+1, len(todo), st)
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

// FolderLockWait is how long a sweep waits for its folder's lock, which other sweeps of the
// folder hold only while they write grid.json or the summary.
const FolderLockWait = time.Minute

// writeGridFile writes the grid into dir as grid.json, under the folder's lock and after
// comparing it again with the one there: another sweep of the folder may have written it
// since CheckGridFile.
func writeGridFile(ctx context.Context, g *Grid, dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, CellsFolder), 0o755); err != nil {
		return err
	}
	unlock, err := atomicfile.LockDirWait(ctx, dir, FolderLockWait)
	if err != nil {
		return err
	}
	defer unlock()
	if err := CheckGridFile(g, dir); err != nil {
		return err
	}
	gj, err := json.MarshalIndent(g.withAbsoluteBaseFiles(), "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, GridFile), append(gj, '\n'))
}

// runCell runs cell c (index i of n) under its own lock, as distill takes it, so that a
// distill --resume of the cell is refused while the sweep runs it (and the other way round).
// A cell another process holds (another sweep of the folder) is left to it: CellBusy. It
// returns the state the cell ended in: "finished", CellDone when another process finished
// it meanwhile, or CellBusy.
func runCell(ctx context.Context, c Cell, i, n int, o Options) (st State, err error) {
	release, st, err := claimCell(c)
	if err != nil || release == nil {
		return st, err
	}
	defer func() { release(err != nil) }()
	if o.Cell != nil {
		o.Cell(c, i, n, st)
	}
	res, err := labeldistill.DistillResolved(ctx, c.Config, cellRunOptions(c, st, o)...)
	return CellFinished, finishCell(ctx, c, res, err)
}

// claimCell takes cell c's lock and looks at its state again under it (another process may
// have finished or started it). It returns release, which drops the lock (and, for a new
// cell that failed before writing anything, its folder), or nil with CellBusy or CellDone
// when the cell is not this process's to run.
func claimCell(c Cell) (release func(failed bool), st State, err error) {
	_, statErr := os.Stat(c.Config.Out)
	created := errors.Is(statErr, os.ErrNotExist)
	if err := os.MkdirAll(c.Config.Out, 0o755); err != nil {
		return nil, "", err
	}
	unlock, err := atomicfile.LockDir(c.Config.Out)
	var le *atomicfile.LockedError
	if errors.As(err, &le) {
		return nil, CellBusy, nil
	}
	if err != nil {
		return nil, "", err
	}
	release = func(failed bool) {
		unlock()
		// A new cell that failed before writing anything leaves no folder behind.
		if entries, _ := os.ReadDir(c.Config.Out); created && failed && len(entries) == 1 && entries[0].Name() == atomicfile.LockFile {
			os.Remove(filepath.Join(c.Config.Out, atomicfile.LockFile))
			os.Remove(c.Config.Out)
		}
	}
	if st, err = cellState(c, true); err != nil || st == CellDone {
		release(err != nil)
		return nil, st, err
	}
	return release, st, nil
}

// cellRunOptions are the options of cell c's distillation from state st: the sweep's, the
// cell's base file, checkpoint folder and history, and its resume.
func cellRunOptions(c Cell, st State, o Options) []labeldistill.RunOption {
	run := o.Run
	if o.CellRun != nil {
		run = append(slices.Clone(run), o.CellRun(c)...)
	}
	if c.BaseFile != nil {
		run = append(slices.Clone(run), labeldistill.WithBaseFile(c.BaseFile))
	}
	ckpt := filepath.Join(c.Config.Out, "checkpoints")
	opts := append(slices.Clone(run), labeldistill.WithCheckpointDir(ckpt), labeldistill.WithHistory(filepath.Join(c.Config.Out, rundir.HistoryFile)))
	if st == CellResume {
		opts = append(opts, labeldistill.WithResume(ckpt))
	}
	return opts
}

// finishCell writes cell c's artifact from its distillation's result, or on its error
// (err, or ctx cancelled meanwhile) removes the cell's checkpoint folder if it is empty.
func finishCell(ctx context.Context, c Cell, res *labeldistill.Result, err error) error {
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		os.Remove(filepath.Join(c.Config.Out, "checkpoints")) // only when empty: a cell that failed before its first checkpoint leaves none
		return err
	}
	return artifact.Write(c.Config.Out, res)
}
