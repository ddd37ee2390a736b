package report

// flexibility.go: the paper's flexibility figure (results.Flexibility): learnt labels beside
// method dd for the number of training steps, the optimisation settings and the
// architecture, as one PNG of three panels.

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/ldtorch/ldtorch/labeldistill/results"
)

// FlexibilityFigure draws f's three panels side by side: (a) test accuracy (mean ± std over
// the models) against the step count as a fraction of each method's T; (b) horizontal bars
// of the optimisation settings, the methods' own recipes first; (c) bars per architecture,
// one per method (and the labels' true-label baseline).
func FlexibilityFigure(f *results.Flexibility) ([]byte, error) {
	if len(f.Panels) != 3 {
		return nil, fmt.Errorf("flexibility figure: %d panels, want 3", len(f.Panels))
	}
	lo := 100.0
	for _, pn := range f.Panels {
		for _, s := range pn.Series {
			for _, x := range s.Points {
				if x.Models > 0 {
					lo = math.Min(lo, x.Mean-x.Std)
				}
			}
		}
	}
	yMin := math.Max(0, math.Floor(lo/10)*10-10)
	colour := func(s results.Series, i int) color.Color {
		switch {
		case s.Labels == "true":
			return grey
		case s.Method == f.VersusName:
			return orange
		case i == 0:
			return blue
		}
		return green
	}
	var plots []*plot.Plot
	for _, pn := range f.Panels {
		title := pn.Title
		if pn.Name == results.FlexSteps {
			title = fmt.Sprintf("%s: %s beside %s on %s", pn.Title, f.MethodName, f.VersusName, f.Dataset)
		}
		p := newPlot(title)
		p.Y.Label.Text = "test accuracy (%)"
		p.X.Label.Text = pn.XLabel
		p.Legend.TextStyle.Font.Size = vg.Points(9)
		var err error
		switch pn.Name {
		case results.FlexSteps:
			err = flexStepsPanel(p, pn, yMin, colour)
		case results.FlexOptimisation:
			err = flexOptPanel(p, pn, yMin, colour)
		default:
			err = flexArchPanel(p, pn, yMin, colour)
		}
		if err != nil {
			return nil, err
		}
		plots = append(plots, p)
	}
	return renderPNG([][]*plot.Plot{plots}, 21*vg.Inch, 6.5*vg.Inch)
}

func flexStepsPanel(p *plot.Plot, pn results.Panel, yMin float64, colour func(results.Series, int) color.Color) error {
	p.Add(plotter.NewGrid())
	xMin, xMax := 1.0, 1.0
	for i, s := range pn.Series {
		var xys plotter.XYs
		var stds []float64
		for _, x := range s.Points {
			xMin, xMax = math.Min(xMin, x.X), math.Max(xMax, x.X)
			if x.Models == 0 {
				continue
			}
			xys = append(xys, plotter.XY{X: x.X, Y: x.Mean})
			stds = append(stds, x.Std)
		}
		if len(xys) == 0 {
			continue
		}
		if err := addMeanStd(p, xys, stds, colour(s, i), s.Name); err != nil {
			return err
		}
	}
	if err := addLine(p, plotter.XYs{{X: 1, Y: yMin}, {X: 1, Y: 100}}, grey, 1, "T, the method's own step count"); err != nil {
		return err
	}
	pad := (xMax - xMin) * 0.05
	p.X.Min, p.X.Max = xMin-pad, xMax+pad
	p.Y.Min, p.Y.Max = yMin, 100
	p.Y.Tick.Marker = tensTicks{}
	p.Legend.Top, p.Legend.Left = false, false // the bottom's padding below the lowest point
	return nil
}

// flexOptPanel draws one horizontal bar per setting, top to bottom in the panel's order.
func flexOptPanel(p *plot.Plot, pn results.Panel, yMin float64, colour func(results.Series, int) color.Color) error {
	p.Add(&plotter.Grid{Vertical: plotter.DefaultGridLineStyle})
	n := 0
	for _, s := range pn.Series {
		n += len(s.Points)
	}
	names := make([]string, n)
	var labels plotter.XYLabels
	for i, s := range pn.Series {
		vals := make(plotter.Values, n)
		for _, x := range s.Points {
			row := n - 1 - int(x.X) // the first setting at the top
			names[row] = x.Label
			vals[row] = x.Mean
			text := fmt.Sprintf("%.1f ± %.1f", x.Mean, x.Std)
			if x.Models == 0 {
				text = "diverged"
			}
			labels.XYs = append(labels.XYs, plotter.XY{X: math.Max(yMin, x.Mean), Y: float64(row)})
			labels.Labels = append(labels.Labels, text)
		}
		bars, err := plotter.NewBarChart(vals, vg.Points(22))
		if err != nil {
			return err
		}
		bars.Horizontal = true
		bars.Color, bars.LineStyle.Width = colour(s, i), 0
		p.Add(bars)
		p.Legend.Add(s.Name, bars)
	}
	lab, err := plotter.NewLabels(labels)
	if err != nil {
		return err
	}
	for i := range lab.TextStyle {
		lab.TextStyle[i].YAlign, lab.TextStyle[i].Font.Size = -0.5, vg.Points(9)
	}
	lab.Offset = vg.Point{X: vg.Points(3)}
	p.Add(lab)
	p.NominalY(names...)
	p.Y.Label.Text = ""
	p.Y.Max = float64(n) // an empty row above the bars for the legend
	p.X.Label.Text = "test accuracy (%)"
	p.X.Min, p.X.Max = yMin, 100
	p.X.Tick.Marker = tensTicks{}
	p.Legend.Top = true
	return nil
}

// flexArchPanel draws grouped bars: one group per architecture, one bar per series.
func flexArchPanel(p *plot.Plot, pn results.Panel, yMin float64, colour func(results.Series, int) color.Color) error {
	p.Add(&plotter.Grid{Horizontal: plotter.DefaultGridLineStyle})
	cats := pn.Categories()
	const w = 36
	k := len(pn.Series)
	var labels plotter.XYLabels
	for i, s := range pn.Series {
		vals := make(plotter.Values, len(cats))
		for _, x := range s.Points {
			vals[int(x.X)] = x.Mean
		}
		bars, err := plotter.NewBarChart(vals, vg.Points(w))
		if err != nil {
			return err
		}
		bars.Color, bars.LineStyle.Width = colour(s, i), 0
		bars.Offset = vg.Points(w * (float64(i) - float64(k-1)/2))
		p.Add(bars)
		p.Legend.Add(s.Name, bars)
		for _, x := range s.Points {
			text := fmt.Sprintf("%.1f", x.Mean)
			if x.Models == 0 {
				text = "div."
			}
			labels.XYs = append(labels.XYs, plotter.XY{X: x.X, Y: math.Max(yMin, x.Mean+x.Std)})
			labels.Labels = append(labels.Labels, text)
		}
		var xys plotter.XYs
		var stds []float64
		for _, x := range s.Points {
			if x.Models > 0 {
				xys = append(xys, plotter.XY{X: x.X, Y: x.Mean})
				stds = append(stds, x.Std)
			}
		}
		if len(xys) > 0 {
			eb, err := stdBars(xys, stds)
			if err != nil {
				return err
			}
			eb.Width = vg.Points(1.2)
			p.Add(offsetErrBars{eb, bars.Offset})
		}
	}
	lab, err := plotter.NewLabels(labels)
	if err != nil {
		return err
	}
	for i := range lab.TextStyle {
		lab.TextStyle[i].XAlign, lab.TextStyle[i].Font.Size = -0.5, vg.Points(9)
	}
	// Each value sits above its own bar (offsetLabels shifts each series like its bars).
	p.Add(offsetLabels{lab, pn.Series, w, k})
	p.NominalX(cats...)
	p.Y.Min, p.Y.Max = yMin, 100
	p.Y.Tick.Marker = tensTicks{}
	p.Legend.Top = true
	return nil
}

// offsetErrBars draws error bars shifted sideways by Off, over their bars.
type offsetErrBars struct {
	*plotter.YErrorBars
	Off vg.Length
}

func (o offsetErrBars) Plot(c draw.Canvas, p *plot.Plot) {
	c.Min.X += o.Off
	c.Max.X += o.Off
	o.YErrorBars.Plot(c, p)
}

// offsetLabels draws each series' value labels over its own bars.
type offsetLabels struct {
	*plotter.Labels
	series []results.Series
	w      float64
	k      int
}

func (o offsetLabels) Plot(c draw.Canvas, p *plot.Plot) {
	idx := 0
	for i, s := range o.series {
		n := len(s.Points)
		sub := &plotter.Labels{XYs: o.XYs[idx : idx+n], Labels: o.Labels.Labels[idx : idx+n], TextStyle: o.TextStyle[idx : idx+n],
			Offset: vg.Point{X: vg.Points(o.w * (float64(i) - float64(o.k-1)/2)), Y: vg.Points(3)}}
		sub.Plot(c, p)
		idx += n
	}
}

// tensTicks marks every 10 (accuracy in %), labelled.
type tensTicks struct{}

func (tensTicks) Ticks(lo, hi float64) []plot.Tick {
	var t []plot.Tick
	for v := math.Ceil(lo/10) * 10; v <= hi+1e-9; v += 10 {
		t = append(t, plot.Tick{Value: v, Label: fmt.Sprintf("%g", v)})
	}
	return t
}
