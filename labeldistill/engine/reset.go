// The reset rule and the number of training steps T (docs/ALGORITHM.md §6), pure Go: a moving
// window of the last G top-1 errors decides when the distillation model has overfitted and
// must be re-initialised, and records how many steps it took to get there.

package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
)

// ResetTracker implements the reset rule of docs/ALGORITHM.md §6 with G = N_m = N_w = window.
// Call Observe once per meta-step, after that step's updates, with the step's top-1 error
// (percent); when it returns true, re-initialise the model (§4/§5). The statistics carry
// across epochs. The zero value is not usable; use NewResetTracker. The tracker's whole
// state round-trips through encoding/json (MarshalJSON / UnmarshalJSON) for checkpoints.
//
// Reference pseudo-code (the authors' code, per step, err = this step's error):
//
//	if len(window) < G:                       # filling
//	    window.append(err); steps += 1
//	    if steps == G: best = sum(window); since_best = 0
//	else:
//	    window = window[1:] + [err]; steps += 1
//	    if sum(window) < best:  best = sum(window); since_best = 0   # strictly below
//	    elif since_best < G:    since_best += 1
//	    else:                                                       # reset
//	        T.append(steps - since_best - 1)
//	        window = []; best = +inf; steps = 0; since_best = 0
//	        re-initialise model (and its optimiser)
//
// Here steps counts the steps since the last reset (since the start of the run before the
// first reset), so a reset's T_i = steps − since_best − 1 is the step, counted from the
// last reset, at which the best window ended: if the best window ends at step b, the
// counter reaches G at step b+G and the reset happens at step b+G+1 with T_i = b. Hence
// T_i ≥ G, and a model lives at least 2G+1 steps.
//
// Window sums are compared exactly: the sum of the window is recomputed from the stored
// errors with exact (arbitrary-precision) arithmetic, and the best window is kept as its
// errors. The reference keeps a running float sum (sum − oldest + newest), which can drift
// by rounding and then see a spurious "strictly below" between windows of equal true sum;
// errors of full 1024-example batches (multiples of 100/1024) are exact in either scheme, so
// the two agree except for such ties.
type ResetTracker struct {
	window     int
	meanOfLast int

	errs      []float64  // the last ≤ window errors since the last reset, oldest first
	best      []float64  // the window with the lowest sum; nil until the window is first full
	bestSum   *big.Float // exact sum of best (derived, not serialised)
	steps     int        // steps since the last reset (since the start before the first)
	sinceBest int        // steps since the best window ended, saturating at window
	total     int        // steps since the start of the run
	resets    []int      // recorded T_i, oldest first
}

// exactPrec holds the exact sum of up to 2^100 float64 values: their set bits span at most
// 1074 + 1024 bits plus carries.
const exactPrec = 2200

func exactSum(xs []float64) *big.Float {
	s := new(big.Float).SetPrec(exactPrec)
	var x big.Float
	for _, v := range xs {
		s.Add(s, x.SetFloat64(v))
	}
	return s
}

// NewResetTracker returns a tracker with window G (= N_m = N_w) and T averaged over the last
// meanOfLast T_i. It panics when either is not positive (Config.Validate rejects those).
func NewResetTracker(window, meanOfLast int) *ResetTracker {
	if window < 1 || meanOfLast < 1 {
		panic(fmt.Sprintf("labeldistill: NewResetTracker(%d, %d): window and meanOfLast must be positive",
			window, meanOfLast))
	}
	return &ResetTracker{window: window, meanOfLast: meanOfLast}
}

// Observe records one meta-step's top-1 error (percent) and reports whether the model must
// be reset now. It panics on NaN or ±Inf (an error rate is always finite).
func (r *ResetTracker) Observe(errPercent float64) (reset bool) {
	if math.IsNaN(errPercent) || math.IsInf(errPercent, 0) {
		panic(fmt.Sprintf("labeldistill: ResetTracker.Observe(%v): error must be finite", errPercent))
	}
	r.total++
	r.steps++
	if len(r.errs) < r.window { // filling
		r.errs = append(r.errs, errPercent)
		if len(r.errs) == r.window {
			r.best = append([]float64(nil), r.errs...)
			r.bestSum = exactSum(r.best)
			r.sinceBest = 0
		}
		return false
	}
	copy(r.errs, r.errs[1:])
	r.errs[len(r.errs)-1] = errPercent
	sum := exactSum(r.errs)
	switch {
	case sum.Cmp(r.bestSum) < 0:
		r.best = append(r.best[:0], r.errs...)
		r.bestSum = sum
		r.sinceBest = 0
	case r.sinceBest < r.window:
		r.sinceBest++
	default:
		r.resets = append(r.resets, r.steps-r.sinceBest-1)
		r.errs = r.errs[:0]
		r.best = nil
		r.bestSum = nil
		r.steps = 0
		r.sinceBest = 0
		return true
	}
	return false
}

// QuietSteps returns how many of the next observations cannot call for a reset, whatever
// errors they bring: a reset needs a full window whose best ended window steps ago, so
// while the window fills (f < G errors) the next G − f observations fill it and the G after
// those can at most age its best; with a full window, G − since_best observations can.
// The meta-loop reads errors back in batches of at most this many steps plus one, so that
// a reset is never decided late.
func (r *ResetTracker) QuietSteps() int {
	if len(r.errs) < r.window {
		return 2*r.window - len(r.errs)
	}
	return r.window - r.sinceBest
}

// T is the number of steps to train fresh models for (docs/ALGORITHM.md §6): int(mean of the
// last meanOfLast recorded T_i) (fewer when fewer were recorded); before any reset, the
// number of steps observed so far in the run (0 before the first step).
func (r *ResetTracker) T() int {
	if len(r.resets) == 0 {
		return r.total
	}
	last := r.resets[max(0, len(r.resets)-r.meanOfLast):]
	sum := 0
	for _, t := range last {
		sum += t
	}
	return sum / len(last) // = int(np.mean(...)) for non-negative integers
}

// Resets returns a copy of the recorded T_i, oldest first.
func (r *ResetTracker) Resets() []int { return append([]int(nil), r.resets...) }

// Window returns G.
func (r *ResetTracker) Window() int { return r.window }

// MeanOfLast returns how many of the last T_i T averages.
func (r *ResetTracker) MeanOfLast() int { return r.meanOfLast }

// StepsSinceReset returns the steps observed since the last reset (since the start of the
// run before the first reset).
func (r *ResetTracker) StepsSinceReset() int { return r.steps }

// TotalSteps returns the steps observed since the start of the run.
func (r *ResetTracker) TotalSteps() int { return r.total }

// SinceBest returns the steps since the best window ended (0 while the window fills).
func (r *ResetTracker) SinceBest() int { return r.sinceBest }

// MovingError returns the mean error of the current window (the moving average the rule
// watches), NaN when it is empty; for logging.
func (r *ResetTracker) MovingError() float64 {
	if len(r.errs) == 0 {
		return math.NaN()
	}
	m, _ := exactSum(r.errs).Float64()
	return m / float64(len(r.errs))
}

// resetState is the serialised form of a ResetTracker.
type resetState struct {
	Window          int       `json:"window"`
	MeanOfLast      int       `json:"mean_of_last"`
	Errors          []float64 `json:"errors"`
	BestErrors      []float64 `json:"best_errors"`
	StepsSinceReset int       `json:"steps_since_reset"`
	SinceBest       int       `json:"since_best"`
	TotalSteps      int       `json:"total_steps"`
	Resets          []int     `json:"resets"`
}

// MarshalJSON writes the tracker's complete state (value receiver, so that a tracker held
// by value in a struct serialises too). float64 values round-trip exactly
// through encoding/json, so a restored tracker continues bit-identically.
func (r ResetTracker) MarshalJSON() ([]byte, error) {
	return json.Marshal(resetState{
		Window:          r.window,
		MeanOfLast:      r.meanOfLast,
		Errors:          append([]float64{}, r.errs...),
		BestErrors:      r.best,
		StepsSinceReset: r.steps,
		SinceBest:       r.sinceBest,
		TotalSteps:      r.total,
		Resets:          append([]int{}, r.resets...),
	})
}

// UnmarshalJSON restores a state written by MarshalJSON, rejecting inconsistent states.
func (r *ResetTracker) UnmarshalJSON(data []byte) error {
	var s resetState
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	if err := s.check(); err != nil {
		return fmt.Errorf("reset tracker state: %w", err)
	}
	*r = ResetTracker{
		window:     s.Window,
		meanOfLast: s.MeanOfLast,
		errs:       append(make([]float64, 0, s.Window), s.Errors...),
		steps:      s.StepsSinceReset,
		sinceBest:  s.SinceBest,
		total:      s.TotalSteps,
		resets:     append([]int(nil), s.Resets...),
	}
	if s.BestErrors != nil {
		r.best = append([]float64(nil), s.BestErrors...)
		r.bestSum = exactSum(r.best)
	}
	return nil
}

func (s resetState) check() error {
	switch {
	case s.Window < 1 || s.MeanOfLast < 1:
		return fmt.Errorf("window %d and mean_of_last %d must be positive", s.Window, s.MeanOfLast)
	case len(s.Errors) > s.Window:
		return fmt.Errorf("%d errors exceed the window %d", len(s.Errors), s.Window)
	case len(s.Errors) < s.Window && s.StepsSinceReset != len(s.Errors):
		return fmt.Errorf("steps_since_reset %d must equal the %d errors of a filling window",
			s.StepsSinceReset, len(s.Errors))
	case len(s.Errors) < s.Window && (s.BestErrors != nil || s.SinceBest != 0):
		return errors.New("a filling window has no best window yet")
	case len(s.Errors) == s.Window && len(s.BestErrors) != s.Window:
		return fmt.Errorf("best_errors has %d values, want %d", len(s.BestErrors), s.Window)
	case s.SinceBest < 0 || s.SinceBest > s.Window || s.SinceBest > s.StepsSinceReset-len(s.Errors):
		return fmt.Errorf("since_best %d out of range", s.SinceBest)
	case s.TotalSteps < s.StepsSinceReset:
		return fmt.Errorf("total_steps %d is below steps_since_reset %d", s.TotalSteps, s.StepsSinceReset)
	}
	for _, v := range append(append([]float64(nil), s.Errors...), s.BestErrors...) {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return errors.New("errors must be finite")
		}
	}
	for _, t := range s.Resets {
		if t < s.Window {
			return fmt.Errorf("recorded T %d is below the window %d", t, s.Window)
		}
	}
	return nil
}
