package study

// types.go: the studies' file formats (labeldistill/results) under the names of this
// package.

import "github.com/ldtorch/ldtorch/labeldistill/results"

type (
	// Setting is one setting of a study with its M test accuracies.
	Setting = results.Setting
	// Study is DIR/studies/NAME.json.
	Study = results.Study
	// Flexibility is DIR/studies/flexibility.json; Panel, Series and Point its parts.
	Flexibility = results.Flexibility
	Panel       = results.Panel
	Series      = results.Series
	Point       = results.Point
)

// Study kinds (results).
const (
	Steps      = results.Steps
	Optimizer  = results.Optimizer
	Arch       = results.Arch
	RRStandard = results.RRStandard
	LR         = results.LR
	Order      = results.Order
)

// Panels of the flexibility figure (results).
const (
	FlexSteps        = results.FlexSteps
	FlexOptimisation = results.FlexOptimisation
	FlexArch         = results.FlexArch
)

// MaxStudyFileBytes bounds a study file read back (ReadFile).
const MaxStudyFileBytes = results.MaxStudyFileBytes

// ReadFile reads a study written to DIR/studies/NAME.json.
func ReadFile(path string) (*Study, error) { return results.ReadFile(path) }

// FileNames are a study's files inside an artifact folder: studies/NAME.json, .png.
func FileNames(kind string) (json, png string) { return results.FileNames(kind) }
