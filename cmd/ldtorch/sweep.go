// sweep.go: `ldtorch sweep --grid FILE --out DIR`: run a grid of distillations (a paper
// table) into one folder, resumable as a whole, and write summary.csv and summary.md.

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/labeldistill/sweep"
	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/fileio/atomicfile"
	"github.com/ldtorch/ldtorch/torch/fileio/boundedread"
)

// operationalFlags are the settings a sweep or study may take from the command line for
// every run: where and how fast, never what. --threads and --device say their settings'
// help for every run; --data-dir keeps its shorter line.
func operationalFlags() []cli.Flag {
	threads, device, dataDir := setting("threads"), setting("device"), setting("data_dir")
	return []cli.Flag{
		&cli.IntFlag{Name: "threads", Usage: everyRun(threads.Help), EnvVars: []string{envName("threads")}, Category: threads.Category},
		&cli.StringFlag{Name: "device", Usage: everyRun(device.Help), EnvVars: []string{envName("device")}, Category: device.Category},
		&cli.StringFlag{Name: "data-dir", Usage: "`DIR` holding the datasets (default: $LDTORCH_DATA, else ~/.cache/ldtorch/data)", EnvVars: []string{envName("data-dir")}, Category: dataDir.Category},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print no progress", EnvVars: []string{envName("quiet")}, Category: catSystem},
	}
}

// operational returns the adjustment of a config by the operational flags that are set,
// after checking them (so that a bad --threads is named as such, not as the grid's or
// the artifact's).
func operational(c *cli.Context) (func(*config.Config), error) {
	if t := c.Int("threads"); c.IsSet("threads") && t != 0 {
		if err := countFlag("threads", t, 1, config.MaxThreads(), config.WhyThreads); err != nil {
			return nil, err
		}
	}
	if c.IsSet("device") {
		if _, err := torch.ParseDevice(c.String("device")); err != nil {
			return nil, usageErrorf("--device: %v", err)
		}
	}
	dataDir := c.String("data-dir")
	if !c.IsSet("data-dir") {
		dir, err := data.DataDir("")
		if err != nil {
			return nil, usageErrorf("--data-dir: %v", err)
		}
		dataDir = dir
	}
	return func(cfg *config.Config) {
		if c.IsSet("threads") {
			cfg.Threads = c.Int("threads")
		}
		if c.IsSet("device") {
			cfg.Device = c.String("device")
		}
		if c.IsSet("data-dir") || cfg.DataDir == "" {
			cfg.DataDir = dataDir
		}
	}, nil
}

func (e *env) sweepCommand() *cli.Command {
	return &cli.Command{
		Name:  "sweep",
		Usage: "run a grid of distillations (a paper table) into one folder; rerun to resume",
		UsageText: "ldtorch sweep --grid scripts/paper/table1-mnist.json --out DIR [--rows \"LD RR\"] [--threads 1 --jobs 2]\n" +
			"ldtorch sweep --grid FILE --out DIR --summary-only",
		Description: "Each cell of the grid (rows × columns of config settings over a common config; see " +
			"sweep.Grid) is a distillation into DIR/cells/<row>__<column>/ with its artifact, checkpoints " +
			"and history. Running the same command again skips finished cells and resumes a cell that was " +
			"interrupted from its checkpoint. DIR/summary.csv and DIR/summary.md (the paper's layout, its " +
			"numbers beneath ours) are rewritten after the run, also when it is interrupted. Sweeps of one DIR share " +
			"its cells out (a cell another sweep runs is left to it): --jobs N starts N at once, as does the same command " +
			"started once per core.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "grid", Usage: "grid `FILE` (JSON; ready ones in scripts/paper/)", Category: catRun},
			&cli.StringFlag{Name: "out", Usage: "sweep `DIR` (created; sweeps of one grid may share it)", Category: catRun},
			&cli.StringSliceFlag{Name: "rows", Usage: "run only the rows with these `LABELS` (repeat the flag or separate by commas)", Category: catRun},
			&cli.StringSliceFlag{Name: "columns", Usage: "run only the columns with these `LABELS`", Category: catRun},
			&cli.BoolFlag{Name: "summary-only", Usage: "only rewrite summary.csv and summary.md from the finished cells", Category: catRun},
			&cli.IntFlag{Name: "jobs", Value: 1, Usage: "run `N` sweeps of DIR at once, sharing its cells (with --threads 1, one per core)", Category: catSystem},
			&cli.IntFlag{Name: "together", Value: 1, Usage: "distil up to `K` cells of one shape as one computation (LD RR cells learning labels, e.g. a column's seeds; on a GPU K runs cost the kernel launches of one); each cell's artifact is the one it gets alone", Category: catSystem},
			&cli.BoolFlag{Name: "list", Usage: "list the cells (those --rows and --columns select) and their state (done, running, resume, new, needs-base-file) and exit", Category: catRun},
		}, operationalFlags()...),
		Action: e.sweepAction,
	}
}

func (e *env) sweepAction(c *cli.Context) error {
	if c.Args().Present() {
		return usageErrorf("unexpected argument %q (sweep takes only flags)", c.Args().First())
	}
	if err := requireFlags(c, "grid", "out"); err != nil {
		return err
	}
	jobs := c.Int("jobs")
	if jobs < 1 || jobs > maxSweepJobs {
		return usageErrorf("--jobs: must be between 1 and %d, got %d", maxSweepJobs, jobs)
	}
	together := c.Int("together")
	if together < 1 || together > maxSweepTogether {
		return usageErrorf("--together: must be between 1 and %d, got %d", maxSweepTogether, together)
	}
	isJob := launchedJob()
	if isJob {
		jobs = 1 // one of the jobs of a --jobs sweep
		// Its stderr is a pipe to the launcher: should the launcher die, the job (interrupted
		// by Pdeathsig) must still write its checkpoint, not die of the broken pipe.
		signal.Ignore(syscall.SIGPIPE)
	}
	if jobs > 1 && (c.Bool("list") || c.Bool("summary-only")) {
		return usageErrorf("--jobs: runs the cells; --list and --summary-only run none")
	}
	adjust, err := operational(c)
	if err != nil {
		return err
	}
	grid, err := sweep.ReadGridContext(c.Context, c.String("grid"))
	if err != nil && c.Context.Err() != nil { // interrupted while a named pipe waited for its writer
		return err
	}
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return usageErrorf("--grid: cannot read %s: %v", pe.Path, pe.Err)
		}
		return usageErrorf("--grid: %s", err)
	}
	dir := c.String("out")
	cells, err := grid.Cells(dir, adjust)
	if err != nil {
		return usageErrorf("--grid %s: %s", c.String("grid"), err)
	}
	rows, err := selectLabels("rows", c.StringSlice("rows"), grid.Rows, c.String("grid"))
	if err != nil {
		return err
	}
	columns, err := selectLabels("columns", c.StringSlice("columns"), grid.Columns, c.String("grid"))
	if err != nil {
		return err
	}
	if c.Bool("list") { // the cells --rows and --columns select (all by default)
		sel := sweep.Options{Rows: rows, Columns: columns}
		for _, cell := range cells {
			if !sel.Selected(cell) {
				continue
			}
			st, err := sweep.CellState(cell)
			if err != nil {
				return usageErrorf("%v", err)
			}
			where := filepath.Join(sweep.CellsFolder, cell.ID)
			if holder, held := atomicfile.HeldBy(cell.Config.Out); held && st != sweep.CellDone {
				// Run now by another sweep of the folder (or a distill --resume of the cell).
				fmt.Fprintf(e.stdout, "%-8s %s (%s)\n", "running", where, holder)
				continue
			}
			fmt.Fprintf(e.stdout, "%-8s %s\n", st, where)
		}
		return nil
	}
	// A grid that changes cells already run or started here is refused before anything is
	// written (grid.json included).
	if err := sweep.CheckGridFile(grid, dir); err != nil {
		return usageErrorf("%v", err)
	}
	if c.Bool("summary-only") && !holdsSweep(dir) {
		// A mistyped --out must not become an empty sweep folder with an empty summary.
		return usageErrorf("--out: %s holds no sweep (neither %s nor %s/): nothing to summarise", dir, sweep.GridFile, sweep.CellsFolder)
	}
	if !c.Bool("summary-only") {
		// Before anything is created: a --device this build cannot use leaves no folder.
		if _, err := checkRuntime(cells[0].Config.Device); err != nil {
			return err
		}
	}
	if err := checkWritable(dir); err != nil {
		return err
	}
	if c.Bool("summary-only") {
		if err := sweep.WriteSummary(grid, dir); err != nil {
			return sweepError(err)
		}
		return e.printSweepSummary(dir)
	}
	if jobs > 1 {
		return e.sweepJobs(c, jobs, dir)
	}
	ctx := c.Context
	quiet := c.Bool("quiet")
	var pr *progress
	var busy []string // cells another sweep of the folder runs
	opts := sweep.Options{
		Rows: rows, Columns: columns, Adjust: adjust, Together: together,
		Cell: func(cell sweep.Cell, i, n int, st sweep.State) {
			if st == sweep.CellBusy {
				if isJob {
					return // a sibling job runs it
				}
				busy = append(busy, cell.ID)
			}
			if quiet {
				return
			}
			cfg := cell.Config
			switch st {
			case sweep.CellDone:
				fmt.Fprintf(e.stderr, "[cell %d/%d] %s / %s: finished earlier, skipped\n", i, n, cell.Row, cell.Column)
			case sweep.CellBusy:
				fmt.Fprintf(e.stderr, "[cell %d/%d] %s / %s: run by another process, left to it\n", i, n, cell.Row, cell.Column)
			case sweep.CellFinished:
				pr.done()
				if a, err := artifact.Read(cfg.Out); err == nil && a.Report != nil {
					fmt.Fprintf(e.stderr, "[cell %d/%d] %s / %s: %.2f%% ± %.2f in %s\n", i, n, cell.Row, cell.Column,
						a.Report.TestMean, a.Report.TestStd, elapsedSeconds(a.Report.WallSeconds))
				}
			default:
				verb := "starting"
				if st == sweep.CellResume {
					verb = "resuming"
				}
				fmt.Fprintf(e.stderr, "[cell %d/%d] %s %s / %s: %s on %s, N=%d, seed %d, %d epochs -> %s\n", i, n, verb,
					cell.Row, cell.Column, cfg.MethodName(), cfg.Dataset, cfg.BaseExamples, cfg.Seed, cfg.Epochs, cfg.Out)
				pr = newProgress(e.stderr, e.stderrTTY, quiet)
			}
		},
		CellRun: func(cell sweep.Cell) []labeldistill.RunOption {
			tag := ""
			if together > 1 { // the runs stepped at once report in turn: each line says whose
				tag = cell.Row + " / " + cell.Column + ": "
			}
			return []labeldistill.RunOption{labeldistill.WithProgress(func(p labeldistill.Progress) {
				if pr != nil && (p.Phase != "checkpoint" || strings.HasPrefix(p.Message, "warning")) {
					pr.tag = tag
					pr.update(p)
				}
			})}
		},
	}
	err = sweep.Run(ctx, grid, dir, opts)
	if pr != nil {
		pr.done()
	}
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, context.Canceled) {
			summary := "summary rewritten"
			if _, why, ok := strings.Cut(err.Error(), sweep.SummaryNotWritten(errors.New(""))); ok {
				summary = "the summary was not rewritten (" + why + ")"
			}
			running := "the running one"
			if together > 1 {
				running = "the running ones"
			}
			return &exitError{code: exitInterrupted, msg: "interrupted; finished cells are kept and " + running + " checkpointed; " + summary + "; continue with the same command: " + commandLine(e.argv)}
		}
		return sweepError(err)
	}
	if len(busy) > 0 {
		// Said even under --quiet: these cells are not in the summary yet.
		fmt.Fprintf(e.stderr, "ldtorch sweep: %d cell(s) run by another process (%s): the summary holds them once it ends\n",
			len(busy), strings.Join(busy, ", "))
	}
	return e.printSweepSummary(dir)
}

// sweepError is the exit of a sweep that failed other than by an interruption.
func sweepError(err error) error {
	var fe *config.FieldError
	var le *atomicfile.LockedError
	switch {
	case errors.As(err, &fe):
		return usageErrorf("%v", err)
	case errors.As(err, &le):
		return usageErrorf("%v; wait for it to end (finished cells are kept; rerun the same command then)", err)
	}
	return failuref("%v", err)
}

// axisLabels lists an axis's labels, quoted, for messages.
func axisLabels(axis sweep.GridAxis) string {
	var ls []string
	for _, e := range axis {
		ls = append(ls, strconv.Quote(e.Label))
	}
	return strings.Join(ls, ", ")
}

// selectLabels resolves --rows or --columns: each value given is a label of the grid, or
// a comma-separated list of labels (so a label holding a comma is selected whole).
func selectLabels(flag string, given []string, axis sweep.GridAxis, grid string) ([]string, error) {
	if len(given) == 0 {
		return nil, nil
	}
	has := func(l string) bool {
		return slices.ContainsFunc(axis, func(e sweep.GridEntry) bool { return e.Label == l })
	}
	var out []string
	for _, g := range given {
		if has(g) {
			out = append(out, g)
			continue
		}
		for _, l := range strings.Split(g, ",") {
			if l = strings.TrimSpace(l); l == "" {
				return nil, usageErrorf("--%s: an empty label in %q (labels: %s)", flag, g, axisLabels(axis))
			}
			if !has(l) {
				return nil, usageErrorf("--%s: no %s labelled %q in %s (labels: %s)", flag, strings.TrimSuffix(flag, "s"), l, grid, axisLabels(axis))
			}
			out = append(out, l)
		}
	}
	return out, nil
}

// maxSummaryBytes bounds summary.md read back for printing: a grid of config.MaxGridCells
// cells and their baselines is a few hundred KiB.
const maxSummaryBytes = 16 << 20

func (e *env) printSweepSummary(dir string) error {
	md, err := boundedread.ReadRegularFile(filepath.Join(dir, sweep.SummaryMD), maxSummaryBytes, "sweep summary")
	if err != nil {
		return failuref("%v", err)
	}
	_, err = e.stdout.Write(md)
	return err
}

// holdsSweep reports whether dir is a sweep folder: it has the grid.json or the cells/ a
// sweep writes.
func holdsSweep(dir string) bool {
	for _, name := range []string{sweep.GridFile, sweep.CellsFolder} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}
