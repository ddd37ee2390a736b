package labeldistill

// diverged.go: noticing evaluation models that diverged (a learning rate too large makes
// their parameters NaN or infinite; such a model predicts one class everywhere and would
// be scored like any other). Each trained model's parameters are checked once, after its
// training, with one reduction and one host read per model: nothing is added per step.

import (
	"fmt"
	"math"

	"github.com/ldtorch/ldtorch/torch"
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

// allFinite reports whether every value of ts is finite: Σ sum(t) is finite unless a value
// is NaN or infinite (or the values are so large that their sum overflows, which is a
// diverged model too).
func allFinite(ts ...*torch.Tensor) (bool, error) {
	s := torch.NewScope()
	defer s.Close()
	var total float64
	err := torch.NoGrad(func() error {
		var acc *torch.Tensor
		for _, t := range ts {
			if t == nil {
				continue
			}
			sum, err := t.Sum()
			if err != nil {
				return err
			}
			if sum, err = sum.ToDType(torch.Double); err != nil {
				return err
			}
			if acc == nil {
				acc = sum
			} else if acc, err = acc.Add(sum); err != nil {
				return err
			}
		}
		if acc == nil {
			return nil
		}
		v, err := acc.Item()
		total = v
		return err
	})
	return finite(total), err
}

// divergedEach reports for every model whether its parameters (and RR head) hold a
// non-finite value.
func (l *batchedLearner) divergedEach() ([]bool, error) {
	out := make([]bool, len(l.params))
	for i, p := range l.params {
		ts := append([]*torch.Tensor{}, p...)
		if l.rr {
			ts = append(ts, l.w[i], l.scale[i])
		}
		ok, err := allFinite(ts...)
		if err != nil {
			return nil, err
		}
		out[i] = !ok
	}
	return out, nil
}

// keepFinite drops the accuracies of diverged models (NaN, as evaluateModels returns them)
// and counts them.
func keepFinite(accs []float64) (kept []float64, diverged int) {
	kept = make([]float64, 0, len(accs))
	for _, a := range accs {
		if math.IsNaN(a) {
			diverged++
			continue
		}
		kept = append(kept, a)
	}
	return kept, diverged
}
