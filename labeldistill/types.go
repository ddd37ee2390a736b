package labeldistill

// types.go: the engine's types under the names a caller of Distill uses.

import (
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/engine"
)

type (
	// Data is everything Distill needs: the target task's splits and the base examples.
	Data = engine.Data
	// Result is what a distillation produced: its record and the distilled data.
	Result = engine.Result
	// Record is what a run has done (report.json holds it under the same keys).
	Record = engine.Record
	// Progress is what Distill reports as it goes (WithProgress).
	Progress           = engine.Progress
	ValidationRecord   = engine.ValidationRecord
	BaselineResult     = engine.BaselineResult
	BaseOrigin         = engine.BaseOrigin
	BaseSplit          = engine.BaseSplit
	NonFiniteError     = engine.NonFiniteError
	DivergedError      = engine.DivergedError
	ResumeError        = engine.ResumeError
	ResetTracker       = engine.ResetTracker
	HistoryRecord      = engine.HistoryRecord
	GradVariance       = engine.GradVariance
	MethodGradVariance = engine.MethodGradVariance
	GradVarOptions     = engine.GradVarOptions
)

// Base-batch splitting of data-parallel runs (WithBaseSplit).
const (
	BaseSplitAuto     = engine.BaseSplitAuto
	BaseSplitOn       = engine.BaseSplitOn
	BaseSplitOff      = engine.BaseSplitOff
	BaseSplitVariable = engine.BaseSplitVariable
)

// The run history (metrics.jsonl) and the phases file.
const (
	HistoryFile       = engine.HistoryFile
	HistoryStart      = engine.HistoryStart
	HistoryStep       = engine.HistoryStep
	HistoryValidation = engine.HistoryValidation
	HistoryPhase      = engine.HistoryPhase
	HistoryResume     = engine.HistoryResume
	PhasesFile        = engine.PhasesFile
)

var (
	ParseBaseSplit     = engine.ParseBaseSplit
	ReadHistory        = engine.ReadHistory
	CheckpointConfig   = engine.CheckpointConfig
	ReadCheckpointMeta = engine.ReadCheckpointMeta
	DDSchedule         = engine.DDSchedule
	SplitTensors       = engine.SplitTensors
	StepsPerEpoch      = engine.StepsPerEpoch
	ValidationDue      = engine.ValidationDue
	NewResetTracker    = engine.NewResetTracker
)

// LoadData reads, verifies, splits and normalises cfg's dataset and selects its base
// examples (engine.LoadData).
func LoadData(cfg config.Config) (*Data, error) { return engine.LoadData(cfg) }
