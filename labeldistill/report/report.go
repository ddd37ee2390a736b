// Package report draws what a label-distillation run learnt, from its output folder
// alone: the paper's analysis figures (label distributions per original class, example
// labels, label-weighted reconstructions of each target class, the label meta-gradient's
// variance), learning curves from the run history and the accuracy summary, as PNG files in
// DIR/figures and one report.html beside them. It never prints; it returns what it wrote.
package report

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/labeldistill/engine"
	"github.com/ldtorch/ldtorch/labeldistill/gradvar"
	"github.com/ldtorch/ldtorch/labeldistill/rundir"
	"github.com/ldtorch/ldtorch/torch/fileio/atomicfile"
	"github.com/ldtorch/ldtorch/torch/fileio/boundedread"
)

// File names inside an output folder.
const (
	HTMLFile    = "report.html"
	FiguresDir  = "figures"
	GradVarJSON = "gradvar.json" // written by `ldtorch gradvar --out DIR`
)

// Options control Write.
type Options struct {
	// DataDir is where the target dataset is read from for real examples beside the
	// reconstructions ("" = the run's data_dir). When it cannot be read, the
	// reconstructions are drawn alone and Result.Notes says why.
	DataDir string
	// RealExamples per target class beside its reconstruction (default 3).
	RealExamples int
	// Examples is the number of base images in the example-labels figure (default 10).
	Examples int
	// Context, when set, ends the report at the next figure once it is done: Write then
	// returns its error, report.html unwritten (nil: never).
	Context context.Context
}

// Figure is one written figure.
type Figure struct {
	Name    string // file name inside DIR/figures
	Title   string
	Caption string
}

// Result is what Write produced.
type Result struct {
	HTML    string // path of report.html
	Figures []Figure
	Notes   []string // what could not be drawn, and why
	// Recovered is how many base examples' label arg-max is their true class (within a
	// dataset; -1 across datasets).
	Recovered, BaseExamples int
	// Base says where the base examples came from (report.json base_origin, or what the
	// config says for a report written before it was recorded).
	Base string
	// DDRanking is the benchmark evaluation (evaluations/ddranking.json, written by
	// `ldtorch evaluate --protocol ddranking`), nil when the folder has none.
	DDRanking *artifact.DDRankingResult
}

// GradVarFile is gradvar.json: the label meta-gradient's variance across fresh models at
// one label state, per method (see labeldistill.MeasureGradVariance).
type GradVarFile struct {
	Labels  string           `json:"labels"` // where the label state came from
	Models  int              `json:"models"`
	Batches int              `json:"batches"`
	Warmup  int              `json:"warmup"` // steps each fresh model trained on the labels first
	Methods []gradvar.Method `json:"methods"`
}

// figureName is a dataset's name short enough for a figure's title: an image folder by its
// last path element ("imagefolder:…/flowers"); the captions and report.html give it whole.
func figureName(name string) string {
	if path, ok := data.ImageFolderPath(name); ok {
		return "imagefolder:…/" + filepath.Base(path)
	}
	return name
}

// maxGradVarBytes bounds gradvar.json: per method, one record per batch pair (at most
// config.MaxGradVarBatches).
const maxGradVarBytes = 16 << 20

// Write reads the artifact in dir (distilled.npz, report.json, and metrics.jsonl when
// present) and writes dir/figures/*.png and dir/report.html.
func Write(dir string, opt Options) (res *Result, err error) {
	defer func() {
		if r := recover(); r != nil { // the plotting library panics on some degenerate input
			res, err = nil, fmt.Errorf("report: internal error while drawing: %v", r)
		}
	}()
	if opt.RealExamples == 0 {
		opt.RealExamples = 3
	}
	if opt.Examples == 0 {
		opt.Examples = 10
	}
	art, err := artifact.Read(dir)
	if err != nil {
		return nil, err
	}
	if art.Report == nil {
		return nil, fmt.Errorf("report: %s has no %s", dir, artifact.ReportFile)
	}
	rep := art.Report
	res = &Result{HTML: filepath.Join(dir, HTMLFile), Recovered: -1, BaseExamples: int(art.Shape[0]), Base: BaseOrigin(rep)}
	hist, err := rundir.ReadHistory(filepath.Join(dir, rundir.HistoryFile))
	_, lerr := os.Lstat(filepath.Join(dir, rundir.HistoryFile))
	switch {
	case errors.Is(err, os.ErrNotExist) && errors.Is(lerr, os.ErrNotExist): // a link to nothing is not "no history"
		res.Notes = append(res.Notes, "no run history ("+rundir.HistoryFile+"): learning curves not drawn")
	case err != nil:
		return nil, err
	}
	if len(hist) > 0 {
		if why := historyMismatch(hist, rep); why != "" {
			res.Notes = append(res.Notes, rundir.HistoryFile+" is not this artifact's history ("+why+"): learning curves not drawn")
			hist = nil
		}
	}
	var gv *GradVarFile
	gvPath := filepath.Join(dir, GradVarJSON)
	switch b, err := boundedread.ReadRegularFile(gvPath, maxGradVarBytes, "gradient-variance file"); {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		gv = &GradVarFile{}
		if err := json.Unmarshal(b, gv); err != nil {
			return nil, fmt.Errorf("%s: %w", gvPath, config.JSONError(b, err))
		}
	}
	if res.DDRanking, err = artifact.ReadDDRanking(dir); err != nil {
		return nil, err
	}
	if r := res.DDRanking; r != nil && r.DistilledSHA256 != "" && rep.Distilled != nil && r.DistilledSHA256 != rep.Distilled.SHA256 {
		res.Notes = append(res.Notes, fmt.Sprintf("%s/%s evaluated another distilled.npz (sha256 %s, this artifact's %s): not shown",
			artifact.EvaluationsFolder, artifact.DDRankingFile, r.DistilledSHA256[:min(12, len(r.DistilledSHA256))], rep.Distilled.SHA256[:min(12, len(rep.Distilled.SHA256))]))
		res.DDRanking = nil
	}
	res.Notes = append(res.Notes, artifact.DDRankingInProgress(dir)...)
	figDir := filepath.Join(dir, FiguresDir)
	if err := os.MkdirAll(figDir, 0o755); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	save := func(f Figure, png []byte) error {
		if opt.Context != nil && opt.Context.Err() != nil {
			return opt.Context.Err()
		}
		if png == nil {
			return nil
		}
		if err := atomicfile.WriteFile(filepath.Join(figDir, f.Name), png); err != nil {
			return err
		}
		res.Figures = append(res.Figures, f)
		return nil
	}

	cfg := rep.Config
	classes := art.Classes
	cross := cfg.Source != "" && cfg.Source != cfg.Dataset
	targetNames := namesOr(rep.ClassNames, classes)
	n := int(art.Shape[0])
	c, h, w := int(art.Shape[1]), int(art.Shape[2]), int(art.Shape[3])
	baseClasses := art.BaseClasses
	if baseClasses == nil {
		baseClasses = rep.BaseClasses
	}
	if len(baseClasses) != n && len(art.BaseIndices) == n {
		// An artifact from before schema 2: the classes from the source's train labels.
		var note string
		if baseClasses, note = classesFromIndices(cfg, opt, art.BaseIndices); note != "" {
			res.Notes = append(res.Notes, note)
		}
	}
	if len(rep.SourceClassNames) == 0 {
		rep.SourceClassNames, _ = artifact.DatasetInfo(cfg.Source)
	}
	if len(rep.ClassNames) == 0 {
		rep.ClassNames, _ = artifact.DatasetInfo(cfg.Dataset)
		targetNames = namesOr(rep.ClassNames, classes)
	}
	sourceClasses := len(rep.SourceClassNames)
	for _, s := range baseClasses {
		sourceClasses = max(sourceClasses, int(s)+1)
	}
	sourceNames := namesOr(rep.SourceClassNames, sourceClasses)
	norm := rep.Normalisation
	if len(norm.Mean) == 0 {
		_, norm = artifact.DatasetInfo(cfg.Source)
	}
	pix, err := Pixels(art.Images, c, h*w, norm)
	if err != nil {
		return nil, err
	}

	imagesLearnt := rep.LearntImages()
	labelsLearnt := !imagesLearnt || slices.Contains(rep.Learnt, artifact.LearntLabels)
	// Images and labels learnt together start as noise with uniform labels: the classes of
	// the base examples they stand in for say nothing about them, their labels' arg-max does.
	bothLearnt := imagesLearnt && labelsLearnt
	imageClasses := baseClasses
	if bothLearnt {
		imageClasses = ArgMaxClasses(art.Labels, classes)
	}
	// 1. Label distribution per original class.
	if !labelsLearnt {
		res.Notes = append(res.Notes, "the labels are the learnt images' fixed one-hot classes: label distribution not drawn")
	} else if bothLearnt {
		res.Notes = append(res.Notes, "images and labels were learnt together from noise and uniform labels: the images have no original class; label distribution not drawn")
	} else if len(baseClasses) == n {
		d, err := MeanLabelPerClass(art.Labels, classes, baseClasses, sourceClasses)
		if err != nil {
			return nil, err
		}
		subtitle := fmt.Sprintf("%d base examples from %s", n, figureName(cfg.Source))
		if !cross {
			res.Recovered = Recovered(art.Labels, classes, baseClasses)
			subtitle = fmt.Sprintf("arg-max recovers the true class for %d of %d base examples (%.0f%%)",
				res.Recovered, n, 100*float64(res.Recovered)/float64(n))
		}
		png, err := labelDistributionFigure(d, targetNames, shortNames(sourceNames, 12), subtitle)
		if err != nil {
			return nil, err
		}
		caption := "Each row averages the distilled labels of the base examples of one original class (" + cfg.Source +
			" classes; the number of such examples in brackets); columns are the target classes (" + cfg.Dataset +
			"). Values of at least 0.05 are printed."
		if err := save(Figure{Name: "label_distribution.png", Title: "Label distribution per original class", Caption: caption}, png); err != nil {
			return nil, err
		}
	} else {
		res.Notes = append(res.Notes, "the artifact does not record the base examples' classes (written before schema 2): label distribution not drawn")
	}

	// 2. Example labels.
	picks := examplePicks(imageClasses, n, opt.Examples)
	titles := make([]string, len(picks))
	for k, i := range picks {
		titles[k] = fmt.Sprintf("base #%d", i)
		if imagesLearnt {
			titles[k] = fmt.Sprintf("learnt #%d", i)
		}
		if bothLearnt {
			titles[k] += " (" + targetNames[imageClasses[i]] + ")"
		} else if len(baseClasses) == n {
			titles[k] += " (" + sourceNames[baseClasses[i]] + ")"
		}
	}
	png, err := exampleLabelsFigure(pix, art.Shape, art.Labels, classes, picks, titles, targetNames)
	if err != nil {
		return nil, err
	}
	caption := "Base images (their original " + cfg.Source + " class in brackets) beside their distilled labels over the " + cfg.Dataset + " classes."
	if bothLearnt {
		caption = "Learnt images (their label's arg-max in brackets; pixels clamped to [0, 1]) beside their learnt labels over the " + cfg.Dataset + " classes."
	} else if imagesLearnt {
		caption = "Learnt images (their class in brackets; pixels clamped to [0, 1]) beside their fixed one-hot labels over the " + cfg.Dataset + " classes."
	}
	if classes > maxLabelBars {
		caption += fmt.Sprintf(" Each chart shows the label's %d largest of its %d classes, largest first, on its own scale.", topLabelBars, classes)
	}
	if err := save(Figure{Name: "example_labels.png", Title: "Example labels", Caption: caption}, png); err != nil {
		return nil, err
	}
	if imagesLearnt {
		// 3. The learnt images per class beside real ones (in place of reconstructions).
		real, note := realExamples(cfg, opt, classes, c, h*w, norm)
		if note != "" {
			res.Notes = append(res.Notes, note)
		}
		rows := min(classes, 20)
		subtitle := fmt.Sprintf("%s, %d images; pixels clamped to [0, 1]", cfg.MethodName(), n)
		if bothLearnt {
			subtitle += "\nrow: the arg-max of each image's learnt label"
		}
		if classes > rows {
			subtitle += fmt.Sprintf("; first %d of %d classes", rows, classes)
		}
		const perRow = 10
		if shown := imagesShown(imageClasses, rows, perRow); shown < n {
			subtitle += fmt.Sprintf("; at most %d a row: %d of the %d images shown", perRow, shown, n)
		}
		if real != nil {
			real = real[:rows]
		}
		png, err := learntImagesFigure(pix, imageClasses, real, c, h, w, shortNames(targetNames, 12)[:rows], perRow, subtitle)
		if err != nil {
			return nil, err
		}
		classOf := "its images' fixed class"
		if bothLearnt {
			classOf = "the images whose learnt label's arg-max is the class"
		}
		if err := save(Figure{Name: "learnt_images.png", Title: "Learnt images",
			Caption: "Left: up to " + fmt.Sprint(perRow) + " learnt images of each class (" + classOf + "), as the model sees them after undoing the normalisation, clamped to [0, 1]; right: real " +
				cfg.Dataset + " test images of the class."}, png); err != nil {
			return nil, err
		}
	}

	// 3. Reconstructions beside real examples (of real base images).
	if !imagesLearnt {
		recon, err := Reconstruct(pix, c*h*w, art.Labels, classes)
		if err != nil {
			return nil, err
		}
		real, note := realExamples(cfg, opt, classes, c, h*w, norm)
		if note != "" {
			res.Notes = append(res.Notes, note)
		}
		maxRows := min(classes, 20)
		subtitle := fmt.Sprintf("%s base images → %s classes (contrast stretched)", figureName(cfg.Source), figureName(cfg.Dataset))
		if classes > maxRows {
			subtitle += fmt.Sprintf("; first %d of %d classes", maxRows, classes)
		}
		if real != nil {
			real = real[:maxRows]
		}
		png, err = reconstructionFigure(recon[:maxRows], real, c, h, w, shortNames(targetNames, 12)[:maxRows], subtitle)
		if err != nil {
			return nil, err
		}
		if err := save(Figure{Name: "reconstructions.png", Title: "Reconstructed class images",
			Caption: "Left column: for each target class c, Σ_i y_ic x_i / Σ_i y_ic over the base images x_i (pixels in [0, 1]) with their distilled labels y, " +
				"stretched to the full grey range; second column: the same minus the mean of all classes' combinations (the class-specific part), stretched; right: real " + cfg.Dataset + " test images of the class. " +
				"Labels that put weight on images resembling the class make its combination resemble it (the paper's Figure on reconstructed images)."}, png); err != nil {
			return nil, err
		}
	}

	// 4. Learning curves.
	if len(hist) > 0 {
		kept := "labels"
		switch {
		case bothLearnt:
			kept = "images and labels"
		case imagesLearnt:
			kept = "images"
		}
		png, err := learningCurvesFigure(hist, rep.Resets, kept)
		if err != nil {
			return nil, err
		}
		if err := save(Figure{Name: "learning_curves.png", Title: "Learning curves",
			Caption: "From " + rundir.HistoryFile + ": the meta-loss and top-1 error of each meta-step's target batch, the moving error the reset rule watches, " +
				"the validation accuracy of a fresh model (the " + kept + " kept are the best validated), and T with the model resets and the meta-steps a resumed run went on from."}, png); err != nil {
			return nil, err
		}
	}

	// 5. Accuracy summary.
	entries, improvements := accuracies(rep)
	png, err = accuracyFigure(entries, improvements)
	if err != nil {
		return nil, err
	}
	if err := save(Figure{Name: "accuracy.png", Title: "Accuracy summary",
		Caption: "Test accuracy of fresh models trained on the same base images with the distilled labels and with each baseline's labels (mean ± population std over the models); " +
			"right: the distilled labels' gain over each baseline, distilled minus true labels being the community's improvement-over-random figure."}, png); err != nil {
		return nil, err
	}

	// 6. Meta-gradient variance.
	// The history's gradient is the first learnt parameter's: the labels' where labels are
	// learnt, else the images' (learn images, method dd), which gradvar does not measure.
	grad, title := labelGradient, "Label meta-gradient variance"
	if !labelsLearnt {
		grad, title, gv = imageGradient, "Image meta-gradient variance", nil
	}
	png, err = metaGradientFigure(hist, gv, grad)
	if err != nil {
		return nil, err
	}
	if png != nil {
		caption := "From the run history (" + rundir.HistoryFile + "): the norm of each meta-step's " + grad.what + " meta-gradient " + grad.symbol +
			" and, per window of grad_var_window meta-steps, its per-element variance over the window (grad_var)."
		switch {
		case !labelsLearnt:
			caption += " The images are learnt (" + rep.Config.MethodName() + "), so the gradient is the images'; `ldtorch gradvar` measures the label meta-gradient of learnt labels for real base images and does not apply."
		case gv != nil:
			caption += fmt.Sprintf(" Last panel: its variance across %d fresh models, each trained %d steps on the %s labels, at those labels, with the same base and target batches, per method (%s); the paper's Figure on RR reducing the meta-gradient variance.", gv.Models, gv.Warmup, gv.Labels, GradVarJSON)
		case !rep.LearntImages():
			caption += " Run `ldtorch gradvar " + dir + "` to add LD against LD RR across fresh models."
		}
		if err := save(Figure{Name: "gradient_variance.png", Title: title, Caption: caption}, png); err != nil {
			return nil, err
		}
	}

	html, err := renderHTML(dir, rep, res, entries, improvements)
	if err != nil {
		return nil, err
	}
	if opt.Context != nil && opt.Context.Err() != nil {
		return nil, opt.Context.Err()
	}
	if err := atomicfile.WriteFile(res.HTML, html); err != nil {
		return nil, err
	}
	return res, nil
}

// historyMismatch says why a history does not belong to the artifact's run ("" when it
// does): another run's settings, or a run that has not ended with this artifact's test
// accuracy (a later run into the same folder, still going or failed).
func historyMismatch(hist []rundir.HistoryRecord, rep *artifact.Report) string {
	start := hist[0]
	if start.Kind != rundir.HistoryStart {
		return "no start line"
	}
	if start.Method != rep.Method || start.Dataset != rep.Target || start.Seed != rep.Seed || start.BaseExamples != rep.BaseExamples {
		return fmt.Sprintf("its run is %s on %s, %d base, seed %d", start.Method, start.Dataset, start.BaseExamples, start.Seed)
	}
	for _, r := range hist {
		if r.Kind == rundir.HistoryPhase && r.Name == "test" && r.Mean == rep.TestMean {
			return ""
		}
	}
	return "it has no final test with this artifact's accuracy"
}

func namesOr(names []string, n int) []string {
	if len(names) >= n {
		return names[:n]
	}
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(i)
	}
	return out
}

func shortNames(names []string, k int) []string {
	out := make([]string, len(names))
	for i, s := range names {
		out[i] = shortName(s, k)
	}
	return out
}

// examplePicks chooses base examples to show: the first of each original class (in class
// order), then more in order, up to k.
func examplePicks(baseClasses []int64, n, k int) []int {
	k = min(k, n)
	var picks []int
	taken := map[int]bool{}
	if len(baseClasses) == n {
		seen := map[int64]bool{}
		for i, s := range baseClasses {
			if !seen[s] && len(picks) < k {
				seen[s] = true
				picks = append(picks, i)
				taken[i] = true
			}
		}
		sort.Slice(picks, func(a, b int) bool { return baseClasses[picks[a]] < baseClasses[picks[b]] })
	}
	for i := 0; len(picks) < k && i < n; i++ {
		if !taken[i] {
			picks = append(picks, i)
		}
	}
	return picks
}

// classesFromIndices looks the base examples' classes up in the source's train labels.
func classesFromIndices(cfg config.Config, opt Options, idx []int64) ([]int64, string) {
	dir := cfg.DataDir
	if opt.DataDir != "" {
		dir = opt.DataDir
	}
	raw, err := data.LoadRaw(cfg.Source, data.Options{DataDir: dir, Transpose: cfg.EMNISTTranspose})
	if err != nil {
		return nil, fmt.Sprintf("the artifact does not record its base examples' classes and %s could not be read (%v): label distribution not drawn", cfg.Source, err)
	}
	out := make([]int64, len(idx))
	for i, j := range idx {
		if j < 0 || int(j) >= len(raw.Train.Labels) {
			return nil, fmt.Sprintf("base index %d is outside %s's %d train images: label distribution not drawn", j, cfg.Source, len(raw.Train.Labels))
		}
		out[i] = raw.Train.Labels[j]
	}
	return out, ""
}

// realExamples reads k test images of each target class (as [0, 1] pixels), or says why not.
// The test images are normalised as the run's were: the artifact's normalisation, or the
// target's own when the artifact's is a registered source's (an image folder's, computed
// from its train images, has no registry entry).
func realExamples(cfg config.Config, opt Options, classes, channels, pixels int, norm artifact.Normalisation) ([][][]float64, string) {
	if opt.DataDir != "" {
		cfg.DataDir = opt.DataDir
	}
	if opt.Context != nil && opt.Context.Err() != nil {
		return nil, "interrupted"
	}
	test, err := engine.LoadTestSplit(cfg)
	if err != nil {
		return nil, fmt.Sprintf("real %s examples not shown beside the reconstructions: %v", cfg.Dataset, err)
	}
	if _, tn := artifact.DatasetInfo(cfg.Dataset); len(tn.Mean) > 0 {
		norm = tn
	} else if len(cfg.NormMean) == channels && len(cfg.NormStd) == channels {
		norm = artifact.Normalisation{Mean: cfg.NormMean, Std: cfg.NormStd}
	}
	if len(norm.Mean) != channels {
		return nil, fmt.Sprintf("real %s examples not shown beside the reconstructions: no normalisation of its %d channel(s) is known", cfg.Dataset, channels)
	}
	size := channels * pixels
	out := make([][][]float64, classes)
	for i, y := range test.Labels {
		if y < 0 || int(y) >= classes || len(out[y]) >= opt.RealExamples || (i+1)*size > len(test.Images) {
			continue
		}
		p, err := Pixels(test.Images[i*size:(i+1)*size], channels, pixels, norm)
		if err != nil {
			return nil, err.Error()
		}
		out[y] = append(out[y], p)
	}
	return out, ""
}

// BaseOrigin says in one line where a run's base examples came from: its record's
// base_origin, or, for a report written before that was recorded, what its config says.
func BaseOrigin(rep *artifact.Report) string {
	if rep.BaseOrigin != nil {
		return rep.BaseOrigin.Describe()
	}
	cfg := rep.Config
	if cfg.BaseIndices != nil {
		return fmt.Sprintf("given (%d base_indices; the report does not record their file or classes)", len(cfg.BaseIndices))
	}
	return fmt.Sprintf("drawn by the run (%s, with its base seed)", cfg.BaseSelection)
}

// imagesShown is how many of the images of classes classOf the learnt-image grid draws: at
// most perRow of each of the first rows classes.
func imagesShown(classOf []int64, rows, perRow int) int {
	count := make([]int, rows)
	shown := 0
	for _, c := range classOf {
		if c >= 0 && int(c) < rows && count[c] < perRow {
			count[c]++
			shown++
		}
	}
	return shown
}
