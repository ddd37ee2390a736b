package config

import (
	"strings"
	"testing"
)

// TestDDUnrolledStepsBounded: method dd's T = dd_steps × dd_epochs is bounded like every
// count that spawns memory, in the one wording, naming both settings; products beyond
// int32 included.
func TestDDUnrolledStepsBounded(t *testing.T) {
	for _, tc := range []struct {
		steps, epochs int
		want          string // "" : valid
	}{
		{10, 3, ""},
		{1, MaxDDUnrolledSteps, ""},
		{1, MaxDDUnrolledSteps + 1, "dd_epochs: dd_steps × dd_epochs must be between 1 and 10000, got 1 × 10001 = 10001 (unrolled steps"},
		{1, 100_000_000, "got 1 × 100000000 = 100000000"},
		{10, 2147483647, "got 10 × 2147483647 = 21474836470"},
	} {
		c := Default()
		c.Method, c.Learn, c.DDSteps, c.DDEpochs, c.BaseExamples = MethodDD, LearnImages, tc.steps, tc.epochs, 10*tc.steps
		err := c.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%d × %d: %v", tc.steps, tc.epochs, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%d × %d: %v, want %q", tc.steps, tc.epochs, err, tc.want)
		}
	}
}
