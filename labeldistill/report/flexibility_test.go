package report

import (
	"bytes"
	"image/png"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/results"
)

// TestFlexibilityFigure: the figure is a PNG of three panels side by side, each drawing
// both methods in their colours (LD blue, DD orange), the true-label baseline in grey.
func TestFlexibilityFigure(t *testing.T) {
	pt := func(label string, x, mean float64, own bool) results.Point {
		return results.Point{Label: label, X: x, Steps: 10, Mean: mean, Std: 1, Models: 3, Own: own}
	}
	f := &results.Flexibility{Study: "flexibility", Dataset: "mnist", MethodName: "LD", VersusName: "DD", Panels: []results.Panel{
		{Name: results.FlexSteps, Title: "(a) training steps", XLabel: "steps ÷ T", Series: []results.Series{
			{Name: "LD (T = 278)", Method: "LD", Labels: "distilled", Points: []results.Point{pt("T-50", 0.82, 86, false), pt("T+0", 1, 87, true), pt("T+100", 1.36, 86.5, false)}},
			{Name: "DD (T = 30)", Method: "DD", Labels: "distilled", Points: []results.Point{pt("10", 1.0/3, 36, false), pt("30", 1, 77, true), pt("35", 35.0/30, 54, false)}},
		}},
		{Name: results.FlexOptimisation, Title: "(b) optimisation settings", Series: []results.Series{
			{Name: "LD: off-the-shelf optimisers", Method: "LD", Labels: "distilled", Points: []results.Point{pt("LD: Adam lr 0.001 (own recipe)", 0, 87, true), pt("LD: sgd momentum 0.9 lr 0.01", 1, 85, false)}},
			{Name: "DD: its recipe changed", Method: "DD", Labels: "distilled", Points: []results.Point{pt("DD: own recipe", 2, 77, true), pt("DD: mean step size", 3, 62, false),
				{Label: "DD: shuffled within epochs", X: 4, Diverged: 3}}},
		}},
		{Name: results.FlexArch, Title: "(c) architectures", Series: []results.Series{
			{Name: "LD (distilled with lenet)", Method: "LD", Labels: "distilled", Points: []results.Point{pt("lenet", 0, 87, true), pt("resnet", 1, 80, false)}},
			{Name: "DD (distilled with lenet)", Method: "DD", Labels: "distilled", Points: []results.Point{pt("lenet", 0, 77, true), pt("resnet", 1, 40, false)}},
			{Name: "true labels of the same base images", Method: "LD", Labels: "true", Points: []results.Point{pt("lenet", 0, 80, false), pt("resnet", 1, 70, false)}},
		}},
	}}
	b, err := FlexibilityFigure(f)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	w, h := img.Bounds().Dx(), img.Bounds().Dy()
	if w != 21*dpi || h != 6.5*dpi {
		t.Fatalf("figure %d×%d, want %d×%d", w, h, 21*dpi, int(6.5*dpi))
	}
	// Count each colour's pixels in each third of the figure (a panel each).
	type rgb struct{ r, g, b uint32 }
	want := map[string]rgb{"blue": {31, 119, 180}, "orange": {255, 127, 14}, "grey": {150, 150, 150}}
	for third := 0; third < 3; third++ {
		n := map[string]int{}
		for x := third * w / 3; x < (third+1)*w/3; x++ {
			for y := 0; y < h; y++ {
				r, g, bl, _ := img.At(x, y).RGBA()
				for name, c := range want {
					if r>>8 == c.r && g>>8 == c.g && bl>>8 == c.b {
						n[name]++
					}
				}
			}
		}
		for _, name := range []string{"blue", "orange"} {
			if n[name] < 200 {
				t.Errorf("panel %d: %d %s pixels; each panel draws both methods", third+1, n[name], name)
			}
		}
		if third == 2 && n["grey"] < 200 {
			t.Errorf("architecture panel: %d grey pixels; it draws the true-label baseline", n["grey"])
		}
	}
	f.Panels = f.Panels[:2]
	if _, err := FlexibilityFigure(f); err == nil {
		t.Error("a figure of two panels accepted")
	}
}
