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
	Progress         = engine.Progress
	ValidationRecord = engine.ValidationRecord
	BaselineResult   = engine.BaselineResult
	BaseOrigin       = engine.BaseOrigin
	// BaseSplit says whether a data-parallel run splits its base batch (WithBaseSplit).
	BaseSplit      = engine.BaseSplit
	NonFiniteError = engine.NonFiniteError
	DivergedError  = engine.DivergedError
)

// Base-batch splitting of data-parallel runs (WithBaseSplit).
const (
	BaseSplitAuto = engine.BaseSplitAuto
	BaseSplitOn   = engine.BaseSplitOn
	BaseSplitOff  = engine.BaseSplitOff
)

// LoadData reads, verifies, splits and normalises cfg's dataset and selects its base
// examples (engine.LoadData).
func LoadData(cfg config.Config) (*Data, error) { return engine.LoadData(cfg) }
