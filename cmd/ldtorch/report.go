// report.go: `ldtorch report DIR` (figures and report.html from a run's output folder),
// `distill --report` (the same at the end of a run), and `ldtorch gradvar DIR` (the label
// meta-gradient's variance for LD and LD RR on one run's labels).

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/gradvar"
	"github.com/ldtorch/ldtorch/labeldistill/report"
	"github.com/ldtorch/ldtorch/torch/fileio/atomicfile"
)

func (e *env) reportCommand() *cli.Command {
	return &cli.Command{
		Name:      "report",
		Usage:     "draw a run's figures and write DIR/report.html",
		UsageText: "ldtorch report DIR [--data-dir DIR]",
		Description: "Reads DIR/distilled.npz, DIR/report.json and, when present, DIR/metrics.jsonl and DIR/gradvar.json, " +
			"and writes DIR/figures/*.png (label distribution per original class, example labels, label-weighted " +
			"reconstructions beside real target images, learning curves, accuracy summary, meta-gradient variance) " +
			"and DIR/report.html, which shows them. Real target images are read from --data-dir (default: the run's).",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "data-dir", Usage: "`DIR` holding the datasets, for real examples beside the reconstructions (default: the run's data_dir)"},
		},
		Action: e.reportAction,
	}
}

func (e *env) reportAction(c *cli.Context) error {
	dir, err := oneDirArg(c)
	if err != nil {
		return err
	}
	if err := atomicfile.EnsureWritableDir(dir); err != nil { // before the figures are drawn
		return usageErrorf("%s is not writable, so %s and %s/ cannot be written: %v", dir, report.HTMLFile, report.FiguresDir, unwrapPath(err))
	}
	return writeReport(c.Context, e.stdout, dir, c.String("data-dir"), "")
}

// oneDirArg is the single folder argument of report and gradvar.
func oneDirArg(c *cli.Context) (string, error) {
	if c.NArg() != 1 {
		return "", usageErrorf("want one output folder (ldtorch %s DIR), got %d arguments", c.Command.Name, c.NArg())
	}
	dir := c.Args().First()
	st, err := os.Stat(dir)
	if err != nil || !st.IsDir() {
		return "", usageErrorf("%s is not a folder", dir)
	}
	if _, err := os.Stat(filepath.Join(dir, artifact.DistilledFile)); err != nil {
		return "", noArtifactError("", dir, fmt.Sprintf("holds no %s (not the --out folder of a finished distill run)", artifact.DistilledFile))
	}
	return dir, nil
}

// writeReport writes the report of dir and says where it is; a signal (ctx) ends it at the
// next figure, what (prefix) came before it said in the interruption's message.
func writeReport(ctx context.Context, w io.Writer, dir, dataDir, prefix string) error {
	res, err := report.Write(dir, report.Options{DataDir: dataDir, Context: ctx})
	if err != nil && ctx.Err() != nil {
		return &exitError{code: exitInterrupted, msg: fmt.Sprintf("%sinterrupted while drawing the report: %s not written (the figures drawn before are in %s); ldtorch report %s draws it whole",
			prefix, filepath.Join(dir, report.HTMLFile), filepath.Join(dir, report.FiguresDir), shellQuote(dir))}
	}
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return failuref("report: %v", err)
		}
		return failuref("%v", err)
	}
	fmt.Fprintf(w, "base examples: %s\n", res.Base)
	if r := res.DDRanking; r != nil {
		fmt.Fprintf(w, "DD-Ranking protocol (%s, %d runs, %d epochs; fractions): hlr %.4f ± %.4f, ior %.4f ± %.4f, score %.4f ± %.4f\n",
			r.Arch, r.Models, r.Recipe.Epochs, r.HLR, r.HLRStd, r.IOR, r.IORStd, r.Score, r.ScoreStd)
	}
	for _, n := range res.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	names := make([]string, len(res.Figures))
	for i, f := range res.Figures {
		names[i] = f.Name
	}
	fmt.Fprintf(w, "figures: %s/ (%s)\n", filepath.Join(dir, report.FiguresDir), strings.Join(names, ", "))
	fmt.Fprintf(w, "report: %s\n", res.HTML)
	return nil
}

func (e *env) gradvarCommand() *cli.Command {
	return &cli.Command{
		Name:      "gradvar",
		Usage:     "measure the label meta-gradient's variance across fresh models, LD against LD RR, on a run's labels",
		UsageText: "ldtorch gradvar DIR [--models M] [--batches B] [--labels distilled|uniform]",
		Description: "Holds the labels of DIR's artifact (or uniform labels) fixed, draws B fixed (base batch, target batch) pairs, " +
			"trains M fresh models (the same initialisations for both methods) --warmup steps on the labels, takes one label meta-gradient per model with LD " +
			"and with LD RR, and reports the per-element variance across the models, averaged over the N×C elements and " +
			"the batches (the paper's Figure \"RR-based LD reduces synthetic label meta-gradient variance\"). " +
			"Writes DIR/gradvar.json, which `ldtorch report` draws.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "models", Value: 20, Usage: "fresh models `M` per batch"},
			&cli.IntFlag{Name: "batches", Value: 5, Usage: "fixed (base, target) batch pairs `B`"},
			&cli.IntFlag{Name: "warmup", Value: 100, Usage: "train each fresh model `K` steps on the labels before its gradient (0: at initialisation)"},
			&cli.StringFlag{Name: "labels", Value: "distilled", Usage: "label state: distilled (the artifact's) or uniform (the start of a run)"},
			&cli.StringFlag{Name: "data-dir", Usage: "`DIR` holding the datasets (default: the run's data_dir)"},
			&cli.IntFlag{Name: "threads", Usage: setting("threads").Help},
			&cli.StringFlag{Name: "device", Value: "", Usage: "`DEVICE` (default: the run's)"},
			&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print no progress"},
			&cli.BoolFlag{Name: "allow-unknown-data", Usage: "accept data files whose checksums the registry does not know (default: the run's setting)"},
		},
		Action: e.gradvarAction,
	}
}

func (e *env) gradvarAction(c *cli.Context) error {
	dir, err := oneDirArg(c)
	if err != nil {
		return err
	}
	// Every count is checked before anything is read or trained.
	if err := countFlag("models", c.Int("models"), 2, config.MaxEvalModels, config.WhyGradVarModels); err != nil {
		return err
	}
	if err := countFlag("batches", c.Int("batches"), 1, config.MaxGradVarBatches, "each batch pair trains every model anew"); err != nil {
		return err
	}
	if err := countFlag("warmup", c.Int("warmup"), 0, config.MaxTrainSteps, config.WhySteps); err != nil {
		return err
	}
	if t := c.Int("threads"); t != 0 {
		if err := countFlag("threads", t, 1, config.MaxThreads(), config.WhyThreads); err != nil {
			return err
		}
	}
	var uniform bool
	switch c.String("labels") {
	case "distilled":
	case "uniform":
		uniform = true
	default:
		return usageErrorf("--labels: want distilled or uniform, got %q", c.String("labels"))
	}
	art, err := artifact.Read(dir)
	if err != nil {
		return usageErrorf("%v", err)
	}
	if art.Report == nil {
		return usageErrorf("%s holds no %s", dir, artifact.ReportFile)
	}
	if art.Report.LearntImages() {
		return usageErrorf("%s holds learnt images (%s): gradvar measures the label meta-gradient for real base images, so it needs an artifact of learnt labels (learn labels)",
			dir, art.Report.Config.MethodName())
	}
	cfg := art.Report.Config
	if c.IsSet("data-dir") {
		cfg.DataDir = c.String("data-dir")
	}
	if c.IsSet("threads") {
		cfg.Threads = c.Int("threads")
	}
	if c.IsSet("device") {
		cfg.Device = c.String("device")
		if _, err := checkRuntime(cfg.Device); err != nil {
			return err
		}
	}
	if c.Bool("allow-unknown-data") {
		cfg.AllowUnknownData = true
	}
	// gradvar.json goes into the run's folder: it must be writable, and no other run may
	// be writing there, before minutes of training.
	if err := atomicfile.EnsureWritableDir(dir); err != nil {
		return usageErrorf("%s is not writable, so %s cannot be written: %v", dir, report.GradVarJSON, unwrapPath(err))
	}
	unlock, err := lockOut("", dir)
	if err != nil {
		return err
	}
	defer unlock()
	labels := art.Labels
	if uniform {
		labels = nil
	}
	pr := newProgress(e.stderr, false, c.Bool("quiet"))
	pr.note("gradvar of %s: reading %s data", dir, cfg.Dataset)
	ds, err := labeldistill.LoadData(cfg)
	if err != nil {
		return usageErrorf("%v", err)
	}
	warnDataChanges(e.stderr, art, ds.Files, ds.Warnings)
	// The artifact's own base images, whatever the data selection would pick today.
	if len(ds.Base.Images) != len(art.Images) {
		return usageErrorf("%s: the artifact holds %d base image values, the run's data %d", dir, len(art.Images), len(ds.Base.Images))
	}
	ds.Base.Images = art.Images
	g := gradvar.Options{Methods: []string{config.MethodLD, config.MethodRR},
		Models: c.Int("models"), Batches: c.Int("batches"), Warmup: c.Int("warmup")}
	pr.note("%d fresh models × %d batch pairs, LD and LD RR, each model warmed up %d steps", g.Models, g.Batches, g.Warmup)
	g.Progress = func(done, total int) {
		pr.note("%.0f%% (%d/%d batch pairs and methods measured)", 100*float64(done)/float64(total), done, total)
	}
	ctx := c.Context
	out, err := labeldistill.MeasureGradVariance(ctx, cfg, labels, g, labeldistill.WithData(ds))
	if err == nil && ctx.Err() != nil {
		err = ctx.Err()
	}
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, context.Canceled) {
			return &exitError{code: exitInterrupted, msg: "interrupted; " + report.GradVarJSON + " was not written"}
		}
		return failuref("%v", err)
	}
	file := report.GradVarFile{Labels: c.String("labels"), Models: g.Models, Batches: g.Batches, Warmup: g.Warmup, Methods: out}
	b, err := json.MarshalIndent(file, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, report.GradVarJSON), append(b, '\n')); err != nil {
		return failuref("%v", err)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintf(tw, "method\tvariance across %d models (mean over elements)\tmean square\trelative\n", file.Models)
	for _, m := range out {
		fmt.Fprintf(tw, "%s\t%.4g\t%.4g\t%.3f\n", m.Name, m.Variance.Variance, m.Variance.MeanSquare, m.Variance.Relative)
	}
	tw.Flush()
	if len(out) == 2 && out[1].Variance.Variance > 0 {
		fmt.Fprintf(e.stdout, "LD / LD RR variance ratio: %.3g (%s labels, %d batch pairs, models warmed up %d steps)\n", out[0].Variance.Variance/out[1].Variance.Variance, file.Labels, file.Batches, file.Warmup)
	}
	fmt.Fprintf(e.stdout, "written %s\n", filepath.Join(dir, report.GradVarJSON))
	return nil
}
