package report

import (
	"bytes"
	"image/png"
	"testing"
)

// TestAccuracyFigureColoursGainsAndLosses: in the right-hand panel a gain over a baseline
// is a green bar and a loss a red one, so a loss never looks like a gain.
func TestAccuracyFigureColoursGainsAndLosses(t *testing.T) {
	entries := []accuracyEntry{
		{name: "distilled (LD)", mean: 60, std: 1, models: 20},
		{name: "true labels", mean: 80, std: 1, models: 20},
		{name: "random labels", mean: 50, std: 2, models: 20},
	}
	for _, c := range []struct {
		name               string
		improvements       []float64
		wantGreen, wantRed bool
	}{
		{"a loss and a gain", []float64{-20, 10}, true, true},
		{"gains only", []float64{3, 10}, true, false},
		{"losses only", []float64{-22.1}, false, true},
	} {
		var imp []accuracyEntry
		for i, v := range c.improvements {
			imp = append(imp, accuracyEntry{name: entries[1+i].name, mean: v})
		}
		b, err := accuracyFigure(entries, imp)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: not a PNG: %v", c.name, err)
		}
		count := func(want [3]uint32) int {
			n := 0
			r := img.Bounds()
			for y := r.Min.Y; y < r.Max.Y; y++ {
				for x := r.Min.X; x < r.Max.X; x++ {
					cr, cg, cb, _ := img.At(x, y).RGBA()
					if [3]uint32{cr >> 8, cg >> 8, cb >> 8} == want {
						n++
					}
				}
			}
			return n
		}
		g := count([3]uint32{uint32(green.R), uint32(green.G), uint32(green.B)})
		r := count([3]uint32{uint32(red.R), uint32(red.G), uint32(red.B)})
		// A bar is at least 40 points wide and several points tall: hundreds of pixels.
		if (g > 500) != c.wantGreen || (r > 500) != c.wantRed || (!c.wantGreen && g > 0) || (!c.wantRed && r > 0) {
			t.Errorf("%s: %d green and %d red pixels, want green %v, red %v", c.name, g, r, c.wantGreen, c.wantRed)
		}
	}
}
