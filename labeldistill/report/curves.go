package report

// curves.go: the figures of a run's history and results: learning curves, accuracies, and
// the label meta-gradient's variance.

import (
	"fmt"
	"image/color"
	"math"
	"strconv"
	"strings"

	"github.com/ldtorch/ldtorch/labeldistill/rundir"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// series collects (step, value) points from history lines; non-finite values are left out.
func series(recs []rundir.HistoryRecord, kind string, value func(rundir.HistoryRecord) (float64, bool)) plotter.XYs {
	var xys plotter.XYs
	for _, r := range recs {
		if r.Kind != kind {
			continue
		}
		if v, ok := value(r); ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
			xys = append(xys, plotter.XY{X: float64(r.Step), Y: v})
		}
	}
	return xys
}

// clipped is xys with every coordinate held within ±axisLimit: a point is drawn at the
// edge of what an axis can span (gonum lays a panel out around every point, and points
// far outside its axis gave it NaN sizes). Log axes take the log10 first, well inside.
func clipped(xys plotter.XYs) plotter.XYs {
	out := make(plotter.XYs, len(xys))
	for i, xy := range xys {
		out[i] = plotter.XY{X: math.Max(-axisLimit, math.Min(xy.X, axisLimit)), Y: math.Max(-axisLimit, math.Min(xy.Y, axisLimit))}
	}
	return out
}

func addLine(p *plot.Plot, xys plotter.XYs, col color.Color, width float64, legend string) error {
	if len(xys) == 0 {
		return nil
	}
	l, err := plotter.NewLine(clipped(xys))
	if err != nil {
		return err
	}
	l.Color, l.Width = col, vg.Points(width)
	p.Add(l)
	if legend != "" {
		p.Legend.Add(legend, l)
	}
	return nil
}

// stdBars is ± std error bars at the points xys (stds[i] below and above xys[i]).
func stdBars(xys plotter.XYs, stds []float64) (*plotter.YErrorBars, error) {
	yerr := make(plotter.YErrors, len(stds))
	for i, s := range stds {
		yerr[i].Low, yerr[i].High = s, s
	}
	return plotter.NewYErrorBars(struct {
		plotter.XYs
		plotter.YErrors
	}{xys, yerr})
}

func addPoints(p *plot.Plot, xys plotter.XYs, col color.Color, shape draw.GlyphDrawer, legend string) error {
	if len(xys) == 0 {
		return nil
	}
	s, err := plotter.NewScatter(clipped(xys))
	if err != nil {
		return err
	}
	s.Color, s.Shape, s.Radius = col, shape, vg.Points(3)
	p.Add(s)
	if legend != "" {
		p.Legend.Add(legend, s)
	}
	return nil
}

// learningCurvesFigure: label loss, errors, validation accuracy, T and resets over steps;
// kept names what the best validation kept (labels, images, or both).
func learningCurvesFigure(recs []rundir.HistoryRecord, resets []int, kept string) ([]byte, error) {
	stepVal := func(f func(rundir.HistoryRecord) float64) func(rundir.HistoryRecord) (float64, bool) {
		return func(r rundir.HistoryRecord) (float64, bool) { return f(r), true }
	}
	title := "Label loss (cross-entropy of the target batch)"
	if kept == "images" {
		title = "Image meta-loss (cross-entropy of the target batch)"
	}
	loss := newPlot(title)
	if err := addLine(loss, series(recs, rundir.HistoryStep, stepVal(func(r rundir.HistoryRecord) float64 { return r.LabelLoss })), blue, 1, ""); err != nil {
		return nil, err
	}
	errs := newPlot("Top-1 error on the target batches (%)")
	if err := addLine(errs, series(recs, rundir.HistoryStep, stepVal(func(r rundir.HistoryRecord) float64 { return r.Error })), grey, 0.5, "per meta-step"); err != nil {
		return nil, err
	}
	moving := series(recs, rundir.HistoryStep, func(r rundir.HistoryRecord) (float64, bool) {
		if r.MovingError == nil {
			return 0, false
		}
		return *r.MovingError, true
	})
	if err := addLine(errs, moving, red, 1.5, "moving (reset window)"); err != nil {
		return nil, err
	}
	val := newPlot("Validation accuracy of a fresh model (%)")
	valXY := series(recs, rundir.HistoryValidation, stepVal(func(r rundir.HistoryRecord) float64 { return r.Accuracy }))
	if err := addLine(val, valXY, green, 1, ""); err != nil {
		return nil, err
	}
	if err := addPoints(val, valXY, green, draw.CircleGlyph{}, "validation"); err != nil {
		return nil, err
	}
	best := series(recs, rundir.HistoryValidation, func(r rundir.HistoryRecord) (float64, bool) { return r.Accuracy, r.Best })
	if len(best) > 0 {
		ring, err := plotter.NewScatter(clipped(best[len(best)-1:]))
		if err != nil {
			return nil, err
		}
		ring.Color, ring.Shape, ring.Radius = orange, draw.RingGlyph{}, vg.Points(7)
		val.Add(ring)
		val.Legend.Add("kept "+kept, ring)
	}
	// Resets: the step lines where the reset count went up.
	var resetSteps plotter.XYs
	prev := 0
	tXY := series(recs, rundir.HistoryStep, stepVal(func(r rundir.HistoryRecord) float64 { return float64(r.T) }))
	for _, r := range recs {
		if r.Kind == rundir.HistoryStep && r.Resets > prev {
			resetSteps = append(resetSteps, plotter.XY{X: float64(r.Step), Y: float64(r.T)})
			prev = r.Resets
		}
	}
	resetWord := "model resets"
	if len(resets) == 1 {
		resetWord = "model reset"
	}
	tp := newPlot(fmt.Sprintf("T, the steps fresh models train for; %d %s", len(resets), resetWord))
	if err := addLine(tp, tXY, blue, 1, "T"); err != nil {
		return nil, err
	}
	if err := addPoints(tp, resetSteps, red, draw.CrossGlyph{}, "model reset"); err != nil {
		return nil, err
	}
	if err := addPoints(tp, resumePoints(recs), grey, draw.TriangleGlyph{}, "resumed from a checkpoint"); err != nil {
		return nil, err
	}
	for _, p := range []*plot.Plot{loss, errs, val, tp} {
		p.X.Label.Text = "meta-step"
		p.X.Tick.Marker = stepTicks{}
		p.Y.Tick.Marker = compactTicks{}
		p.Add(plotter.NewGrid())
		p.Legend.Top = true
		p.Legend.TextStyle.Font.Size = vg.Points(8)
	}
	val.Legend.Top = false
	// Room above the data for the legends at the top right, which the error's and T's
	// highest points (after each reset) would otherwise run through.
	for _, p := range []*plot.Plot{errs, tp} {
		p.Y.Max += 0.15 * (p.Y.Max - p.Y.Min)
	}
	return renderPNG([][]*plot.Plot{{loss, errs}, {val, tp}}, 10*vg.Inch, 7*vg.Inch)
}

// resumePoints are the meta-steps a resumed run went on from (the history's resume lines),
// each at the T of the last step line up to it (0 before the first).
func resumePoints(recs []rundir.HistoryRecord) plotter.XYs {
	var xys plotter.XYs
	t := 0
	for _, r := range recs {
		switch r.Kind {
		case rundir.HistoryStep:
			t = r.T
		case rundir.HistoryResume:
			xys = append(xys, plotter.XY{X: float64(r.Step), Y: float64(t)})
		}
	}
	return xys
}

// accuracyEntry is one bar of the accuracy summary.
type accuracyEntry struct {
	name      string
	mean, std float64
	models    int
}

// accuracyFigure: test accuracy (mean ± std over the fresh models) of the distilled labels
// and every baseline, and the improvement of the distilled labels over each baseline.
func accuracyFigure(entries []accuracyEntry, improvements []accuracyEntry) ([]byte, error) {
	p := newPlot("Test accuracy of fresh models (mean ± std)")
	vals := make(plotter.Values, len(entries))
	errs := make(plotter.XYs, len(entries))
	stds := make([]float64, len(entries))
	names := make([]string, len(entries))
	lo := 100.0
	for i, e := range entries {
		vals[i], errs[i], stds[i], names[i] = e.mean, plotter.XY{X: float64(i), Y: e.mean}, e.std, e.name
		lo = math.Min(lo, e.mean-e.std)
	}
	// Points, not bars: the axis does not start at 0, and a cut bar would misstate ratios.
	if err := addPoints(p, errs, blue, draw.CircleGlyph{}, ""); err != nil {
		return nil, err
	}
	eb, err := stdBars(errs, stds)
	if err != nil {
		return nil, err
	}
	eb.Width, eb.CapWidth = vg.Points(1.5), vg.Points(10)
	p.Add(eb)
	// Each point's value, "mean ± std", to the right of the point.
	var xys plotter.XYs
	var texts []string
	for i, e := range entries {
		xys = append(xys, plotter.XY{X: float64(i), Y: e.mean})
		texts = append(texts, fmt.Sprintf("%.2f ± %.2f", e.mean, e.std))
	}
	lab, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: texts})
	if err != nil {
		return nil, err
	}
	for i := range lab.TextStyle {
		lab.TextStyle[i].XAlign, lab.TextStyle[i].Font.Size = 0, vg.Points(8)
	}
	lab.Offset = vg.Point{X: vg.Points(8), Y: vg.Points(-4)}
	p.Add(lab)
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, float64(len(entries))-0.2
	p.Y.Label.Text = "accuracy (%)"
	p.Y.Min, p.Y.Max = math.Max(0, math.Floor(lo/5)*5-5), 100
	p.Add(plotter.NewGrid())
	row := []*plot.Plot{p}
	if len(improvements) > 0 {
		q := newPlot("Distilled minus baseline (points)")
		// Gains in green, losses in red: one bar chart each, the other's bars of height 0.
		gains := make(plotter.Values, len(improvements))
		losses := make(plotter.Values, len(improvements))
		inames := make([]string, len(improvements))
		for i, e := range improvements {
			gains[i], losses[i], inames[i] = math.Max(e.mean, 0), math.Min(e.mean, 0), e.name
		}
		for _, bars := range []struct {
			v   plotter.Values
			col color.Color
		}{{gains, green}, {losses, red}} {
			ib, err := plotter.NewBarChart(bars.v, vg.Points(40))
			if err != nil {
				return nil, err
			}
			ib.Color, ib.LineStyle.Width = bars.col, 0
			q.Add(ib)
		}
		q.Add(plotter.NewGrid())
		var ixy plotter.XYs
		var itexts []string
		for i, e := range improvements {
			ixy = append(ixy, plotter.XY{X: float64(i), Y: math.Max(e.mean, 0)})
			itexts = append(itexts, fmt.Sprintf("%+.1f", e.mean))
		}
		il, err := plotter.NewLabels(plotter.XYLabels{XYs: ixy, Labels: itexts})
		if err != nil {
			return nil, err
		}
		for i := range il.TextStyle {
			il.TextStyle[i].XAlign, il.TextStyle[i].Font.Size = -0.5, vg.Points(8)
		}
		il.Offset = vg.Point{Y: vg.Points(3)}
		q.Add(il)
		q.NominalX(inames...)
		q.X.Min, q.X.Max = -0.7, float64(len(improvements))-0.3
		q.Y.Label.Text = "accuracy difference (points)"
		lo, hi := 0.0, 1.0
		for _, e := range improvements {
			lo, hi = math.Min(lo, e.mean), math.Max(hi, e.mean)
		}
		q.Y.Min, q.Y.Max = lo-1, hi+2
		row = append(row, q)
	}
	width := 4.5 + 0.9*float64(len(entries))
	if len(row) > 1 {
		width += 1.5 + 0.9*float64(len(improvements))
	}
	return renderPNG([][]*plot.Plot{row}, vg.Length(width)*vg.Inch, 4.5*vg.Inch)
}

// gradVarianceFigure: the label meta-gradient's variance over windows of the run (from
// the history) and, when measured, across fresh models for LD and LD RR on one label state.
func gradVarianceFigure(recs []rundir.HistoryRecord, measured *GradVarFile) ([]byte, error) {
	return metaGradientFigure(recs, measured, labelGradient)
}

// What a history's gradient statistics are of: the first learnt parameter's meta-gradient,
// the labels' where labels are learnt, else the images' (learn images, method dd).
var (
	labelGradient = gradientOf{"label", "dL/dY"}
	imageGradient = gradientOf{"image", "dL/dX"}
)

type gradientOf struct{ what, symbol string }

// metaGradientFigure is gradVarianceFigure for the meta-gradient of g.
func metaGradientFigure(recs []rundir.HistoryRecord, measured *GradVarFile, g gradientOf) ([]byte, error) {
	var row []*plot.Plot
	norms := series(recs, rundir.HistoryStep, func(r rundir.HistoryRecord) (float64, bool) { return r.GradNorm, r.GradNorm > 0 })
	if len(norms) > 0 {
		p := newPlot(fmt.Sprintf("Norm of the %s meta-gradient %s per meta-step", g.what, g.symbol))
		norms = logY(p, norms)
		if err := addLine(p, norms, grey, 0.7, ""); err != nil {
			return nil, err
		}
		if len(norms) == 1 { // a line of one point draws nothing
			if err := addPoints(p, norms, grey, draw.CircleGlyph{}, ""); err != nil {
				return nil, err
			}
		}
		p.X.Label.Text = "meta-step"
		p.X.Tick.Marker = stepTicks{}
		p.Y.Label.Text = "L2 norm (log scale)"
		p.Add(plotter.NewGrid())
		row = append(row, p)
	}
	window := series(recs, rundir.HistoryStep, func(r rundir.HistoryRecord) (float64, bool) {
		if r.GradVar == nil || r.GradVar.Count < 2 || !(r.GradVar.Variance > 0) {
			return 0, false
		}
		return r.GradVar.Variance, true
	})
	if len(window) > 0 {
		p := newPlot(fmt.Sprintf("%s meta-gradient variance over each window of meta-steps", strings.ToUpper(g.what[:1])+g.what[1:]))
		window = logY(p, window)
		if err := addLine(p, window, blue, 1, ""); err != nil {
			return nil, err
		}
		if err := addPoints(p, window, blue, draw.CircleGlyph{}, ""); err != nil {
			return nil, err
		}
		p.X.Label.Text = "meta-step (window end)"
		p.X.Tick.Marker = stepTicks{}
		p.Y.Label.Text = "mean per-element variance (log scale)"
		p.Add(plotter.NewGrid())
		row = append(row, p)
	}
	if measured != nil && len(measured.Methods) > 0 {
		// Points on a log axis: the methods differ by orders of magnitude.
		p := newPlot(fmt.Sprintf("Across %d fresh models at the %s labels, same batches", measured.Models, measured.Labels))
		names := make([]string, len(measured.Methods))
		var xys plotter.XYs
		var texts []string
		lo, hi := math.Inf(1), 0.0
		for i, m := range measured.Methods {
			names[i] = m.Name
			v := m.Variance.Variance
			if !(v > 0) {
				continue
			}
			xys = append(xys, plotter.XY{X: float64(i), Y: v})
			texts = append(texts, fmt.Sprintf("%.3g", v))
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
		if len(xys) > 0 {
			xys = logY(p, xys)
			if err := addPoints(p, xys, orange, draw.CircleGlyph{}, ""); err != nil {
				return nil, err
			}
			lab, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: texts})
			if err != nil {
				return nil, err
			}
			for i := range lab.TextStyle {
				lab.TextStyle[i].Font.Size = vg.Points(9)
			}
			lab.Offset = vg.Point{X: vg.Points(8), Y: vg.Points(-4)}
			p.Add(lab)
			p.Y.Min, p.Y.Max = math.Log10(lo/3), math.Log10(hi*3)
		}
		p.NominalX(names...)
		p.X.Min, p.X.Max = -0.7, float64(len(names))-0.3
		p.Y.Label.Text = "variance across models (log scale)"
		p.Add(plotter.NewGrid())
		row = append(row, p)
	}
	if len(row) == 0 {
		return nil, nil
	}
	return renderPNG([][]*plot.Plot{row}, vg.Length(5*len(row))*vg.Inch, 4*vg.Inch)
}

// logY returns xys with each (positive) Y replaced by its log10, and labels p's Y ticks with
// the values: a log axis. Not plot.LogScale: gonum lays the y-axis label out around the
// axis's arithmetic midpoint, which on a log scale lies near the top, and the room it keeps
// for it there left an empty band above the data of every panel in the row. When the values
// are all equal (one history line in a short run), the axis spans ÷3 to ×3 of the value.
func logY(p *plot.Plot, xys plotter.XYs) plotter.XYs {
	logged := make(plotter.XYs, len(xys))
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, xy := range xys {
		logged[i] = plotter.XY{X: xy.X, Y: math.Log10(xy.Y)}
		lo, hi = math.Min(lo, logged[i].Y), math.Max(hi, logged[i].Y)
	}
	p.Y.Tick.Marker = log10Ticks{}
	if lo == hi {
		p.Y.Min, p.Y.Max = lo-math.Log10(3), hi+math.Log10(3)
	}
	return logged
}

// compactTicks are gonum's default ticks labelled in at most 4 significant digits (a
// value of 1e38 is "1e+38", not thirty-nine digits across the panel) and without trailing
// zeros after the point (T's 1250, not 1250.00).
type compactTicks struct{}

func (compactTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		l := ticks[i].Label
		if l == "" {
			continue
		}
		if len(l) > 8 {
			l = strconv.FormatFloat(ticks[i].Value, 'g', 4, 64)
		}
		if strings.Contains(l, ".") && !strings.ContainsAny(l, "eE") {
			l = strings.TrimSuffix(strings.TrimRight(l, "0"), ".")
		}
		ticks[i].Label = l
	}
	return ticks
}

// log10Ticks are logTicks for an axis of log10 values. The ends are held to the exponents
// of float64 (1e-323 … 1e308: a padded end beyond them made logTicks step towards an
// infinite power of ten), and an axis over more than 30 decades labels every k-th power of ten, at
// most about ten, without the multiples between.
type log10Ticks struct{}

func (log10Ticks) Ticks(lo, hi float64) []plot.Tick {
	lo, hi = math.Max(lo, -323), math.Min(hi, 308)
	if !(hi > lo) {
		return nil
	}
	if decades := math.Ceil(hi) - math.Floor(lo); decades > 30 {
		k := math.Ceil(decades / 10)
		var ticks []plot.Tick
		for e := math.Ceil(lo/k) * k; e <= hi; e += k {
			ticks = append(ticks, plot.Tick{Value: e, Label: fmt.Sprintf("1e%+.0f", e)})
		}
		return ticks
	}
	ticks := logTicks{}.Ticks(math.Pow(10, lo), math.Pow(10, hi))
	for i := range ticks {
		ticks[i].Value = math.Log10(ticks[i].Value)
	}
	return ticks
}

// shortName fits a class name into an axis label.
func shortName(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
