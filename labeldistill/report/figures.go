package report

// figures.go: the figures, drawn with gonum.org/v1/plot and written as PNG: the layout
// shared by all of them, and the figures of the distilled images (reconstructions, learnt
// images); labelfigures.go draws the labels, curves.go the run's history.

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"math"
	"strings"
	"unicode/utf8"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
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
	for _, r := range plots {
		for _, p := range r {
			if p != nil {
				boundAxis(&p.X.Min, &p.X.Max)
				boundAxis(&p.Y.Min, &p.Y.Max)
			}
		}
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

// axisLimit bounds an axis's range: ±1e300 leaves room for the padding the figures add
// (a span of twice it is still finite).
const axisLimit = 1e300

// boundAxis makes an axis range [*lo, *hi] one that gonum's ticks and scales can handle,
// whatever the values drawn (any float64 in a run's history, an edited one included): a
// non-finite end is replaced, both ends are held within ±axisLimit (the values beyond are
// drawn clipped at the edge), and a range narrower than a millionth of its magnitude (a
// constant series, or one value) is widened around its middle. gonum's default ticks
// panic on an empty range, and step through a range too narrow for float64's resolution
// or too wide to subtract forever, while their slice grows until the process runs out of
// memory.
func boundAxis(lo, hi *float64) {
	a, b := *lo, *hi
	if math.IsNaN(a) || math.IsInf(a, 1) {
		a = math.Min(0, b)
	}
	if math.IsNaN(b) || math.IsInf(b, -1) {
		b = math.Max(a+1, 1)
	}
	a = math.Max(-axisLimit, math.Min(a, axisLimit))
	b = math.Max(-axisLimit, math.Min(b, axisLimit))
	if b < a {
		a, b = b, a
	}
	if minSpan := math.Max(1e-6*math.Max(math.Abs(a), math.Abs(b)), 1e-300); b-a < minSpan {
		mid := a/2 + b/2
		a, b = mid-minSpan, mid+minSpan
	}
	*lo, *hi = a, b
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
// longestName is the length in runes of the longest of names.
func longestName(names []string) int {
	n := 0
	for _, s := range names {
		n = max(n, utf8.RuneCountInString(s))
	}
	return n
}

func nominal(names []string) plot.ConstantTicks {
	t := make(plot.ConstantTicks, len(names))
	for i, n := range names {
		t[i] = plot.Tick{Value: float64(i), Label: n}
	}
	return t
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
// powers, often a single tick on these plots). An axis spanning less than that (a factor of
// 2.5 between 2 and 5, say) would show one label or none, which gives no scale: there every
// multiple of the power of ten is labelled, and where even those leave fewer than two labels,
// the linear ticks of the range are.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	if !(lo > 0) || !(hi > lo) {
		return ticks
	}
	hi = math.Min(hi, math.MaxFloat64) // an infinite end: the loop below would not end
	wide := math.Log10(hi/lo) > 2      // then only the powers of ten get labels
	for e := math.Floor(math.Log10(lo)); e <= math.Min(math.Ceil(math.Log10(hi)), 308); e++ {
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
	if labelledTicks(ticks) < 2 {
		for i := range ticks {
			ticks[i].Label = fmt.Sprintf("%.3g", ticks[i].Value)
		}
	}
	if labelledTicks(ticks) < 2 {
		return compactTicks{}.Ticks(lo, hi)
	}
	return ticks
}

func labelledTicks(ticks []plot.Tick) int {
	n := 0
	for _, t := range ticks {
		if t.Label != "" {
			n++
		}
	}
	return n
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

// wrapTitle breaks the lines of title that would not fit a figure width inches wide (the
// title font's average advance is about 0.07 inch per character) at spaces.
func wrapTitle(title string, width float64) string {
	limit := max(20, int((width-0.3)/0.07))
	var out []string
	for _, line := range strings.Split(title, "\n") {
		for utf8.RuneCountInString(line) > limit {
			r := []rune(line)
			cut := strings.LastIndex(string(r[:limit]), " ")
			if cut <= 0 {
				break
			}
			out = append(out, line[:cut])
			line = line[cut+1:]
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
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
	canvas, put := imageGrid(classes, cols, h, w)
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
	side := math.Max(3, 0.45*float64(cols))
	height := math.Max(3, 0.45*float64(classes)+1)
	width := side + 1.8
	p := newPlot(wrapTitle("Label-weighted combination of the base images per target class\n"+subtitle, width))
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
	return renderPNG([][]*plot.Plot{{p}}, vg.Length(width)*vg.Inch, vg.Length(height)*vg.Inch)
}

// learntImagesFigure: per class, learnt images of the class (pix, n images in [0, 1] with
// their classes) beside real examples of the class, one row per class.
func learntImagesFigure(pix []float64, classOf []int64, real [][][]float64, c, h, w int, names []string, perClass int, subtitle string) ([]byte, error) {
	classes := len(names)
	size := c * h * w
	byClass := make([][]int, classes)
	for i, k := range classOf {
		if k >= 0 && int(k) < classes && len(byClass[k]) < perClass {
			byClass[k] = append(byClass[k], i)
		}
	}
	learnt, realCols := 0, 0
	for k := 0; k < classes; k++ {
		learnt = max(learnt, len(byClass[k]))
		if k < len(real) {
			realCols = max(realCols, len(real[k]))
		}
	}
	if learnt == 0 {
		return nil, fmt.Errorf("report: no learnt image has a class among the first %d", classes)
	}
	sep := 0 // an empty column between the learnt and the real images
	if realCols > 0 {
		sep = 1
	}
	cols := learnt + sep + realCols
	canvas, put := imageGrid(classes, cols, h, w)
	for k := 0; k < classes; k++ {
		for j, i := range byClass[k] {
			put(toImage(pix[i*size:(i+1)*size], c, h, w), k, j)
		}
		if k < len(real) {
			for j, r := range real[k] {
				put(toImage(r, c, h, w), k, learnt+sep+j)
			}
		}
	}
	p := newPlot("Learnt images per class, beside real images of the class\n" + subtitle)
	p.Add(plotter.NewImage(canvas, 0, 0, float64(cols), float64(classes)))
	yt := make(plot.ConstantTicks, classes)
	for k := 0; k < classes; k++ {
		yt[k] = plot.Tick{Value: float64(classes-k) - 0.5, Label: names[k]}
	}
	p.Y.Tick.Marker = yt
	xt := plot.ConstantTicks{{Value: float64(learnt) / 2, Label: "learnt"}}
	if realCols > 0 {
		xt = append(xt, plot.Tick{Value: float64(learnt+sep) + float64(realCols)/2, Label: "real"})
	}
	p.X.Tick.Marker = xt
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = 0, float64(cols), 0, float64(classes)
	p.Y.Tick.Label.Font.Size = vg.Points(9)
	p.X.Tick.Label.Font.Size = vg.Points(9)
	side := math.Max(3, 0.45*float64(cols))
	height := math.Max(3, 0.45*float64(classes)+1)
	return renderPNG([][]*plot.Plot{{p}}, vg.Length(side+1.8)*vg.Inch, vg.Length(height)*vg.Inch)
}

// imageGrid is a white canvas of rows × cols cells of h×w pixels, 2 pixels apart, and put,
// which draws an image into the cell (row, col).
func imageGrid(rows, cols, h, w int) (canvas *image.RGBA, put func(img image.Image, row, col int)) {
	const gap = 2
	cellW, cellH := w+gap, h+gap
	canvas = image.NewRGBA(image.Rect(0, 0, cols*cellW, rows*cellH))
	for i := range canvas.Pix {
		canvas.Pix[i] = 255
	}
	put = func(img image.Image, row, col int) {
		b := img.Bounds()
		for y := 0; y < b.Dy(); y++ {
			for x := 0; x < b.Dx(); x++ {
				canvas.Set(col*cellW+x, row*cellH+y, img.At(x, y))
			}
		}
	}
	return canvas, put
}
