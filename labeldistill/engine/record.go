package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ldtorch/ldtorch/labeldistill/config"
)

// Progress is what Distill reports as it goes (through WithProgress); the library itself
// never prints.
type Progress struct {
	Phase      string // "distill", "validate", "checkpoint", "resume", "test", "baseline"
	Epoch      int    // 1-based epoch in progress (distill), or the epoch validated
	Epochs     int
	Step       int // meta-steps done
	TotalSteps int
	// LabelLoss and MovingError are as of the latest read of the meta-steps' outputs, at
	// most readEvery (16) steps behind Step while distilling.
	LabelLoss   float64
	MovingError float64 // mean top-1 error (%) over the reset window
	Resets      int
	T           int
	// ValidationAccuracy is the latest validation accuracy (%), NaN before the first.
	ValidationAccuracy float64
	Message            string
	// Done and Total measure the work of the phase's evaluation models (test, baseline):
	// training steps and scoring blocks of all models together; both 0 in other phases.
	Done, Total int
	// AllReduceSeconds is the wall time of the latest meta-step's all-reduce in a
	// data-parallel run (0 alone).
	AllReduceSeconds float64
}

// ValidationRecord is one early-stopping check.
type ValidationRecord struct {
	Epoch    int     `json:"epoch"`
	Step     int     `json:"step"`
	T        int     `json:"steps_T"`
	Accuracy float64 `json:"accuracy"`
	// Diverged: the validation model's parameters went non-finite; Accuracy is 0 and these
	// labels are never kept.
	Diverged bool `json:"diverged,omitempty"`
}

// BaselineResult is one baseline's outcome.
type BaselineResult struct {
	Mean             float64         `json:"mean"`
	Std              float64         `json:"std"`
	Steps            int             `json:"steps"`
	Accuracies       []float64       `json:"accuracies"`
	ValidationErrors map[int]float64 `json:"validation_errors"`
	// Diverged counts the test models whose parameters went non-finite; they are left out
	// of Accuracies, Mean and Std.
	Diverged int `json:"diverged_models,omitempty"`
}

// Record is what a run has done: its configuration, the meta-loop's course, the
// validations, the final test and the baselines, times and provenance. A Result carries it
// with the distilled values, report.json holds it under the same keys, and each checkpoint
// records it as of its position.
type Record struct {
	Config config.Config `json:"config"`
	// T is the number of steps fresh models train for: the kept validation's T.
	T              int                `json:"steps"`
	MetaSteps      int                `json:"meta_steps"`
	Resets         []int              `json:"resets"`
	Validations    []ValidationRecord `json:"validations"`
	BestValidation ValidationRecord   `json:"best_validation"`
	TestAccuracies []float64          `json:"test_accuracies"`
	TestMean       float64            `json:"test_accuracy_mean"`
	// TestStd is the population standard deviation over the M models.
	TestStd float64 `json:"test_accuracy_std"`
	// TestDiverged counts the test models whose parameters went non-finite (left out of
	// the above).
	TestDiverged    int                       `json:"test_diverged_models,omitempty"`
	Baselines       map[string]BaselineResult `json:"baselines"`
	WallSeconds     float64                   `json:"wall_seconds"`
	DistillSeconds  float64                   `json:"distill_seconds"` // the meta-loop alone (no validation)
	SecondsPerStep  float64                   `json:"seconds_per_meta_step"`
	LibtorchVersion string                    `json:"libtorch_version"`
	DataSHA256      map[string]string         `json:"data_sha256"`
	// NetworkSHA256: "torchscript:FILE" → the SHA-256 of each TorchScript file the run's
	// networks (arch, eval_arch) were loaded from; resume and evaluate refuse a file changed
	// since. Absent for the built-in networks and in reports written before it was recorded.
	NetworkSHA256 map[string]string `json:"network_sha256,omitempty"`
	// ResumeChanges are the settings changed when the run was last resumed ("epochs: 6 -> 8").
	ResumeChanges []string `json:"resume_changes,omitempty"`
	DataWarnings  []string `json:"data_warnings,omitempty"` // the dataset's warnings (Data.Warnings)
	// BaseOrigin is where the base examples came from and their classes (absent in reports
	// written before it was recorded).
	BaseOrigin *BaseOrigin `json:"base_origin,omitempty"`
}

// BaseOrigin is where a run's base examples came from and what they are.
type BaseOrigin struct {
	// Selection: "balanced" or "unbalanced" when the run drew them with its base seed
	// (base_selection), "given" when they were named by base_indices.
	Selection string `json:"selection"`
	// ClassCounts are the base examples per class of the source dataset (the target's
	// within a dataset); Balanced says whether every class has the same count.
	ClassCounts []int `json:"class_counts"`
	Balanced    bool  `json:"balanced"`
	// File and FileSHA256: the index file the indices were read from (its name as given)
	// and its SHA-256; empty when they came from a config file's list.
	File       string `json:"file,omitempty"`
	FileSHA256 string `json:"file_sha256,omitempty"`
	// Strategy and Settings: how `ldtorch select-base` chose them, from the file's header
	// (empty for a file without one).
	Strategy string          `json:"strategy,omitempty"`
	Settings json.RawMessage `json:"settings,omitempty"`
}

// Describe is the origin in one line, for reports.
func (o *BaseOrigin) Describe() string {
	var b strings.Builder
	switch o.Selection {
	case config.SelectGiven:
		b.WriteString("given")
		if o.Strategy != "" {
			fmt.Fprintf(&b, ", chosen by select-base strategy %s", o.Strategy)
			if words := settingsWords(o.Settings); words != "" {
				fmt.Fprintf(&b, " (%s)", words)
			}
		}
		if o.File != "" {
			fmt.Fprintf(&b, "; file %s (sha256 %s)", o.File, o.FileSHA256)
		}
	default:
		fmt.Fprintf(&b, "drawn by the run (%s, with its base seed)", o.Selection)
	}
	if o.Balanced && len(o.ClassCounts) > 0 {
		fmt.Fprintf(&b, "; balanced, %d per class", o.ClassCounts[0])
	} else {
		fmt.Fprintf(&b, "; unbalanced, per class %v", o.ClassCounts)
	}
	return b.String()
}

// settingsWords writes a flat JSON object of settings as "name value, name value" in its
// order ("candidates 50, repeats 3, arch lenet"); anything else compacted to one line, as
// read back from an indented report.json it spans lines; "" for none.
func settingsWords(raw json.RawMessage) string {
	var one bytes.Buffer
	if len(raw) == 0 || json.Compact(&one, raw) != nil || one.String() == "{}" || one.String() == "null" {
		return ""
	}
	dec := json.NewDecoder(bytes.NewReader(one.Bytes()))
	var words []string
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return one.String()
	}
	for dec.More() {
		name, err := dec.Token()
		if err != nil {
			return one.String()
		}
		value, err := dec.Token()
		if _, nested := value.(json.Delim); err != nil || nested {
			return one.String()
		}
		words = append(words, fmt.Sprintf("%v %v", name, value))
	}
	return strings.Join(words, ", ")
}

// Version is ldtorch's version, recorded in artifacts and histories.
const Version = "0.1.0"

// GradVariance summarises the label meta-gradients g_1..g_n of a window (n meta-steps, or n
// fresh models at one label state): per element (i, c) the population variance
// v_ic = mean(g²) − mean(g)², then averaged over the N×C elements.
type GradVariance struct {
	Count int `json:"count"` // gradients in the window
	// Variance is the mean over elements of the per-element variance.
	Variance float64 `json:"variance"`
	// MeanSquare is the mean over elements of mean(g²): Variance's scale. Their ratio,
	// Relative, is scale-free (0: every gradient equal; 1: pure noise around zero).
	MeanSquare float64 `json:"mean_square"`
	Relative   float64 `json:"relative"`
}
