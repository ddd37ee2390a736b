package report

import (
	"strings"
	"testing"
)

// TestLogTicksGiveEveryAxisAScale: a log axis is readable only with two labels or more, also
// where its range holds no power of ten and at most one of 1, 2 or 5 times one (a meta-gradient
// variance from 1.05e-7 to 4.3e-7 got the single label "2e-07"); labels lie inside the range,
// the labelled ones in order and distinct; wide ranges keep labels on the powers of ten only.
func TestLogTicksGiveEveryAxisAScale(t *testing.T) {
	for _, c := range []struct {
		lo, hi    float64
		wantExact []string // the labels, where the 1-2-5 rule gives them
	}{
		{lo: 0.013, hi: 0.17, wantExact: []string{"0.02", "0.05", "0.1"}},
		{lo: 1e-3, hi: 1e3, wantExact: []string{"0.001", "0.01", "0.1", "1", "10", "100", "1e+03"}},
		{lo: 1.05e-7, hi: 4.3e-7},
		{lo: 2.1e-7, hi: 2.9e-7},
		{lo: 61, hi: 64},
	} {
		ticks := logTicks{}.Ticks(c.lo, c.hi)
		var labels []string
		last := 0.0
		for _, tk := range ticks {
			if tk.Value < c.lo || tk.Value > c.hi {
				t.Errorf("[%g, %g]: tick %g out of the range", c.lo, c.hi, tk.Value)
			}
			if tk.Label != "" {
				if tk.Value <= last {
					t.Errorf("[%g, %g]: label %q at %g out of order", c.lo, c.hi, tk.Label, tk.Value)
				}
				last = tk.Value
				labels = append(labels, tk.Label)
			}
		}
		if c.wantExact != nil {
			if strings.Join(labels, " ") != strings.Join(c.wantExact, " ") {
				t.Errorf("[%g, %g]: labels %q, want %q", c.lo, c.hi, labels, c.wantExact)
			}
			continue
		}
		if len(labels) < 2 {
			t.Errorf("[%g, %g]: labels %q, want two or more", c.lo, c.hi, labels)
		}
		seen := map[string]bool{}
		for _, l := range labels {
			if seen[l] {
				t.Errorf("[%g, %g]: label %q twice in %q", c.lo, c.hi, l, labels)
			}
			seen[l] = true
		}
	}
}
