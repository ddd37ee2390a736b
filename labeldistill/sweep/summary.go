package sweep

// summary.go: a sweep's summary, summary.csv and summary.md (the paper's table layout, with
// its published numbers beneath), from the finished cells' reports.

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/torch/fileio/atomicfile"
)

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
	// ddr is the cell's DD-Ranking evaluation of these labels (`ldtorch evaluate
	// --protocol ddranking`), nil when it has none.
	ddr *artifact.DDRankingResult
}

// WriteSummary writes dir/summary.csv (one line per finished cell and label set) and
// dir/summary.md (the paper's layout: one row per grid row and baseline, one column per
// grid column, mean ± std over the M models, the paper's numbers beneath; cells not
// finished show "–"). It holds the folder's lock while it reads the cells and writes, so
// that of several sweeps of the folder the last to write has seen every finished cell (it
// waits for the lock also after an interruption: the summary is what an interrupted sweep
// leaves).
func WriteSummary(g *Grid, dir string) error {
	unlock, err := atomicfile.LockDirWait(context.Background(), dir, FolderLockWait)
	if err != nil {
		return err
	}
	defer unlock()
	return writeSummary(g, dir)
}

func writeSummary(g *Grid, dir string) error {
	cells, err := g.Cells(dir, nil)
	if err != nil {
		return err
	}
	done := map[string]summaryCell{}
	for _, c := range cells {
		rep, err := finished(c, false)
		if err != nil {
			return err // a damaged cell, or one of another grid: never shown as not run
		}
		if rep == nil {
			continue
		}
		ddr, err := artifact.ReadDDRanking(c.Config.Out)
		if err != nil {
			return err
		}
		if ddr != nil && ddr.DistilledSHA256 != "" && (rep.Distilled == nil || ddr.DistilledSHA256 != rep.Distilled.SHA256) {
			ddr = nil // it scored other labels than the cell's
		}
		done[c.ID] = summaryCell{c, rep, ddr}
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
	tableHeader(&md, g.Columns)
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
	if err := writeDDRankingSummary(g, dir, done, &md); err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, SummaryMD), []byte(md.String()))
}

// writeDDRankingSummary adds the cells' DD-Ranking evaluations, where there are any: a
// section of md (one table, each grid row's distilled, hard and random-image accuracies and
// its hlr / ior / score) and SummaryDDRankingCSV (one line per evaluated cell).
func writeDDRankingSummary(g *Grid, dir string, done map[string]summaryCell, md *strings.Builder) error {
	evaluated := 0
	settings := map[string]bool{}
	augment := func(r *artifact.DDRankingResult) string {
		name, _, _ := strings.Cut(r.Recipe.Augment, ":") // "dsa: its parameters" or "none"
		return name
	}
	setting := func(r *artifact.DDRankingResult) string {
		return fmt.Sprintf("%s, %d epochs, %d runs, augmentation %s", r.Arch, r.Recipe.Epochs, r.Models, augment(r))
	}
	for _, sc := range done {
		if sc.ddr != nil {
			evaluated++
			settings[setting(sc.ddr)] = true
		}
	}
	if evaluated == 0 {
		// None (any more): no table of earlier evaluations is left beside the summary.
		if err := os.Remove(filepath.Join(dir, SummaryDDRankingCSV)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	var csvBuf bytes.Buffer
	w := csv.NewWriter(&csvBuf)
	w.Write([]string{"row", "column", "arch", "epochs", "runs", "seed", "augment", "full_data", "hard_label", "hard_label_std",
		"soft_label", "soft_label_std", "random_soft_label", "random_soft_label_std", "hlr", "hlr_std", "ior", "ior_std",
		"score", "score_std", "wall_seconds", "folder"})
	f4 := func(v float64) string { return strconv.FormatFloat(v, 'f', 4, 64) }
	for _, row := range g.Rows {
		for _, col := range g.Columns {
			sc, ok := done[slug(row.Label)+"__"+slug(col.Label)]
			if !ok || sc.ddr == nil {
				continue
			}
			r := sc.ddr
			w.Write([]string{row.Label, col.Label, r.Arch, strconv.Itoa(r.Recipe.Epochs), strconv.Itoa(r.Models), strconv.FormatInt(r.Seed, 10),
				augment(r), f4(r.FullData.Accuracy), f4(r.HardLabel.Mean), f4(r.HardLabel.Std),
				f4(r.SoftLabel.Mean), f4(r.SoftLabel.Std), f4(r.RandomSoftLabel.Mean), f4(r.RandomSoftLabel.Std),
				f4(r.HLR), f4(r.HLRStd), f4(r.IOR), f4(r.IORStd), f4(r.Score), f4(r.ScoreStd),
				strconv.FormatFloat(r.WallSeconds, 'f', 1, 64), filepath.Join(CellsFolder, sc.cell.ID)})
		}
	}
	w.Flush()
	if err := atomicfile.WriteFile(filepath.Join(dir, SummaryDDRankingCSV), csvBuf.Bytes()); err != nil {
		return err
	}

	var list []string
	for s := range settings {
		list = append(list, s)
	}
	slices.Sort(list)
	fmt.Fprintf(md, "\n## The benchmark protocol (DD-Ranking's soft-label evaluation)\n\n")
	fmt.Fprintf(md, "`ldtorch evaluate --protocol ddranking` of %d of %d finished cells (%s): test accuracy as a fraction, "+
		"mean ± population std over the runs, the learning rate and epoch of each chosen on validation; hlr, ior and "+
		"score as DD-Ranking defines them (docs/ALGORITHM.md §13); – = not evaluated.\n\n", evaluated, len(done), strings.Join(list, "; "))
	tableHeader(md, g.Columns)
	for _, row := range g.Rows {
		for _, line := range []struct {
			label string
			text  func(r *artifact.DDRankingResult) string
		}{
			{"distilled labels", func(r *artifact.DDRankingResult) string { return f4(r.SoftLabel.Mean) + " ± " + f4(r.SoftLabel.Std) }},
			{"hard labels, same images", func(r *artifact.DDRankingResult) string { return f4(r.HardLabel.Mean) + " ± " + f4(r.HardLabel.Std) }},
			{"random images, teacher's labels", func(r *artifact.DDRankingResult) string {
				return f4(r.RandomSoftLabel.Mean) + " ± " + f4(r.RandomSoftLabel.Std)
			}},
			{"hlr / ior / score", func(r *artifact.DDRankingResult) string { return f4(r.HLR) + " / " + f4(r.IOR) + " / " + f4(r.Score) }},
		} {
			md.WriteString("| " + row.Label + ": " + line.label + " |")
			for _, col := range g.Columns {
				text := "–"
				if sc, ok := done[slug(row.Label)+"__"+slug(col.Label)]; ok && sc.ddr != nil {
					text = line.text(sc.ddr)
					if len(settings) > 1 {
						text += " (" + setting(sc.ddr) + ")"
					}
				}
				md.WriteString(" " + text + " |")
			}
			md.WriteString("\n")
		}
	}
	md.WriteString("\nPer-cell full-data accuracy, seeds and wall times: " + SummaryDDRankingCSV + ".\n")
	return nil
}

// tableHeader writes a Markdown table's header: an empty corner, then one column per grid
// column.
func tableHeader(md *strings.Builder, cols GridAxis) {
	md.WriteString("| |")
	for _, c := range cols {
		md.WriteString(" " + c.Label + " |")
	}
	md.WriteString("\n|---|" + strings.Repeat("---|", len(cols)) + "\n")
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
func MethodNameOf(method string) string { return config.MethodLabel(method) }

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
