package engine

import (
	"errors"
	"fmt"

	"github.com/ldtorch/ldtorch/torch"
)

// read.go: reading the meta-steps' outputs back from the device, several steps at once:
// their checks, the reset rule, and the observers' Read hook, in step order.

// readEvery is how many meta-steps' outputs (label loss, target error, the learnt values'
// sums, ridge status) the meta-loop reads back together, at most: each read waits for the
// GPU to finish everything queued, so reading every step would stall it once per step. The
// reset rule still sees every step's error, in order, and a reset still happens right after
// the step that calls for it (readDue), so the run is the one that reading every step gives,
// bit for bit. A non-finite loss or learnt value is reported, naming its step, at the next
// read, before any history line, validation or checkpoint.
const readEvery = 16

// pendingStep is a meta-step whose outputs have not been read yet.
type pendingStep struct {
	reading     *torch.Tensor // stepOutputs.vector: float64, owned by the loop
	batch       int64
	step, epoch int
}

// readDue reports whether the unread meta-steps must be read now: readEvery of them are
// waiting; a model reset could follow the latest (the tracker cannot reset in its next
// QuietSteps() observations whatever the errors, so the step after those is read at once
// and a reset is decided, and the model re-initialised, before the next meta-step); or an
// observer wants the latest step read (the history, for its line).
func (l *Loop) readDue() bool {
	n := len(l.pending)
	if n >= readEvery || n > l.tracker.QuietSteps() {
		return true
	}
	for _, o := range l.observers {
		if o.WantsRead != nil && o.WantsRead(l.pos.Step) {
			return true
		}
	}
	return false
}

// StepRecord is what a read meta-step reports to the observers.
type StepRecord struct {
	Step, Epoch int
	Stats       StepStats
}

// read reads the unread meta-steps' outputs in one copy and applies them in step order: the
// checks (ridge solve, finite label loss, finite learnt values), the reset rule
// (re-initialising the model when it calls for it: only the latest step can, by readDue),
// and the observers' read hook.
func (l *Loop) read() error {
	if len(l.pending) == 0 {
		return nil
	}
	pending := l.pending
	l.pending = nil
	defer func() {
		for _, p := range pending {
			p.reading.Free()
		}
	}()
	s := torch.NewScope()
	defer s.Close()
	vs := make([]*torch.Tensor, len(pending))
	for i, p := range pending {
		vs[i] = p.reading
	}
	all, err := torch.Cat(vs, 0)
	if err != nil {
		return err
	}
	vals, err := all.Float64s()
	if err != nil {
		return err
	}
	size := len(vals) / len(pending)
	for i, p := range pending {
		st, err := l.checkReading(vals[i*size:(i+1)*size], p.batch)
		if err != nil {
			var nf *NonFiniteError
			if errors.As(err, &nf) {
				nf.Step = p.step
			}
			return fmt.Errorf("meta-step %d (epoch %d): %w", p.step, p.epoch, err)
		}
		latest := i == len(pending)-1
		l.last.loss, l.last.err = st.LabelLoss, st.Error
		// Method dd's network is initialised afresh at every meta-step: no reset rule.
		if l.dd == nil && l.tracker.Observe(st.Error) {
			if !latest {
				return fmt.Errorf("labeldistill: internal error: a model reset at meta-step %d, before the latest unread step %d", p.step, l.pos.Step)
			}
			if err := l.model.reset(l.rand.gen); err != nil {
				return fmt.Errorf("meta-step %d (epoch %d): model reset: %w", p.step, p.epoch, err)
			}
		}
		rec := StepRecord{Step: p.step, Epoch: p.epoch, Stats: st}
		for _, o := range l.observers {
			if o.Read != nil {
				if err := o.Read(l, rec); err != nil {
					return o.wrap(err)
				}
			}
		}
	}
	return nil
}

// checkReading is checkReading of one step with its learnt values' sums checked, each
// named by its learnable.
func (l *Loop) checkReading(v []float64, batch int64) (StepStats, error) {
	st, err := checkReading(v, batch)
	if err != nil {
		var nf *NonFiniteError
		if errors.As(err, &nf) {
			if l.dd != nil { // no labels: the loss of the unrolled training on the target batch
				nf.Quantity = "target loss after the unrolled steps"
				nf.blame(l.in, blameDD)
			} else {
				nf.blame(l.in, blameLoss)
			}
		}
		return st, err
	}
	sums := v[readSums:]
	for _, lv := range l.learnt {
		for range lv.params() {
			if !finite(sums[0]) {
				e := &NonFiniteError{Quantity: learntWhat(lv) + " (sum after the step)", Value: sums[0]}
				e.blame(l.in, learntBlame(lv))
				return st, e
			}
			sums = sums[1:]
		}
	}
	for i, g := range l.stateGuards() {
		if i < len(sums) && !finite(sums[i]) {
			e := &NonFiniteError{Quantity: g.what, Value: sums[i]}
			e.blame(l.in, g.blame)
			return st, e
		}
	}
	return st, nil
}
