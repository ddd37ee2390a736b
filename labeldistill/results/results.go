// Package results holds the file formats of the experiments' results that more than one
// package reads: a flexibility study (DIR/studies/NAME.json, written by labeldistill/study)
// and the flexibility figure's data (DIR/studies/flexibility.json), which labeldistill/report
// draws. It is plain data: no package of labeldistill above it is imported.
package results

import (
	"encoding/json"
	"fmt"

	"github.com/ldtorch/ldtorch/torch/fileio/boundedread"
)

// Study kinds. steps and arch on a method dd artifact, lr and order (which need one) are
// Wang et al.'s sensitivity studies of DD.
const (
	Steps      = "steps"
	Optimizer  = "optimizer"
	Arch       = "arch"
	RRStandard = "rr-standard"
	LR         = "lr"
	Order      = "order"
)

// RecipeDD is a setting's Recipe when it trains with method dd's own recipe (its learnt
// step sizes, its fixed order).
const RecipeDD = "dd"

// Setting is one setting of a study with its M test accuracies.
type Setting struct {
	Label      string    `json:"label"`
	Labels     string    `json:"labels"` // "distilled" or "true" (a true-label baseline)
	Arch       string    `json:"arch"`
	Optimizer  string    `json:"optimizer"`
	LR         float64   `json:"lr"`
	Momentum   float64   `json:"momentum"`
	Steps      int       `json:"steps"`
	Delta      *int      `json:"delta,omitempty"` // steps study: Steps − T
	RR         bool      `json:"rr"`
	Accuracies []float64 `json:"test_accuracies"`
	Mean       float64   `json:"test_accuracy_mean"`
	Std        float64   `json:"test_accuracy_std"` // population
	Diverged   int       `json:"diverged_models"`
	// ValidationErrors: rr-standard's early stopping, validation error (%) per step count.
	ValidationErrors map[int]float64 `json:"validation_errors,omitempty"`
	// Method dd's recipe (the studies of dd.go): Recipe "dd", the step sizes and the order
	// of the images the models train with; Optimizer is then "sgd" (plain gradient steps)
	// and LR the mean step size where one is used, else 0.
	Recipe    string `json:"recipe,omitempty"`
	StepSizes string `json:"step_sizes,omitempty"`
	Order     string `json:"order,omitempty"`
	// StepLRs are the step sizes a dd setting trains with, one per training step (not
	// recorded).
	StepLRs []float64 `json:"-"`
}

// Study is DIR/studies/NAME.json.
type Study struct {
	Study      string `json:"study"`
	Artifact   string `json:"artifact"`
	Method     string `json:"method"`
	MethodName string `json:"method_name,omitempty"` // config.Config.MethodName: "LD", "Our DD", "DD", …
	Dataset    string `json:"dataset"`
	Source     string `json:"source"`
	// LearntThrough is the network the distillation learnt through (Config.Arch; absent in
	// studies written before it was recorded): an arch study reads as a transfer from it.
	LearntThrough string `json:"learnt_through,omitempty"`
	BaseExamples  int    `json:"base_examples"`
	T             int    `json:"T"`
	Models        int    `json:"models"`
	Seed          int64  `json:"seed"`
	// DistilledSHA256 is the SHA-256 of the distilled.npz the study scored (absent in
	// studies written before it was recorded): a study file beside another artifact (a
	// folder overwritten by a new run, a file copied in) is not that artifact's.
	DistilledSHA256 string    `json:"distilled_sha256,omitempty"`
	Settings        []Setting `json:"settings"`
	Notes           []string  `json:"notes,omitempty"`
	WallSeconds     float64   `json:"wall_seconds"`
}

// Through is " through ARCH" for a study that records the network its artifact was learnt
// through, else "": the phrase titles and headings put after the method's name.
func (st *Study) Through() string {
	if st.LearntThrough == "" {
		return ""
	}
	return " through " + st.LearntThrough
}

// Flexibility is DIR/studies/flexibility.json.
type Flexibility struct {
	Study string `json:"study"` // "flexibility"
	// Artifact is the folder of learnt labels (--distilled), Versus the method dd folder.
	Artifact      string            `json:"artifact"`
	Versus        string            `json:"versus"`
	Dataset       string            `json:"dataset"`
	MethodName    string            `json:"method_name"`        // "LD", "LD RR", …
	VersusName    string            `json:"versus_method_name"` // "DD"
	Panels        []Panel           `json:"panels"`
	Notes         []string          `json:"notes,omitempty"`
	StudiesUsed   map[string]*Study `json:"studies"`        // the artifact's studies by kind
	VersusStudies map[string]*Study `json:"versus_studies"` // the dd artifact's
}

// Panel is one panel of the figure: a series per method.
type Panel struct {
	Name   string   `json:"name"` // FlexSteps, FlexOptimisation or FlexArch
	Title  string   `json:"title"`
	XLabel string   `json:"x_label"`
	Series []Series `json:"series"`
}

// Series is one method's points in a panel.
type Series struct {
	Name   string  `json:"name"`   // the legend
	Method string  `json:"method"` // the method's name: "LD", "DD", …
	Labels string  `json:"labels"` // "distilled", or "true" for the true-label baseline
	Points []Point `json:"points"`
}

// Point is one setting of a study in a panel.
type Point struct {
	Label string `json:"label"`
	// X: the step count as a fraction of the method's T (FlexSteps); the architecture's
	// position in the panel's Categories (FlexArch); the point's position (FlexOptimisation).
	X        float64 `json:"x"`
	Steps    int     `json:"steps"`
	Mean     float64 `json:"test_accuracy_mean"`
	Std      float64 `json:"test_accuracy_std"`
	Models   int     `json:"models"`          // finite models
	Diverged int     `json:"diverged_models"` // left out of Mean and Std
	// Own marks the method's own recipe (as it was distilled and is evaluated).
	Own bool `json:"own_recipe,omitempty"`
}

// Panels of the flexibility figure.
const (
	FlexSteps        = "steps"
	FlexOptimisation = "optimisation"
	FlexArch         = "architecture"
)

// MaxStudyFileBytes bounds a study file read back (ReadFile): far above what a study of
// config.MaxEvalModels models per setting writes.
const MaxStudyFileBytes = 64 << 20

// ReadFile reads a study written to DIR/studies/NAME.json.
func ReadFile(path string) (*Study, error) {
	b, err := boundedread.ReadFile(path, MaxStudyFileBytes, "study file")
	if err != nil {
		return nil, err
	}
	var st Study
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("%s: not a study file: %v", path, err)
	}
	return &st, nil
}

// FileNames are a study's files inside an artifact folder: studies/NAME.json, .png.
func FileNames(kind string) (json, png string) {
	return "studies/" + kind + ".json", "studies/" + kind + ".png"
}

// DD reports whether the study trained with method dd's own recipe (a study of DDKinds on
// a method dd artifact).
func (st *Study) DD() bool {
	return len(st.Settings) > 0 && st.Settings[0].Recipe == RecipeDD
}

// Categories are the architectures of the FlexArch panel, in the order of their X.
func (p Panel) Categories() []string {
	var out []string
	for _, s := range p.Series {
		for _, x := range s.Points {
			for len(out) <= int(x.X) {
				out = append(out, "")
			}
			out[int(x.X)] = x.Label
		}
	}
	return out
}
