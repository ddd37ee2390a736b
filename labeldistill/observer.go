package labeldistill

// observer.go: the meta-loop's named points and the observers that attach to them, the way
// GoMLX's train.Loop takes OnStep/OnEnd hooks: progress (here), the run history
// (history.go), checkpoints (checkpoint.go), the meta-gradient statistics (the history's)
// and the data-parallel checks (parallel.go). Distill attaches them in the order
// parallel, history, checkpoints, progress, and each point calls them in that order.

import (
	"time"

	"github.com/ldtorch/ldtorch/torch"
)

// observer is one observer's hooks; any may be nil. A hook's error stops the run.
type observer struct {
	// start: before the first meta-step, after setup and any resume.
	start func(l *loop) error
	// gradient: each meta-step's meta-gradients, combined over the ranks, in the
	// learnables' parameter order, before the learnables take their step.
	gradient func(l *loop, grads []*torch.Tensor) error
	// stepped: after each meta-step, with l.pos the position after it (its outputs may
	// not be read yet).
	stepped func(l *loop) error
	// read: after each meta-step's outputs are read and the reset rule applied, in step
	// order; wantsRead asks for the step just taken to be read at once.
	read      func(l *loop, s stepRecord) error
	wantsRead func(step int) bool
	// validated: after each validation (the record is l.vals' last).
	validated func(l *loop, v ValidationRecord, took time.Duration) error
	// epochEnd: after an epoch's meta-steps and its validation, if one was due.
	epochEnd func(l *loop, epoch int, validated bool) error
	// end: the loop stops before its last epoch; err is why (a cancellation).
	end func(l *loop, err error) error
	// phase: after the meta-loop, the final test and each baseline.
	phase func(l *loop, p phaseRecord) error
	// note: a message (warnings, checkpoints written, a resume, evaluation progress).
	note func(l *loop, p Progress)
	// sync makes what the observer wrote durable (called before a checkpoint).
	sync  func() error
	close func()
}

// phaseRecord is one evaluation phase after the meta-loop: the final test or a baseline.
type phaseRecord struct {
	name, baseline string // "test" or "baseline", and the baseline's key
	mean, std      float64
	took           time.Duration
}

func (l *loop) onStart() error {
	for _, o := range l.observers {
		if o.start != nil {
			if err := o.start(l); err != nil {
				return err
			}
		}
	}
	return nil
}

func (l *loop) onStepped() error {
	for _, o := range l.observers {
		if o.stepped != nil {
			if err := o.stepped(l); err != nil {
				return err
			}
		}
	}
	return nil
}

func (l *loop) onValidated(v ValidationRecord, took time.Duration) error {
	for _, o := range l.observers {
		if o.validated != nil {
			if err := o.validated(l, v, took); err != nil {
				return err
			}
		}
	}
	return nil
}

func (l *loop) onEpochEnd(epoch int, validated bool) error {
	for _, o := range l.observers {
		if o.epochEnd != nil {
			if err := o.epochEnd(l, epoch, validated); err != nil {
				return err
			}
		}
	}
	return nil
}

func (l *loop) onPhase(p phaseRecord) error {
	for _, o := range l.observers {
		if o.phase != nil {
			if err := o.phase(l, p); err != nil {
				return err
			}
		}
	}
	return nil
}

// sync makes every observer's writing durable.
func (l *loop) sync() error {
	for _, o := range l.observers {
		if o.sync != nil {
			if err := o.sync(); err != nil {
				return err
			}
		}
	}
	return nil
}

// progressObserver turns the loop's points into Progress reports for f (WithProgress).
func progressObserver(f func(Progress)) observer {
	report := func(l *loop, p Progress) {
		p.Step, p.Resets, p.T = l.pos.step, len(l.tracker.Resets()), l.T()
		p.MovingError, p.LabelLoss, p.ValidationAccuracy = l.tracker.MovingError(), l.last.loss, l.last.valAcc
		p.AllReduceSeconds = l.par.lastReduce.Seconds()
		f(p)
	}
	total := func(l *loop) int { return l.stepsPerEpoch() * l.in.cfg.Epochs }
	return observer{
		stepped: func(l *loop) error {
			report(l, Progress{Phase: "distill", Epoch: l.pos.epoch, Epochs: l.in.cfg.Epochs, TotalSteps: total(l)})
			return nil
		},
		validated: func(l *loop, v ValidationRecord, _ time.Duration) error {
			report(l, Progress{Phase: "validate", Epoch: v.Epoch, Epochs: l.in.cfg.Epochs, TotalSteps: total(l)})
			return nil
		},
		note: report,
	}
}
