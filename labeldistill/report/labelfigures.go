package report

// The label figures: the mean label per original class (a heat map) and example labels
// (base images beside bar charts).

import (
	"fmt"
	"image/color"
	"math"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// grid is a heat map's data: Z[row][col], row 0 drawn at the top.
type grid struct{ z [][]float64 }

func (g grid) Dims() (c, r int)   { return len(g.z[0]), len(g.z) }
func (g grid) Z(c, r int) float64 { return g.z[len(g.z)-1-r][c] }
func (g grid) X(c int) float64    { return float64(c) }
func (g grid) Y(r int) float64    { return float64(r) }

// labelDistributionFigure: mean distilled label per original class, values ≥ 0.05 printed.
// Over many target classes (CIFAR-100) the figure is turned (a row per target class, so the
// names stay readable) and its colour scale ends at the largest mean, its upper half printed:
// a 100-class label's shares are small.
func labelDistributionFigure(d LabelDistribution, targetNames, sourceNames []string, subtitle string) ([]byte, error) {
	var rows [][]float64
	var rowNames []string
	for s, m := range d.Mean {
		if d.Count[s] > 0 {
			rows = append(rows, m)
			rowNames = append(rowNames, fmt.Sprintf("%s (%d)", sourceNames[s], d.Count[s]))
		}
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("report: no base examples")
	}
	colNames := targetNames
	xLabel, yLabel := "distilled label: target class", "base examples' original class (count)"
	scale, printAt, format := 1.0, 0.05, "%.2f"
	if len(targetNames) > maxLabelBars {
		turned := make([][]float64, len(targetNames))
		largest := 0.0
		for t := range turned {
			turned[t] = make([]float64, len(rows))
			for s := range rows {
				turned[t][s] = rows[s][t]
				largest = math.Max(largest, rows[s][t])
			}
		}
		rows, rowNames, colNames = turned, shortNames(targetNames, 14), rowNames
		xLabel, yLabel = yLabel, xLabel
		scale = barScale(largest)
		printAt, format = scale/2, "%.3f"
		subtitle += fmt.Sprintf("\ncolour scale 0 to %g; values of at least %g printed", scale, printAt)
	}
	p := newPlot("Mean distilled label per original class\n" + subtitle)
	hm := plotter.NewHeatMap(grid{rows}, whiteToBlue(64))
	hm.Min, hm.Max = 0, scale
	p.Add(hm)
	var xys plotter.XYs
	var texts []string
	var styles []text
	for r, m := range rows {
		for c, v := range m {
			if v >= printAt {
				xys = append(xys, plotter.XY{X: float64(c), Y: float64(len(rows) - 1 - r)})
				texts = append(texts, fmt.Sprintf(format, v))
				styles = append(styles, text{dark: v > scale/2})
			}
		}
	}
	if len(xys) > 0 {
		labels, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: texts})
		if err != nil {
			return nil, err
		}
		for i := range labels.TextStyle {
			labels.TextStyle[i].Font.Size = vg.Points(7)
			labels.TextStyle[i].XAlign, labels.TextStyle[i].YAlign = -0.5, -0.5
			if styles[i].dark {
				labels.TextStyle[i].Color = color.White
			}
		}
		p.Add(labels)
	}
	p.X.Label.Text, p.Y.Label.Text = xLabel, yLabel
	p.X.Tick.Marker = nominal(colNames)
	if longestName(colNames) > 8 {
		// Source names with their counts ("automobile (16)") are wider than a column.
		uprightNames(&p.X)
	}
	reversed := make([]string, len(rowNames))
	for i, n := range rowNames {
		reversed[len(rowNames)-1-i] = n
	}
	p.Y.Tick.Marker = nominal(reversed)
	p.X.Min, p.X.Max = -0.5, float64(len(colNames))-0.5
	p.Y.Min, p.Y.Max = -0.5, float64(len(rows))-0.5
	w := vg.Length(math.Max(5.5, 1.5+0.5*float64(len(colNames)))) * vg.Inch
	h := vg.Length(math.Max(4.5, 1.8+0.28*float64(len(rows)))) * vg.Inch
	return renderPNG([][]*plot.Plot{{p}}, w, h)
}

type text struct{ dark bool }

// ramp is a palette from white (0) to dark blue (1).
type ramp []color.Color

func (r ramp) Colors() []color.Color { return r }

func whiteToBlue(n int) ramp {
	out := make(ramp, n)
	for i := range out {
		f := float64(i) / float64(n-1)
		mix := func(a, b uint8) uint8 { return uint8(math.Round(float64(a) + f*(float64(b)-float64(a)))) }
		out[i] = color.RGBA{R: mix(255, 8), G: mix(255, 48), B: mix(255, 107), A: 255}
	}
	return out
}

// maxLabelBars: labels over more classes than this are drawn as their largest
// topLabelBars entries (a 100-class label's bars are too thin to read, and its tick names
// overlap).
const (
	maxLabelBars = 20
	topLabelBars = 10
)

// labelBars: the bars of label (one base example's label over len(names) classes) and the
// names under them: every class in order, or the topLabelBars largest, largest first.
func labelBars(label []float32, names []string) (plotter.Values, []string) {
	order := make([]int, len(label))
	for j := range order {
		order[j] = j
	}
	if len(label) > maxLabelBars {
		sort.SliceStable(order, func(a, b int) bool { return label[order[a]] > label[order[b]] })
		order = order[:topLabelBars]
	}
	vals := make(plotter.Values, len(order))
	shown := make([]string, len(order))
	for k, j := range order {
		vals[k], shown[k] = float64(label[j]), names[j]
	}
	return vals, shown
}

// exampleLabelsFigure: base images beside bar charts of their labels (names: the target
// classes' full names).
func exampleLabelsFigure(pix []float64, shape [4]int64, labels []float32, classes int, picks []int, titles []string, names []string) ([]byte, error) {
	c, h, w := int(shape[1]), int(shape[2]), int(shape[3])
	size := c * h * w
	if classes > maxLabelBars {
		names = shortNames(names, 12)
	} else {
		names = shortNames(names, 6)
	}
	perRow := 2
	rows := (len(picks) + perRow - 1) / perRow
	plots := make([][]*plot.Plot, rows)
	for r := range plots {
		plots[r] = make([]*plot.Plot, 2*perRow)
	}
	upright := false
	for k, i := range picks {
		r, col := k/perRow, 2*(k%perRow)
		plots[r][col] = imagePlot(toImage(pix[i*size:(i+1)*size], c, h, w), titles[k])
		vals, shown := labelBars(labels[i*classes:(i+1)*classes], names)
		bars, err := plotter.NewBarChart(vals, vg.Points(float64(max(3, 90/len(vals)))))
		if err != nil {
			return nil, err
		}
		bars.Color, bars.LineStyle.Width = blue, 0
		bp := newPlot("")
		bp.Add(bars)
		bp.Y.Min, bp.Y.Max = 0, 1
		if len(vals) < classes {
			// The largest of many classes: a scale that shows how far they stand apart.
			bp.Y.Max = barScale(vals[0])
		}
		bp.X.Tick.Marker = nominal(shown)
		bp.X.Tick.Label.Font.Size = vg.Points(float64(min(9, max(5, 120/len(vals)))))
		if longestName(shown) > 2 {
			// Names wider than a bar (Fashion-MNIST's "Pullover"): upright, or they overlap.
			upright = true
			uprightNames(&bp.X)
		}
		bp.Y.Tick.Label.Font.Size = vg.Points(8)
		bp.Add(plotter.NewGrid())
		plots[r][col+1] = bp
	}
	rowHeight := 1.6
	if upright {
		rowHeight = 2.1 // room for the upright names under the bars
	}
	return renderPNG(plots, 9*vg.Inch, vg.Length(rowHeight*float64(rows))*vg.Inch)
}

// uprightNames turns an axis's tick names upright, reading from the axis down.
func uprightNames(a *plot.Axis) {
	a.Tick.Label.Rotation = math.Pi / 2
	a.Tick.Label.XAlign = draw.XRight
	a.Tick.Label.YAlign = draw.YCenter
}

// barScale: the y-axis top for bars whose largest is v: the first of 0.05, 0.1, 0.2, 0.5, 1
// at or above it.
func barScale(v float64) float64 {
	for _, top := range []float64{0.05, 0.1, 0.2, 0.5} {
		if v <= top {
			return top
		}
	}
	return 1
}
