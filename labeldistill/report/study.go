package report

// results.go: the figure of a flexibility study (results.Run), drawn with the
// helpers of figures.go.

import (
	"fmt"
	"image/color"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/results"
)

// StudyFigure draws a study as PNG: test accuracy (mean ± std over the models) against the
// number of steps (steps), against the learning rate per optimiser (optimizer), or as bars
// per setting (arch: distilled beside true labels; rr-standard).
func StudyFigure(st *results.Study) ([]byte, error) {
	title := fmt.Sprintf("%s study: %s%s on %s, %d base examples (T = %d, %d models)",
		st.Study, studyMethodName(st), st.Through(), datasetTitle(st), st.BaseExamples, st.T, st.Models)
	p := newPlot(title)
	p.Y.Label.Text = "test accuracy (%)"
	p.Add(plotter.NewGrid())
	var err error
	switch st.Study {
	case results.Steps:
		err = stepsPlot(p, st)
	case results.Optimizer:
		err = optimizerPlot(p, st)
	default:
		err = barsPlot(p, st)
	}
	if err != nil {
		return nil, err
	}
	return renderPNG([][]*plot.Plot{{p}}, 9*vg.Inch, 5*vg.Inch)
}

func datasetTitle(st *results.Study) string {
	if st.Source != "" && st.Source != st.Dataset {
		return st.Source + " → " + st.Dataset
	}
	return st.Dataset
}

// meanErr adds a line with points and ±std error bars.
func meanErr(p *plot.Plot, xs []float64, settings []results.Setting, col color.Color, legend string) error {
	var xys plotter.XYs
	var stds []float64
	for i, s := range settings {
		if len(s.Accuracies) == 0 {
			continue
		}
		xys = append(xys, plotter.XY{X: xs[i], Y: s.Mean})
		stds = append(stds, s.Std)
	}
	if len(xys) == 0 {
		return nil
	}
	return addMeanStd(p, xys, stds, col, legend)
}

// addMeanStd adds the means xys as a line with points, and ±stds as error bars.
func addMeanStd(p *plot.Plot, xys plotter.XYs, stds []float64, col color.Color, legend string) error {
	if err := addLine(p, xys, col, 1.5, legend); err != nil {
		return err
	}
	if err := addPoints(p, xys, col, draw.CircleGlyph{}, ""); err != nil {
		return err
	}
	eb, err := stdBars(xys, stds)
	if err != nil {
		return err
	}
	eb.Color, eb.Width = col, vg.Points(1.2)
	p.Add(eb)
	return nil
}

func stepsPlot(p *plot.Plot, st *results.Study) error {
	xs := make([]float64, len(st.Settings))
	for i, s := range st.Settings {
		xs[i] = float64(s.Steps)
	}
	if err := meanErr(p, xs, st.Settings, blue, ""); err != nil {
		return err
	}
	// T, the step count estimated during distillation.
	lo, hi := yRange(st.Settings)
	if err := addLine(p, plotter.XYs{{X: float64(st.T), Y: lo}, {X: float64(st.T), Y: hi}}, grey, 1, fmt.Sprintf("T = %d", st.T)); err != nil {
		return err
	}
	p.X.Label.Text = "training steps of the fresh models"
	p.Y.Min, p.Y.Max = lo, hi
	p.Legend.Top = false
	return nil
}

func optimizerPlot(p *plot.Plot, st *results.Study) error {
	groups := map[string][]results.Setting{}
	var order []string
	for _, s := range st.Settings {
		key := s.Optimizer
		if s.Optimizer == "sgd" {
			key = fmt.Sprintf("sgd, momentum %g", s.Momentum)
		}
		if _, ok := groups[key]; !ok {
			order = append(order, key)
		}
		groups[key] = append(groups[key], s)
	}
	cols := []color.Color{blue, orange, green, red, grey}
	for i, k := range order {
		xs := make([]float64, len(groups[k]))
		for j, s := range groups[k] {
			xs[j] = math.Log10(s.LR)
		}
		if err := meanErr(p, xs, groups[k], cols[i%len(cols)], k); err != nil {
			return err
		}
	}
	p.X.Label.Text = "learning rate (log10)"
	p.Y.Min, p.Y.Max = yRange(st.Settings)
	p.Legend.Top = false
	return nil
}

func barsPlot(p *plot.Plot, st *results.Study) error {
	names := make([]string, len(st.Settings))
	xys := make(plotter.XYs, len(st.Settings))
	stds := make([]float64, len(st.Settings))
	var distilled, truth plotter.Values
	for i, s := range st.Settings {
		names[i] = strings.Replace(s.Label, " (", "\n(", 1)
		if s.Labels == "true" {
			truth = append(truth, s.Mean)
			distilled = append(distilled, 0)
		} else {
			distilled = append(distilled, s.Mean)
			truth = append(truth, 0)
		}
		xys[i] = plotter.XY{X: float64(i), Y: s.Mean}
		stds[i] = s.Std
	}
	for _, b := range []struct {
		v      plotter.Values
		col    color.Color
		legend string
	}{{distilled, blue, "distilled labels"}, {truth, orange, "true labels"}} {
		bars, err := plotter.NewBarChart(b.v, vg.Points(40))
		if err != nil {
			return err
		}
		bars.Color, bars.LineStyle.Width = b.col, 0
		p.Add(bars)
		switch {
		case st.Study == results.Arch && st.DD():
			if b.legend == "distilled labels" {
				p.Legend.Add("distilled images (learnt step sizes, fixed order)", bars)
			}
		case st.Study == results.Arch:
			p.Legend.Add(b.legend, bars)
		}
	}
	eb, err := stdBars(xys, stds)
	if err != nil {
		return err
	}
	eb.Width = vg.Points(1.5)
	p.Add(eb)
	texts := make([]string, len(st.Settings))
	top := make(plotter.XYs, len(st.Settings))
	for i, s := range st.Settings {
		texts[i] = fmt.Sprintf("%.1f", s.Mean)
		top[i] = plotter.XY{X: float64(i), Y: s.Mean + s.Std}
	}
	lab, err := plotter.NewLabels(plotter.XYLabels{XYs: top, Labels: texts})
	if err != nil {
		return err
	}
	for i := range lab.TextStyle {
		lab.TextStyle[i].XAlign, lab.TextStyle[i].Font.Size = -0.5, vg.Points(8)
	}
	lab.Offset = vg.Point{Y: vg.Points(3)}
	p.Add(lab)
	p.NominalX(names...)
	lo, _ := yRange(st.Settings)
	p.Y.Min, p.Y.Max = math.Max(0, math.Floor(lo/10)*10-10), 100
	p.Legend.Top = true
	return nil
}

// yRange pads the accuracies' range (mean ± std) to whole points.
func yRange(settings []results.Setting) (lo, hi float64) {
	lo, hi = 100, 0
	for _, s := range settings {
		if len(s.Accuracies) == 0 {
			continue
		}
		lo, hi = math.Min(lo, s.Mean-s.Std), math.Max(hi, s.Mean+s.Std)
	}
	if lo > hi {
		return 0, 100
	}
	return math.Max(0, math.Floor(lo-2)), math.Min(100, math.Ceil(hi+2))
}

// studyMethodName names the study's method (studies written before method_name: the method's).
func studyMethodName(st *results.Study) string {
	if st.MethodName != "" {
		return st.MethodName
	}
	return config.MethodLabel(st.Method)
}
