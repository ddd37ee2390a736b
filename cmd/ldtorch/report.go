// report.go: `ldtorch report DIR` (figures and report.html from a run's output folder),
// `distill --report` (the same at the end of a run), and `ldtorch gradvar DIR` (the label
// meta-gradient's variance for LD and LD RR on one run's labels).

package main

import (
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
	"github.com/ldtorch/ldtorch/labeldistill/report"
	"github.com/ldtorch/ldtorch/torch/atomicfile"
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
	return writeReport(e.stdout, dir, c.String("data-dir"))
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
		return "", usageErrorf("%s holds no %s (not the --out folder of a finished distill run)", dir, artifact.DistilledFile)
	}
	return dir, nil
}

// writeReport writes the report of dir and says where it is.
func writeReport(w io.Writer, dir, dataDir string) error {
	res, err := report.Write(dir, report.Options{DataDir: dataDir})
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return failuref("report: %v", err)
		}
		return failuref("%v", err)
	}
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
			&cli.IntFlag{Name: "threads", Usage: "libtorch intra-op `THREADS` (0: libtorch's default)"},
			&cli.StringFlag{Name: "device", Value: "", Usage: "`DEVICE` (default: the run's)"},
		},
		Action: e.gradvarAction,
	}
}

func (e *env) gradvarAction(c *cli.Context) error {
	dir, err := oneDirArg(c)
	if err != nil {
		return err
	}
	if c.Int("models") < 2 {
		return usageErrorf("--models: need at least 2, got %d", c.Int("models"))
	}
	if c.Int("batches") < 1 {
		return usageErrorf("--batches: need at least 1, got %d", c.Int("batches"))
	}
	art, err := artifact.Read(dir)
	if err != nil {
		return failuref("%v", err)
	}
	if art.Report == nil {
		return usageErrorf("%s holds no %s", dir, artifact.ReportFile)
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
	}
	var labels []float32
	switch c.String("labels") {
	case "distilled":
		labels = art.Labels
	case "uniform":
	default:
		return usageErrorf("--labels: want distilled or uniform, got %q", c.String("labels"))
	}
	ds, err := labeldistill.LoadData(cfg)
	if err != nil {
		return usageErrorf("%v", err)
	}
	// The artifact's own base images, whatever the data selection would pick today.
	if len(ds.Base.Images) != len(art.Images) {
		return usageErrorf("%s: the artifact holds %d base image values, the run's data %d", dir, len(art.Images), len(ds.Base.Images))
	}
	ds.Base.Images = art.Images
	if c.Int("warmup") < 0 {
		return usageErrorf("--warmup: must be 0 or positive, got %d", c.Int("warmup"))
	}
	g := labeldistill.GradVarOptions{Methods: []string{config.MethodLD, config.MethodRR},
		Models: c.Int("models"), Batches: c.Int("batches"), Warmup: c.Int("warmup")}
	out, err := labeldistill.MeasureGradVariance(c.Context, cfg, labels, g, labeldistill.WithData(ds))
	if err != nil {
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
