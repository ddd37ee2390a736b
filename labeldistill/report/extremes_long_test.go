//go:build long

package report

import (
	"fmt"
	"math"
	"testing"
)

// TestFiguresBoundedForEachField: each numeric field alone holding each extreme value, on
// every line (a constant series) and on one step line.
func TestFiguresBoundedForEachField(t *testing.T) {
	for _, v := range append(extremeValues, -math.MaxFloat64, -5e-324, 0) {
		for name, set := range floatFields {
			every := extremeHistory()
			for i := range every {
				set(&every[i], v)
			}
			drawBounded(t, fmt.Sprintf("%s %g on every line", name, v), every)
			one := extremeHistory()
			set(&one[3], v)
			drawBounded(t, fmt.Sprintf("%s %g on one line", name, v), one)
		}
	}
}
