package engine

// observer.go: the meta-loop's named points and the observers that attach to them, the way
// GoMLX's train.Loop takes OnStep/OnEnd hooks: progress (here), the run history
// (history.go), checkpoints (checkpoint.go), the meta-gradient statistics (the history's)
// and the data-parallel checks (parallel.go). Distill attaches them in the order
// parallel, history, checkpoints, progress, and each point calls them in that order.

import (
	"time"

	"github.com/ldtorch/ldtorch/torch"
)

// Observer is one observer's hooks, attached to the loop's named points; any hook may be
// nil. A hook's error stops the run, wrapped with the observer's Name.
type Observer struct {
	// Name names the observer in errors ("history", "checkpoints", …).
	Name string
	// Start: before the first meta-step, after setup and any resume.
	Start func(l *Loop) error
	// Gradient: each meta-step's meta-gradients, combined over the ranks, in the
	// learnables' parameter order, before the learnables take their step.
	Gradient func(l *Loop, grads []*torch.Tensor) error
	// Stepped: after each meta-step, with l.Position() the Position after it (its outputs
	// may not be read yet).
	Stepped func(l *Loop) error
	// Read: after each meta-step's outputs are read and the reset rule applied, in step
	// order; WantsRead asks for the step just taken to be read at once.
	Read      func(l *Loop, s StepRecord) error
	WantsRead func(step int) bool
	// Validated: after each validation (the record is the last of l.Validations()).
	Validated func(l *Loop, v ValidationRecord, took time.Duration) error
	// EpochEnd: after an epoch's meta-steps and its validation, if one was due.
	EpochEnd func(l *Loop, epoch int, validated bool) error
	// End: the loop stops before its last epoch; err is why (a cancellation).
	End func(l *Loop, err error) error
	// Phase: after the meta-loop, the final test and each baseline.
	Phase func(l *Loop, p PhaseRecord) error
	// Note: a message (warnings, checkpoints written, a resume, evaluation progress).
	Note func(l *Loop, p Progress)
	// Sync makes what the observer wrote durable (called before a checkpoint).
	Sync  func() error
	Close func()
}

// ObserverError is an error of an observer's hook, with the observer's name. Its message is
// the hook's own (hooks name what they were doing).
type ObserverError struct {
	Observer string
	Err      error
}

func (e *ObserverError) Error() string { return e.Err.Error() }
func (e *ObserverError) Unwrap() error { return e.Err }

// wrap is err with o's name (nil stays nil).
func (o Observer) wrap(err error) error {
	if err == nil || o.Name == "" {
		return err
	}
	return &ObserverError{Observer: o.Name, Err: err}
}

// PhaseRecord is one evaluation phase after the meta-loop: the final test or a baseline.
type PhaseRecord struct {
	Name, Baseline string // "test" or "baseline", and the baseline's key
	Mean, Std      float64
	Took           time.Duration
}

func (l *Loop) onStart() error {
	for _, o := range l.observers {
		if o.Start != nil {
			if err := o.Start(l); err != nil {
				return o.wrap(err)
			}
		}
	}
	return nil
}

func (l *Loop) onStepped() error {
	for _, o := range l.observers {
		if o.Stepped != nil {
			if err := o.Stepped(l); err != nil {
				return o.wrap(err)
			}
		}
	}
	return nil
}

func (l *Loop) onValidated(v ValidationRecord, took time.Duration) error {
	for _, o := range l.observers {
		if o.Validated != nil {
			if err := o.Validated(l, v, took); err != nil {
				return o.wrap(err)
			}
		}
	}
	return nil
}

func (l *Loop) onEpochEnd(epoch int, validated bool) error {
	for _, o := range l.observers {
		if o.EpochEnd != nil {
			if err := o.EpochEnd(l, epoch, validated); err != nil {
				return o.wrap(err)
			}
		}
	}
	return nil
}

func (l *Loop) onPhase(p PhaseRecord) error {
	for _, o := range l.observers {
		if o.Phase != nil {
			if err := o.Phase(l, p); err != nil {
				return o.wrap(err)
			}
		}
	}
	return nil
}

// sync makes every observer's writing durable.
func (l *Loop) sync() error {
	for _, o := range l.observers {
		if o.Sync != nil {
			if err := o.Sync(); err != nil {
				return o.wrap(err)
			}
		}
	}
	return nil
}

// progressObserver turns the loop's points into Progress reports for f (WithProgress).
func progressObserver(f func(Progress)) Observer {
	report := func(l *Loop, p Progress) {
		p.Step, p.Resets, p.T = l.pos.Step, len(l.tracker.Resets()), l.T()
		p.MovingError, p.LabelLoss, p.ValidationAccuracy = l.tracker.MovingError(), l.last.loss, l.last.valAcc
		p.AllReduceSeconds = l.par.lastReduce.Seconds()
		f(p)
	}
	total := func(l *Loop) int { return l.stepsPerEpoch() * l.in.cfg.Epochs }
	return Observer{
		Name: "progress",
		Stepped: func(l *Loop) error {
			report(l, Progress{Phase: "distill", Epoch: l.pos.Epoch, Epochs: l.in.cfg.Epochs, TotalSteps: total(l)})
			return nil
		},
		Validated: func(l *Loop, v ValidationRecord, _ time.Duration) error {
			report(l, Progress{Phase: "validate", Epoch: v.Epoch, Epochs: l.in.cfg.Epochs, TotalSteps: total(l)})
			return nil
		},
		Note: report,
	}
}
