package engine

// diverged.go: noticing evaluation models that diverged (a learning rate too large makes
// their parameters NaN or infinite; such a model predicts one class everywhere and would
// be scored like any other). Each trained model's parameters are checked once, after its
// training, with one reduction and one host read per model: nothing is added per step.

import (
	"fmt"
)

// DivergedError reports that every evaluation model of a purpose diverged, so there is no
// accuracy to report. Field is the setting that controls their training ("eval_lr" in a
// run, "lr" for Evaluate).
type DivergedError struct {
	Purpose string // "validation after epoch 3", "final test", "baseline true", "evaluate"
	Models  int
	Steps   int
	Field   string
	LR      float64
}

func (e *DivergedError) Error() string {
	return fmt.Sprintf("%s: all %d evaluation model(s) diverged (non-finite parameters after %d training steps); %s %g is too large for them",
		e.Purpose, e.Models, e.Steps, e.Field, e.LR)
}
