package engine

// access.go: what the loop shows the packages that observe it (the run folder's checkpoints,
// history and phases, the gradient statistics) and the orchestration above it.

import (
	"github.com/ldtorch/ldtorch/labeldistill/checkpoint"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/torch"
)

// Config is the run's resolved configuration.
func (l *Loop) Config() config.Config { return l.in.cfg }

// Data is the run's data.
func (l *Loop) Data() *Data { return l.in.ds }

// DataDigest is the SHA-256 of the data the run trains on (every split and the base
// indices), computed once.
func (l *Loop) DataDigest() string { return l.in.dataDigest() }

// NetworkSHA256 is the SHA-256 of each TorchScript file the run's networks came from
// (Record.NetworkSHA256).
func (l *Loop) NetworkSHA256() map[string]string { return l.in.networkSHA256() }

// Device is the run's device.
func (l *Loop) Device() torch.Device { return l.in.dev }

// Origin is where the run's base examples came from (nil when not recorded).
func (l *Loop) Origin() *BaseOrigin { return l.in.origin }

// WorldSize is the number of processes of the run (1 alone).
func (l *Loop) WorldSize() int { return l.par.size() }

// Rank is this process's rank in the run (0 alone).
func (l *Loop) Rank() int { return l.par.rank() }

// Position is where the loop is: the meta-steps done, the epoch and its batches.
func (l *Loop) Position() Position { return l.pos }

// StepsPerEpoch is the number of meta-steps of an epoch.
func (l *Loop) StepsPerEpoch() int { return l.stepsPerEpoch() }

// Tracker is the reset rule's state.
func (l *Loop) Tracker() *ResetTracker { return l.tracker }

// Validations are the validations so far; BestValidation the kept one's record.
func (l *Loop) Validations() []ValidationRecord  { return l.vals }
func (l *Loop) BestValidation() ValidationRecord { return l.best.record }

// WallSeconds is the run's wall time so far, the parts it resumes included;
// DistillSeconds the meta-steps' alone.
func (l *Loop) WallSeconds() float64    { return l.wallSeconds() }
func (l *Loop) DistillSeconds() float64 { return l.clock.distillSeconds }

// AddPriorWall counts s seconds spent by an earlier part of the run (a phase it finished).
func (l *Loop) AddPriorWall(s float64) { l.clock.priorWall += s }

// Params are the learnt parameters, in the learnables' order (the labels first when learnt).
func (l *Loop) Params() []*torch.Tensor { return l.params() }

// Note tells the observers a message.
func (l *Loop) Note(p Progress) { l.note(p) }

// ReadPending reads the meta-steps whose outputs are not read yet (their checks, the reset
// rule, the observers' Read hook).
func (l *Loop) ReadPending() error { return l.read() }

// Sync makes every observer's writing durable.
func (l *Loop) Sync() error { return l.sync() }

// Restore loads a verified, compatible checkpoint into the freshly set-up loop, and
// records the settings the resume changed (config.DiffDetails against its meta).
func (l *Loop) Restore(f *checkpoint.File, m *CheckpointMeta) error {
	if err := l.restore(f, m); err != nil {
		return err
	}
	l.resumed = config.DiffDetails(m.Config, l.in.cfg)
	return nil
}

// ResumeChanges are the settings changed when the run was resumed ("epochs: 6 -> 8").
func (l *Loop) ResumeChanges() []string { return l.resumed }
