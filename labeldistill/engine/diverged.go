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
// run, "lr" for Evaluate); where none does (method dd's models train with the artifact's
// learnt step sizes), Field is empty and Cause says what is at fault.
type DivergedError struct {
	Purpose string // "validation after epoch 3", "final test", "baseline true", "evaluate"
	Models  int
	Steps   int
	Field   string
	LR      float64
	Cause   string // when Field is empty: "the artifact's learnt step sizes (largest 1e+20) are too large"
}

func (e *DivergedError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s: all %d evaluation model(s) diverged (non-finite parameters after %d training steps): %s",
			e.Purpose, e.Models, e.Steps, e.Cause)
	}
	return fmt.Sprintf("%s: all %d evaluation model(s) diverged (non-finite parameters after %d training steps); %s %g is too large for them",
		e.Purpose, e.Models, e.Steps, e.Field, e.LR)
}

// LearntStepsCause is DivergedError's Cause for models trained with an artifact's learnt
// step sizes (method dd's recipe).
func LearntStepsCause[T float32 | float64](lrs []T) string {
	top := 0.0
	for _, v := range lrs {
		top = max(top, float64(v))
	}
	return fmt.Sprintf("the artifact's learnt step sizes (step_lrs of distilled.npz, the largest %.3g) are too large for fresh models; "+
		"no setting of this command changes them (the standard recipe, with --steps, trains with Adam instead)", top)
}
