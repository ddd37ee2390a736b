package report

// figures.go: the figures, drawn with gonum.org/v1/plot and written as PNG.

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/ldtorch/ldtorch/labeldistill"
)

const dpi = 96

var (
	blue   = color.RGBA{R: 31, G: 119, B: 180, A: 255}
	orange = color.RGBA{R: 255, G: 127, B: 14, A: 255}
	green  = color.RGBA{R: 44, G: 160, B: 44, A: 255}
	red    = color.RGBA{R: 214, G: 39, B: 40, A: 255}
	grey   = color.RGBA{R: 150, G: 150, B: 150, A: 255}
)

// renderPNG lays plots out in a grid (nil entries stay empty) on a w×h canvas.
func renderPNG(plots [][]*plot.Plot, w, h vg.Length) ([]byte, error) {
	c := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(dpi), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(c)
	rows, cols := len(plots), 0
	for _, r := range plots {
		cols = max(cols, len(r))
	}
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadTop: vg.Points(4), PadBottom: vg.Points(4),
		PadLeft: vg.Points(4), PadRight: vg.Points(8), PadX: vg.Points(10), PadY: vg.Points(10)}
	canvases := plot.Align(plots, tiles, dc)
	for i, r := range plots {
		// Align lines up the data areas; each canvas's top then sits as far above as the
		// plot's own overhang (tick labels, glyphs) reaches, and gonum would draw the title
		// there. Titles are drawn here instead, at the row's highest top, so they line up.
		top := vg.Length(math.Inf(-1))
		for j, p := range r {
			if p != nil {
				top = max(top, canvases[i][j].Max.Y)
			}
		}
		for j, p := range r {
			if p == nil {
				continue
			}
			c := canvases[i][j]
			title := p.Title.Text
			if title != "" {
				drawTitle(c, p, top)
				c.Max.Y -= p.Title.TextStyle.Rectangle(title).Size().Y + p.Title.Padding
				p.Title.Text = "" // the space is taken off c: the data area stays aligned
			}
			p.Draw(c)
			p.Title.Text = title
		}
	}
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: c}).WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// drawTitle writes p's title with its top at y, centred over the data area (as far as the
// canvas allows).
func drawTitle(c draw.Canvas, p *plot.Plot, y vg.Length) {
	style := p.Title.TextStyle
	half := style.Width(p.Title.Text) / 2
	data := p.DataCanvas(c)
	x := (data.Min.X + data.Max.X) / 2
	x = max(min(x, c.Max.X-half), c.Min.X+half)
	c.FillText(style, vg.Point{X: x, Y: y + style.FontExtents().Descent}, p.Title.Text)
}

func newPlot(title string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(11)
	return p
}

// nominal sets ticks at 0..len(names)-1 with the names.
func nominal(names []string) plot.ConstantTicks {
	t := make(plot.ConstantTicks, len(names))
	for i, n := range names {
		t[i] = plot.Tick{Value: float64(i), Label: n}
	}
	return t
}

// grid is a heat map's data: Z[row][col], row 0 drawn at the top.
type grid struct{ z [][]float64 }

func (g grid) Dims() (c, r int)   { return len(g.z[0]), len(g.z) }
func (g grid) Z(c, r int) float64 { return g.z[len(g.z)-1-r][c] }
func (g grid) X(c int) float64    { return float64(c) }
func (g grid) Y(r int) float64    { return float64(r) }

// labelDistributionFigure: mean distilled label per original class, values ≥ 0.05 printed.
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
	p := newPlot("Mean distilled label per original class\n" + subtitle)
	hm := plotter.NewHeatMap(grid{rows}, whiteToBlue(64))
	hm.Min, hm.Max = 0, 1
	p.Add(hm)
	var xys plotter.XYs
	var texts []string
	var styles []text
	for r, m := range rows {
		for c, v := range m {
			if v >= 0.05 {
				xys = append(xys, plotter.XY{X: float64(c), Y: float64(len(rows) - 1 - r)})
				texts = append(texts, fmt.Sprintf("%.2f", v))
				styles = append(styles, text{dark: v > 0.5})
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
	p.X.Label.Text = "distilled label: target class"
	p.Y.Label.Text = "base examples' original class (count)"
	p.X.Tick.Marker = nominal(targetNames)
	reversed := make([]string, len(rowNames))
	for i, n := range rowNames {
		reversed[len(rowNames)-1-i] = n
	}
	p.Y.Tick.Marker = nominal(reversed)
	p.X.Min, p.X.Max = -0.5, float64(len(targetNames))-0.5
	p.Y.Min, p.Y.Max = -0.5, float64(len(rows))-0.5
	w := vg.Length(math.Max(5.5, 1.5+0.5*float64(len(targetNames)))) * vg.Inch
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

// toImage turns C×H×W intensities in [0, 1] into an image.
func toImage(pix []float64, c, h, w int) image.Image {
	if c == 3 {
		img := image.NewRGBA(image.Rect(0, 0, w, h))
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				at := func(ch int) uint8 { return uint8(math.Round(255 * pix[ch*h*w+y*w+x])) }
				img.SetRGBA(x, y, color.RGBA{R: at(0), G: at(1), B: at(2), A: 255})
			}
		}
		return img
	}
	img := image.NewGray(image.Rect(0, 0, w, h))
	for i := 0; i < h*w; i++ {
		img.Pix[i] = uint8(math.Round(255 * pix[i]))
	}
	return img
}

// stretch maps an image's values linearly onto [0, 1] (a reconstruction is an average of
// many images, so it is faint; stretching shows its shape).
func stretch(pix []float64) []float64 {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range pix {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	out := make([]float64, len(pix))
	if hi > lo {
		for i, v := range pix {
			out[i] = (v - lo) / (hi - lo)
		}
	}
	return out
}

// squareImage draws an image as large as fits its canvas, keeping its aspect ratio.
type squareImage struct{ img image.Image }

func (s squareImage) Plot(c draw.Canvas, _ *plot.Plot) {
	b := s.img.Bounds()
	size := c.Rectangle.Size()
	scale := math.Min(float64(size.X)/float64(b.Dx()), float64(size.Y)/float64(b.Dy()))
	w, h := vg.Length(scale*float64(b.Dx())), vg.Length(scale*float64(b.Dy()))
	min := vg.Point{X: c.Rectangle.Min.X + (size.X-w)/2, Y: c.Rectangle.Min.Y + (size.Y-h)/2}
	c.DrawImage(vg.Rectangle{Min: min, Max: vg.Point{X: min.X + w, Y: min.Y + h}}, s.img)
}

// imagePlot shows one image without axes.
func imagePlot(img image.Image, title string) *plot.Plot {
	p := newPlot(title)
	p.Title.TextStyle.Font.Size = vg.Points(9)
	p.Add(squareImage{img})
	p.HideAxes()
	return p
}

// logTicks label 1, 2 and 5 times each power of ten (gonum's LogTicks label only the
// powers, often a single tick on these plots).
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	if !(lo > 0) || !(hi > lo) {
		return ticks
	}
	wide := math.Log10(hi/lo) > 2 // then only the powers of ten get labels
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for m := 1.0; m < 10; m++ {
			v := m * math.Pow(10, e)
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || (!wide && (m == 2 || m == 5)) {
				t.Label = fmt.Sprintf("%.3g", v)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

// stepTicks are the default ticks labelled as whole numbers (meta-steps).
type stepTicks struct{}

func (stepTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = fmt.Sprintf("%.0f", ticks[i].Value)
		}
	}
	return ticks
}

// exampleLabelsFigure: base images beside bar charts of their labels.
func exampleLabelsFigure(pix []float64, shape [4]int64, labels []float32, classes int, picks []int, titles []string, names []string) ([]byte, error) {
	c, h, w := int(shape[1]), int(shape[2]), int(shape[3])
	size := c * h * w
	perRow := 2
	rows := (len(picks) + perRow - 1) / perRow
	plots := make([][]*plot.Plot, rows)
	for r := range plots {
		plots[r] = make([]*plot.Plot, 2*perRow)
	}
	for k, i := range picks {
		r, col := k/perRow, 2*(k%perRow)
		plots[r][col] = imagePlot(toImage(pix[i*size:(i+1)*size], c, h, w), titles[k])
		vals := make(plotter.Values, classes)
		for j := range vals {
			vals[j] = float64(labels[i*classes+j])
		}
		bars, err := plotter.NewBarChart(vals, vg.Points(float64(max(3, 90/classes))))
		if err != nil {
			return nil, err
		}
		bars.Color, bars.LineStyle.Width = blue, 0
		bp := newPlot("")
		bp.Add(bars)
		bp.Y.Min, bp.Y.Max = 0, 1
		bp.X.Tick.Marker = nominal(names)
		bp.X.Tick.Label.Font.Size = vg.Points(float64(min(9, max(5, 120/classes))))
		bp.Y.Tick.Label.Font.Size = vg.Points(8)
		bp.Add(plotter.NewGrid())
		plots[r][col+1] = bp
	}
	return renderPNG(plots, 9*vg.Inch, vg.Length(1.6*float64(rows))*vg.Inch)
}

// reconstructionFigure: per target class, its reconstruction beside real examples.
func reconstructionFigure(recon [][]float64, real [][][]float64, c, h, w int, names []string, subtitle string) ([]byte, error) {
	classes := len(recon)
	// The class-specific part: each reconstruction minus their mean over the classes (a
	// soft label spreads weight over many images, so the plain combination is mostly the
	// average base image; across datasets especially).
	mean := make([]float64, len(recon[0]))
	for _, r := range recon {
		for p, v := range r {
			mean[p] += v / float64(classes)
		}
	}
	const fixed = 2 // columns before the real examples
	cols := fixed
	for _, r := range real {
		cols = max(cols, fixed+len(r))
	}
	const gap = 2
	cellW, cellH := w+gap, h+gap
	canvas := image.NewRGBA(image.Rect(0, 0, cols*cellW, classes*cellH))
	for i := range canvas.Pix {
		canvas.Pix[i] = 255
	}
	put := func(img image.Image, row, col int) {
		b := img.Bounds()
		for y := 0; y < b.Dy(); y++ {
			for x := 0; x < b.Dx(); x++ {
				canvas.Set(col*cellW+x, row*cellH+y, img.At(x, y))
			}
		}
	}
	for k := 0; k < classes; k++ {
		put(toImage(stretch(recon[k]), c, h, w), k, 0)
		diff := make([]float64, len(mean))
		for p := range diff {
			diff[p] = recon[k][p] - mean[p]
		}
		put(toImage(stretch(diff), c, h, w), k, 1)
		if k < len(real) {
			for j, r := range real[k] {
				put(toImage(r, c, h, w), k, fixed+j)
			}
		}
	}
	p := newPlot("Label-weighted combination of the base images per target class\n" + subtitle)
	p.Add(plotter.NewImage(canvas, 0, 0, float64(cols), float64(classes)))
	yt := make(plot.ConstantTicks, classes)
	for k := 0; k < classes; k++ {
		yt[k] = plot.Tick{Value: float64(classes-k) - 0.5, Label: names[k]}
	}
	p.Y.Tick.Marker = yt
	xt := plot.ConstantTicks{{Value: 0.5, Label: "weighted"}, {Value: 1.5, Label: "− mean"}}
	for j := fixed; j < cols; j++ {
		xt = append(xt, plot.Tick{Value: float64(j) + 0.5, Label: fmt.Sprintf("real %d", j-fixed+1)})
	}
	p.X.Tick.Marker = xt
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, float64(cols), 0, float64(classes)
	p.Y.Tick.Label.Font.Size = vg.Points(9)
	p.X.Tick.Label.Font.Size = vg.Points(9)
	side := math.Max(3, 0.45*float64(cols))
	height := math.Max(3, 0.45*float64(classes)+1)
	return renderPNG([][]*plot.Plot{{p}}, vg.Length(side+1.8)*vg.Inch, vg.Length(height)*vg.Inch)
}

// series collects (step, value) points from history lines.
func series(recs []labeldistill.HistoryRecord, kind string, value func(labeldistill.HistoryRecord) (float64, bool)) plotter.XYs {
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

func addLine(p *plot.Plot, xys plotter.XYs, col color.Color, width float64, legend string) error {
	if len(xys) == 0 {
		return nil
	}
	l, err := plotter.NewLine(xys)
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
	s, err := plotter.NewScatter(xys)
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

// learningCurvesFigure: label loss, errors, validation accuracy, T and resets over steps.
func learningCurvesFigure(recs []labeldistill.HistoryRecord, resets []int) ([]byte, error) {
	stepVal := func(f func(labeldistill.HistoryRecord) float64) func(labeldistill.HistoryRecord) (float64, bool) {
		return func(r labeldistill.HistoryRecord) (float64, bool) { return f(r), true }
	}
	loss := newPlot("Label loss (cross-entropy of the target batch)")
	if err := addLine(loss, series(recs, labeldistill.HistoryStep, stepVal(func(r labeldistill.HistoryRecord) float64 { return r.LabelLoss })), blue, 1, ""); err != nil {
		return nil, err
	}
	errs := newPlot("Top-1 error on the target batches (%)")
	if err := addLine(errs, series(recs, labeldistill.HistoryStep, stepVal(func(r labeldistill.HistoryRecord) float64 { return r.Error })), grey, 0.5, "per meta-step"); err != nil {
		return nil, err
	}
	moving := series(recs, labeldistill.HistoryStep, func(r labeldistill.HistoryRecord) (float64, bool) {
		if r.MovingError == nil {
			return 0, false
		}
		return *r.MovingError, true
	})
	if err := addLine(errs, moving, red, 1.5, "moving (reset window)"); err != nil {
		return nil, err
	}
	val := newPlot("Validation accuracy of a fresh model (%)")
	valXY := series(recs, labeldistill.HistoryValidation, stepVal(func(r labeldistill.HistoryRecord) float64 { return r.Accuracy }))
	if err := addLine(val, valXY, green, 1, ""); err != nil {
		return nil, err
	}
	if err := addPoints(val, valXY, green, draw.CircleGlyph{}, "validation"); err != nil {
		return nil, err
	}
	best := series(recs, labeldistill.HistoryValidation, func(r labeldistill.HistoryRecord) (float64, bool) { return r.Accuracy, r.Best })
	if len(best) > 0 {
		ring, err := plotter.NewScatter(best[len(best)-1:])
		if err != nil {
			return nil, err
		}
		ring.Color, ring.Shape, ring.Radius = orange, draw.RingGlyph{}, vg.Points(7)
		val.Add(ring)
		val.Legend.Add("kept labels", ring)
	}
	// Resets: the step lines where the reset count went up.
	var resetSteps plotter.XYs
	prev := 0
	tXY := series(recs, labeldistill.HistoryStep, stepVal(func(r labeldistill.HistoryRecord) float64 { return float64(r.T) }))
	for _, r := range recs {
		if r.Kind == labeldistill.HistoryStep && r.Resets > prev {
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
	for _, p := range []*plot.Plot{loss, errs, val, tp} {
		p.X.Label.Text = "meta-step"
		p.X.Tick.Marker = stepTicks{}
		p.Add(plotter.NewGrid())
		p.Legend.Top = true
		p.Legend.TextStyle.Font.Size = vg.Points(8)
	}
	val.Legend.Top = false
	return renderPNG([][]*plot.Plot{{loss, errs}, {val, tp}}, 10*vg.Inch, 7*vg.Inch)
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
		iv := make(plotter.Values, len(improvements))
		inames := make([]string, len(improvements))
		for i, e := range improvements {
			iv[i], inames[i] = e.mean, e.name
		}
		ib, err := plotter.NewBarChart(iv, vg.Points(40))
		if err != nil {
			return nil, err
		}
		ib.Color, ib.LineStyle.Width = green, 0
		q.Add(ib, plotter.NewGrid())
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
func gradVarianceFigure(recs []labeldistill.HistoryRecord, measured *GradVarFile) ([]byte, error) {
	var row []*plot.Plot
	norms := series(recs, labeldistill.HistoryStep, func(r labeldistill.HistoryRecord) (float64, bool) { return r.GradNorm, r.GradNorm > 0 })
	if len(norms) > 0 {
		p := newPlot("Norm of the label meta-gradient dL/dY per meta-step")
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
	window := series(recs, labeldistill.HistoryStep, func(r labeldistill.HistoryRecord) (float64, bool) {
		if r.GradVar == nil || r.GradVar.Count < 2 || !(r.GradVar.Variance > 0) {
			return 0, false
		}
		return r.GradVar.Variance, true
	})
	if len(window) > 0 {
		p := newPlot("Label meta-gradient variance over each window of meta-steps")
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

// log10Ticks are logTicks for an axis of log10 values.
type log10Ticks struct{}

func (log10Ticks) Ticks(lo, hi float64) []plot.Tick {
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
