package labeldistill

// artifact.go: what a run leaves in its output folder, written atomically (temp file, fsync,
// rename): distilled.npz (images, labels, base_indices; numpy.load reads it) and
// report.json. ReadArtifact validates both before anything trains on them.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/ldtorch/ldtorch/torch/atomicfile"
	"github.com/ldtorch/ldtorch/torch/npz"
)

// Artifact file names inside an output folder.
const (
	DistilledFile = "distilled.npz"
	ReportFile    = "report.json"
)

// Report is report.json.
type Report struct {
	Method           string                    `json:"method"`
	Source           string                    `json:"source"`
	Target           string                    `json:"target"`
	BaseExamples     int                       `json:"base_examples"`
	Seed             int64                     `json:"seed"`
	Epochs           int                       `json:"epochs"`
	Steps            int                       `json:"steps"` // T: training steps for fresh models
	TestAccuracyMean float64                   `json:"test_accuracy_mean"`
	TestAccuracyStd  float64                   `json:"test_accuracy_std"`
	StdConvention    string                    `json:"std_convention"`
	TestAccuracies   []float64                 `json:"test_accuracies"`
	Baselines        map[string]BaselineResult `json:"baselines"`
	WallSeconds      float64                   `json:"wall_seconds"`
	DistillSeconds   float64                   `json:"distill_seconds"`
	SecondsPerStep   float64                   `json:"seconds_per_meta_step"`
	MetaSteps        int                       `json:"meta_steps"`
	Resets           []int                     `json:"resets"`
	Validations      []ValidationRecord        `json:"validations"`
	BestValidation   ValidationRecord          `json:"best_validation"`
	LibtorchVersion  string                    `json:"libtorch_version"`
	DataSHA256       map[string]string         `json:"data_sha256"`
	Config           Config                    `json:"config"`
}

// NewReport summarises a result.
func NewReport(res *Result) *Report {
	c := res.Config
	resets := res.Resets
	if resets == nil {
		resets = []int{}
	}
	return &Report{
		Method: c.Method, Source: c.Source, Target: c.Dataset, BaseExamples: c.BaseExamples, Seed: c.Seed,
		Epochs: c.Epochs, Steps: res.T, TestAccuracyMean: res.TestMean, TestAccuracyStd: res.TestStd,
		StdConvention: "population (divide by M)", TestAccuracies: res.TestAccuracies, Baselines: res.Baselines,
		WallSeconds: res.WallSeconds, DistillSeconds: res.DistillSeconds, SecondsPerStep: res.SecondsPerStep,
		MetaSteps: res.MetaSteps, Resets: resets, Validations: res.Validations, BestValidation: res.BestValidation,
		LibtorchVersion: res.TorchVersion, DataSHA256: res.DataSHA256, Config: c,
	}
}

// WriteArtifact writes distilled.npz and report.json into dir (created if needed). Each
// file is replaced atomically, so an earlier artifact survives any failure intact. Labels
// that are not finite are refused.
func WriteArtifact(dir string, res *Result) error {
	n, classes := int(res.BaseShape[0]), res.Classes
	if len(res.Labels) != n*classes {
		return fmt.Errorf("artifact: %d label values for %d×%d", len(res.Labels), n, classes)
	}
	for i, v := range res.Labels {
		if !finite(float64(v)) {
			return fmt.Errorf("artifact: label %d of row %d is %v: refusing to write non-finite labels", i%classes, i/classes, v)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("artifact: %w", err)
	}
	shape := []int{n, int(res.BaseShape[1]), int(res.BaseShape[2]), int(res.BaseShape[3])}
	images, err := npz.New("images", shape, res.BaseImages)
	if err != nil {
		return fmt.Errorf("artifact: images: %w", err)
	}
	labels, err := npz.New("labels", []int{n, classes}, res.Labels)
	if err != nil {
		return fmt.Errorf("artifact: labels: %w", err)
	}
	idx := res.BaseIndices
	if idx == nil {
		idx = []int64{}
	}
	indices, err := npz.New("base_indices", []int{len(idx)}, idx)
	if err != nil {
		return fmt.Errorf("artifact: base_indices: %w", err)
	}
	if err := npz.WriteFile(filepath.Join(dir, DistilledFile), []*npz.Array{images, labels, indices}); err != nil {
		return fmt.Errorf("artifact: %w", err)
	}
	js, err := json.MarshalIndent(NewReport(res), "", "  ")
	if err != nil {
		return fmt.Errorf("artifact: report: %w", err)
	}
	return WriteFileAtomic(filepath.Join(dir, ReportFile), append(js, '\n'))
}

// WriteFileAtomic writes data to path through a temporary file in the same folder, synced
// and renamed over path: readers see the old file or the new one, never a mix.
func WriteFileAtomic(path string, data []byte) error {
	if err := atomicfile.WriteFile(path, data); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Artifact is a distilled dataset read back from disk.
type Artifact struct {
	Dir         string
	Images      []float32
	Shape       [4]int64 // N, C, H, W
	Labels      []float32
	Classes     int
	BaseIndices []int64
	Report      *Report // nil when report.json is absent
}

// ReadArtifact reads and validates an output folder: shapes must agree, labels must be
// finite probability rows (non-negative, summing to 1 within 1e-3).
func ReadArtifact(dir string) (*Artifact, error) {
	path := filepath.Join(dir, DistilledFile)
	arc, err := npz.ReadFile(path)
	if err != nil {
		return nil, err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...))
	}
	images, labels := arc.Get("images"), arc.Get("labels")
	if images == nil || labels == nil {
		return nil, bad("needs arrays 'images' and 'labels', found %v", arc.Names())
	}
	// An unknown member is refused rather than ignored: a corrupted member name (not
	// covered by the members' CRCs) would otherwise silently drop base_indices.
	for _, name := range arc.Names() {
		if name != "images" && name != "labels" && name != "base_indices" {
			return nil, bad("unexpected array %q (an artifact holds images, labels and base_indices)", name)
		}
	}
	img, ok := images.Data.([]float32)
	if !ok || len(images.Shape) != 4 {
		return nil, bad("'images' must be float32 N×C×H×W, got %s %v", images.DType, images.Shape)
	}
	lab, ok := labels.Data.([]float32)
	if !ok || len(labels.Shape) != 2 || labels.Shape[0] != images.Shape[0] || labels.Shape[1] < 2 {
		return nil, bad("'labels' must be float32 N×classes matching %d images, got %s %v", images.Shape[0], labels.DType, labels.Shape)
	}
	a := &Artifact{Dir: dir, Images: img, Labels: lab, Classes: labels.Shape[1]}
	for i, d := range images.Shape {
		a.Shape[i] = int64(d)
	}
	for _, v := range img {
		if !finite(float64(v)) {
			return nil, bad("'images' holds a non-finite value")
		}
	}
	for r := 0; r < labels.Shape[0]; r++ {
		sum := 0.0
		for c := 0; c < a.Classes; c++ {
			v := float64(lab[r*a.Classes+c])
			if !finite(v) || v < 0 {
				return nil, bad("label row %d holds %v: not a probability", r, v)
			}
			sum += v
		}
		if math.Abs(sum-1) > 1e-3 {
			return nil, bad("label row %d sums to %v, not 1", r, sum)
		}
	}
	if bi := arc.Get("base_indices"); bi != nil {
		if a.BaseIndices, ok = bi.Data.([]int64); !ok {
			return nil, bad("'base_indices' must be int64, got %s", bi.DType)
		}
	}
	js, err := os.ReadFile(filepath.Join(dir, ReportFile))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		var rep Report
		if err := json.Unmarshal(js, &rep); err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ReportFile), err)
		}
		a.Report = &rep
	}
	return a, nil
}
