// Package artifact is what a distillation leaves in its output folder, written atomically
// (temp file, fsync, rename): distilled.npz (images, labels, base_indices, base_classes,
// and method dd's step_lrs; numpy.load reads it), distilled.pt (the same arrays as a dict
// of tensors; torch.load reads it) and report.json (the run's record, labeldistill.Record, with what a
// reader needs to use the data: class names, normalisation, the training recipe). Read
// validates both before anything trains on them; Evaluate trains fresh models on an
// artifact (`ldtorch evaluate`, the studies).
package artifact

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/torch/fileio/atomicfile"
	"github.com/ldtorch/ldtorch/torch/fileio/boundedread"
	"github.com/ldtorch/ldtorch/torch/fileio/npz"
)

// File names inside an output folder.
const (
	DistilledFile = "distilled.npz"
	ReportFile    = "report.json"
)

// Schema is the version of the artifact's layout (distilled.npz members and
// report.json keys). 2: base_classes, class names, normalisation, training recipe, the
// ldtorch version.
const Schema = 2

// Normalisation says how the stored images were computed from pixels p in 0..255:
// x = (p/255 − Mean[c]) / Std[c] per channel c.
type Normalisation struct {
	Mean    []float64 `json:"mean"`
	Std     []float64 `json:"std"`
	Formula string    `json:"formula"`
}

// TrainingRecipe is how ldtorch trains a fresh model on the distilled data (the test
// accuracy's protocol), enough to reproduce it in another framework.
type TrainingRecipe struct {
	Arch      string     `json:"arch"`
	Head      string     `json:"head"`
	Loss      string     `json:"loss"`
	Optimizer string     `json:"optimiser"`
	LR        float64    `json:"lr"`
	Betas     [2]float64 `json:"betas"`
	Eps       float64    `json:"eps"`
	Batch     int        `json:"batch"`
	Sampling  string     `json:"sampling"`
	Steps     int        `json:"steps"` // T
	// RR only: the ridge head's λ and pseudo-step α, the scale's initial value and Adam lr.
	RidgeLambda     float64 `json:"ridge_lambda,omitempty"`
	RidgePseudoStep float64 `json:"ridge_pseudo_step,omitempty"`
	ScaleInit       float64 `json:"scale_init,omitempty"`
	ScaleLR         float64 `json:"scale_lr,omitempty"`
	// Init is the fresh models' initialisation when it is not PyTorch's default (method
	// dd: Wang et al.'s Xavier-normal weights and zero biases).
	Init string `json:"init,omitempty"`
}

// What an artifact's values are (Report.Learnt).
const (
	LearntLabels  = "labels"   // labels learnt for the base images
	LearntImages  = "images"   // images learnt (synthetic) for their labels
	LearntStepLRs = "step_lrs" // method dd's step sizes
)

// StepLRsMember is distilled.npz's member of method dd's step sizes (float32, T).
const StepLRsMember = "step_lrs"

// Learnt lists what a run of cfg learns, in the names of Report.Learnt.
func Learnt(c config.Config) []string {
	switch {
	case c.Method == config.MethodDD:
		return []string{LearntImages, LearntStepLRs}
	case c.Learn == config.LearnImages:
		return []string{LearntImages}
	case c.Learn == config.LearnBoth:
		return []string{LearntImages, LearntLabels}
	}
	return []string{LearntLabels}
}

// Report is report.json.
type Report struct {
	SchemaVersion  int    `json:"schema_version"`
	LdtorchVersion string `json:"ldtorch_version"`
	// Method, Source, Target, BaseExamples, Seed and Epochs restate the config's, for
	// readers that look for them at the top.
	Method       string `json:"method"`
	Source       string `json:"source"`
	Target       string `json:"target"`
	BaseExamples int    `json:"base_examples"`
	Seed         int64  `json:"seed"`
	Epochs       int    `json:"epochs"`
	// StdConvention says what test_accuracy_std is: "population (divide by M)".
	StdConvention string `json:"std_convention"`
	labeldistill.Record
	// BaseClasses: each base example's true class in the source dataset's label space
	// (also distilled.npz's base_classes).
	BaseClasses      []int64        `json:"base_classes"`
	ClassNames       []string       `json:"class_names,omitempty"`        // the target's, in label order
	SourceClassNames []string       `json:"source_class_names,omitempty"` // the source's
	Normalisation    Normalisation  `json:"normalisation"`
	TrainingRecipe   TrainingRecipe `json:"training_recipe"`
	// Distilled describes the distilled.npz written with this report: a reader refuses a
	// distilled.npz that is not this file (absent in reports before it was added).
	Distilled *DistilledFacts `json:"distilled,omitempty"`
	// Learnt says what the run learnt (Learnt): "labels" for real base images; "images"
	// (synthetic, normalised like the real ones: x = (p − mean)/std of learnt pixels p);
	// "step_lrs" (method dd). Absent in reports before it was added: labels.
	Learnt []string `json:"learnt,omitempty"`
}

// LearntImages reports whether the artifact's images are learnt (synthetic), not real
// base images.
func (r *Report) LearntImages() bool { return r != nil && slices.Contains(r.Learnt, LearntImages) }

// DistilledFacts identify a distilled.npz: its SHA-256 and its arrays' shapes, and the
// distilled.pt written with it.
type DistilledFacts struct {
	SHA256  string `json:"sha256"`
	Images  []int  `json:"images_shape"` // N, C, H, W
	Classes int    `json:"classes"`
	// TorchSHA256 is the SHA-256 of distilled.pt (TorchFile); absent in reports written
	// before it was added.
	TorchSHA256 string `json:"pt_sha256,omitempty"`
}

// recipe is the fresh-model training of cfg for T steps.
func recipe(c config.Config, T int) TrainingRecipe {
	r := TrainingRecipe{Arch: c.EvalArch, Head: "linear classifier (the network's last layer)",
		Loss:      "soft cross-entropy: mean over the batch of −Σ_c y_c log softmax(logits)_c",
		Optimizer: "adam", LR: c.EvalLR, Betas: c.ModelBetas, Eps: c.ModelEps, Batch: c.EvalBatch,
		Sampling: "every step draws batch examples without replacement (a fresh random permutation's prefix)",
		Steps:    T}
	if c.Method == config.MethodDD {
		k := c.BaseExamples / max(1, c.DDSteps)
		r.Loss = "cross-entropy with the one-hot labels"
		r.Optimizer, r.LR, r.Betas, r.Eps, r.Batch = "plain gradient steps with the learnt step sizes (step_lrs)", 0, [2]float64{}, 0, k
		r.Sampling = fmt.Sprintf("fixed order: step t (1-based) trains on the %d images [%d·b, %d·(b+1)), b = (t−1) mod %d, with step size step_lrs[t−1]", k, k, k, c.DDSteps)
		r.Init = "Xavier-normal conv and linear weights (gain 1), zero biases"
		return r
	}
	if c.Method == config.MethodRR {
		r.Head = "ridge regression: W ← (1−α)W + α·Zᵀ(ZZᵀ+λI)⁻¹Y on the batch's features Z = [f(x), 1] (W starts at 0); " +
			"the loss is computed on logits s·Z·W, Adam on the network and the scale s; prediction argmax Z·W"
		r.RidgeLambda, r.RidgePseudoStep, r.ScaleInit, r.ScaleLR = c.RidgeLambda, c.RidgePseudoStep, c.ScaleInit, c.ScaleLR
	}
	return r
}

// DatasetInfo returns a dataset's class names and normalisation from the data registry.
// An image folder's class names are its folder names; its normalisation is not known here
// (NewReport takes it from the config).
func DatasetInfo(name string) ([]string, Normalisation) {
	if path, ok := data.ImageFolderPath(name); ok {
		if info, err := data.InspectImageFolder(path); err == nil {
			return info.ClassNames, Normalisation{}
		}
	}
	spec, err := data.Lookup(name)
	if err != nil {
		return nil, Normalisation{}
	}
	return spec.ClassNames, Normalisation{Mean: spec.Mean, Std: spec.Std, Formula: "x = (p/255 - mean[c]) / std[c] for pixel values p in 0..255, channel c"}
}

// NewReport summarises a result.
func NewReport(res *labeldistill.Result) *Report {
	c := res.Config
	baseClasses := res.BaseClasses
	if baseClasses == nil {
		baseClasses = []int64{}
	}
	names, _ := DatasetInfo(c.Dataset)
	sourceNames, norm := DatasetInfo(c.Source)
	if _, folder := data.ImageFolderPath(c.Source); folder && c.Source == c.Dataset {
		norm = Normalisation{Mean: c.NormMean, Std: c.NormStd, Formula: "x = (p/255 - mean[c]) / std[c] for pixel values p in 0..255, channel c"}
	}
	rec := res.Record
	if rec.Resets == nil {
		rec.Resets = []int{}
	}
	return &Report{
		SchemaVersion: Schema, LdtorchVersion: labeldistill.Version,
		Method: c.Method, Source: c.Source, Target: c.Dataset, BaseExamples: c.BaseExamples, Seed: c.Seed, Epochs: c.Epochs,
		StdConvention: "population (divide by M)", Record: rec,
		BaseClasses: baseClasses, ClassNames: names, SourceClassNames: sourceNames, Normalisation: norm,
		TrainingRecipe: recipe(c, res.T), Learnt: Learnt(c),
	}
}

// Write writes res's distilled.npz, distilled.pt and report.json into dir (created if
// needed). Each file is replaced atomically, and the report, which names the other two by
// their SHA-256, comes last: an earlier artifact survives any failure intact or is refused
// by Read, never mixed. Labels that
// are not finite are refused.
func Write(dir string, res *labeldistill.Result) error {
	n, classes := int(res.BaseShape[0]), res.Classes
	if len(res.Labels) != n*classes {
		return fmt.Errorf("artifact: %d label values for %d×%d", len(res.Labels), n, classes)
	}
	for i, v := range res.Labels {
		if !isFinite(float64(v)) {
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
	members := []*npz.Array{images, labels, indices}
	if res.Config.Method == config.MethodDD {
		if want := res.Config.DDUnrolledSteps(); len(res.StepLRs) != want {
			return fmt.Errorf("artifact: %d step sizes for method dd's %d unrolled steps", len(res.StepLRs), want)
		}
		for i, v := range res.StepLRs {
			if !isFinite(float64(v)) || v < 0 {
				return fmt.Errorf("artifact: step size %d is %v: refusing to write it", i+1, v)
			}
		}
		lrs, err := npz.New(StepLRsMember, []int{len(res.StepLRs)}, res.StepLRs)
		if err != nil {
			return fmt.Errorf("artifact: %s: %w", StepLRsMember, err)
		}
		members = append(members, lrs)
	}
	if len(res.BaseClasses) > 0 {
		if len(res.BaseClasses) != n {
			return fmt.Errorf("artifact: %d base classes for %d base examples", len(res.BaseClasses), n)
		}
		classes, err := npz.New("base_classes", []int{n}, res.BaseClasses)
		if err != nil {
			return fmt.Errorf("artifact: base_classes: %w", err)
		}
		members = append(members, classes)
	}
	var npzBytes bytes.Buffer
	if err := npz.Write(&npzBytes, members); err != nil {
		return fmt.Errorf("artifact: %w", err)
	}
	pt, err := encodeTorch(members)
	if err != nil {
		return fmt.Errorf("artifact: %s: %w", TorchFile, err)
	}
	rep := NewReport(res)
	sum, ptSum := sha256.Sum256(npzBytes.Bytes()), sha256.Sum256(pt)
	rep.Distilled = &DistilledFacts{SHA256: hex.EncodeToString(sum[:]), Images: shape, Classes: classes, TorchSHA256: hex.EncodeToString(ptSum[:])}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("artifact: report: %w", err)
	}
	// The three files are written in full before any replaces its predecessor (a full disk
	// leaves an earlier artifact whole, not a new distilled.npz beside the old report), then
	// renamed distilled.npz, distilled.pt, the report naming both: a run stopped between the
	// renames leaves files that the earlier report refuses.
	paths := []string{filepath.Join(dir, DistilledFile), filepath.Join(dir, TorchFile), filepath.Join(dir, ReportFile)}
	if err := atomicfile.WriteFiles(paths, [][]byte{npzBytes.Bytes(), pt, append(js, '\n')}); err != nil {
		return fmt.Errorf("artifact: write %s (%s, %s, %s): %w", dir, DistilledFile, TorchFile, ReportFile, err)
	}
	return nil
}

// writeFile writes data to path atomically (torch/fileio/atomicfile), naming path on failure.
func writeFile(path string, data []byte) error {
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
	BaseClasses []int64 // nil in artifacts before schema 2
	// StepLRs are method dd's learnt step sizes, one per unrolled step (nil otherwise).
	StepLRs []float32
	Report  *Report // nil when report.json is absent
	// HasTorchFile: dir holds distilled.pt (TorchFile), verified against the report or,
	// where the report does not name it, against distilled.npz.
	HasTorchFile bool
	arrays       []*npz.Array // distilled.npz's members, in file order
}

// Read reads and validates an output folder: shapes must agree, labels must be
// finite probability rows (non-negative, summing to 1 within 1e-3).
func Read(dir string) (*Artifact, error) {
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		hint := ""
		if filepath.Base(dir) == DistilledFile || filepath.Base(dir) == ReportFile {
			hint = fmt.Sprintf(": give the folder that holds it, %s", filepath.Dir(dir))
		}
		return nil, fmt.Errorf("%s is a file, not an artifact's folder (the output folder of ldtorch distill)%s", dir, hint)
	}
	path := filepath.Join(dir, DistilledFile)
	raw, err := boundedread.ReadRegularFile(path, data.MaxDistilledBytes, "distilled data file")
	if err != nil {
		return nil, err
	}
	if bytes.HasPrefix(raw, []byte(data.BaseFileMarker)) {
		return nil, fmt.Errorf("%s: an index file of ldtorch select-base, not an artifact's arrays (distill --base-indices takes it)", path)
	}
	arc, err := npz.Read(bytes.NewReader(raw), int64(len(raw)))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...))
	}
	images, labels := arc.Get("images"), arc.Get("labels")
	if (images == nil || labels == nil) && arc.Get("meta") != nil && arc.Get("rng.go_pcg") != nil {
		return nil, bad("a checkpoint of a run (its state between meta-steps), not an artifact's arrays: ldtorch distill --resume continues the run and writes its artifact")
	}
	if images == nil || labels == nil {
		names := arc.Names()
		if len(names) > 8 {
			names = append(names[:8:8], fmt.Sprintf("… (%d arrays)", len(arc.Names())))
		}
		return nil, bad("needs arrays 'images' and 'labels', found %v", names)
	}
	// An unknown member is refused rather than ignored: a corrupted member name (not
	// covered by the members' CRCs) would otherwise silently drop base_indices.
	for _, name := range arc.Names() {
		if name != "images" && name != "labels" && name != "base_indices" && name != "base_classes" && name != StepLRsMember {
			return nil, bad("unexpected array %q (an artifact holds images, labels, base_indices, base_classes and, for method dd, %s)", name, StepLRsMember)
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
		if !isFinite(float64(v)) {
			return nil, bad("'images' holds a non-finite value")
		}
	}
	for r := 0; r < labels.Shape[0]; r++ {
		sum := 0.0
		for c := 0; c < a.Classes; c++ {
			v := float64(lab[r*a.Classes+c])
			if !isFinite(v) || v < 0 {
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
	if sl := arc.Get(StepLRsMember); sl != nil {
		if a.StepLRs, ok = sl.Data.([]float32); !ok || len(sl.Shape) != 1 || len(a.StepLRs) == 0 {
			return nil, bad("'%s' must be a non-empty float32 vector, got %s %v", StepLRsMember, sl.DType, sl.Shape)
		}
		for i, v := range a.StepLRs {
			if !isFinite(float64(v)) || v < 0 {
				return nil, bad("step size %d is %v: not a step size", i+1, v)
			}
		}
	}
	if bc := arc.Get("base_classes"); bc != nil {
		if a.BaseClasses, ok = bc.Data.([]int64); !ok || len(a.BaseClasses) != labels.Shape[0] {
			return nil, bad("'base_classes' must be int64 with one entry per image, got %s %v", bc.DType, bc.Shape)
		}
	}
	repPath := filepath.Join(dir, ReportFile)
	js, err := boundedread.ReadRegularFile(repPath, MaxReportBytes, "run report")
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		rep, err := parseReport(js)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", repPath, err)
		}
		if err := rep.checkAgainst(a, raw); err != nil {
			return nil, err
		}
		a.Report = rep
	}
	for _, name := range arc.Names() {
		a.arrays = append(a.arrays, arc.Get(name))
	}
	if a.HasTorchFile, err = checkTorchFile(dir, len(raw), a.arrays, a.Report); err != nil {
		return nil, err
	}
	return a, nil
}

// MaxReportBytes bounds report.json: its config (with an inline base_indices list), a
// validation record per epoch and a reset per model reset make a few MiB at most.
const MaxReportBytes = 64 << 20

// parseReport decodes report.json: JSON errors give their line and column; a report of a
// newer schema than this ldtorch knows, or one without the run's settings, is refused
// before its values are checked.
func parseReport(js []byte) (*Report, error) {
	var head struct {
		SchemaVersion *int            `json:"schema_version"`
		Config        json.RawMessage `json:"config"`
	}
	if err := json.Unmarshal(js, &head); err != nil {
		return nil, config.JSONError(js, err)
	}
	switch {
	case head.SchemaVersion == nil:
		return nil, errors.New("no schema_version (not written by ldtorch distill?)")
	case *head.SchemaVersion < 1 || *head.SchemaVersion > Schema:
		return nil, fmt.Errorf("schema_version %d: this ldtorch reads versions 1 to %d (written by a newer ldtorch, or edited?)", *head.SchemaVersion, Schema)
	case len(bytes.TrimSpace(head.Config)) == 0 || string(bytes.TrimSpace(head.Config)) == "null":
		return nil, errors.New("no \"config\": the run's settings are missing (not written by ldtorch distill?)")
	}
	var rep Report
	if err := json.Unmarshal(js, &rep); err != nil {
		return nil, config.JSONError(js, err)
	}
	return &rep, nil
}

// checkAgainst refuses a report that does not describe the artifact a (read from the
// bytes npzBytes) or whose values contradict each other: a distilled.npz from another
// run (or written after the report), or a report edited by hand.
func (rep *Report) checkAgainst(a *Artifact, npzBytes []byte) error {
	npzPath, repPath := filepath.Join(a.Dir, DistilledFile), filepath.Join(a.Dir, ReportFile)
	if d := rep.Distilled; d != nil {
		sum := sha256.Sum256(npzBytes)
		if got := hex.EncodeToString(sum[:]); got != d.SHA256 {
			return fmt.Errorf("%s does not belong to %s: its SHA-256 is %s, the report was written for %s (%v images, %d classes); "+
				"the two files come from different runs, or the run was stopped between writing them", npzPath, repPath, got, d.SHA256, d.Images, d.Classes)
		}
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %s (edited, or not written by ldtorch?)", repPath, fmt.Sprintf(format, args...))
	}
	c := rep.Config
	if err := c.ValidateRecorded(); err != nil {
		return bad("config: %v", err)
	}
	switch {
	case rep.Target != c.Dataset:
		return bad("target %q but config.dataset %q", rep.Target, c.Dataset)
	case rep.Method != c.Method:
		return bad("method %q but config.method %q", rep.Method, c.Method)
	case rep.BaseExamples != c.BaseExamples || int64(rep.BaseExamples) != a.Shape[0]:
		return bad("base_examples %d, config.base_examples %d, %s holds %d images", rep.BaseExamples, c.BaseExamples, DistilledFile, a.Shape[0])
	case rep.Epochs != c.Epochs:
		return bad("epochs %d but config.epochs %d", rep.Epochs, c.Epochs)
	case c.NumClasses() != a.Classes && !(isFolder(c.Dataset) && c.NumClasses() == 0): // (a folder no longer there: unknown)
		return bad("dataset %s has %d classes, the labels of %s have %d", c.Dataset, c.NumClasses(), DistilledFile, a.Classes)
	}
	if f, ok := data.LookupFacts(c.Dataset); ok {
		want := [3]int64{1, 28, 28}
		if f.Colour {
			want = [3]int64{3, 32, 32}
		}
		if got := [3]int64{a.Shape[1], a.Shape[2], a.Shape[3]}; got != want {
			return bad("dataset %s has %d×%d×%d images, %s holds %d×%d×%d", c.Dataset, want[0], want[1], want[2], DistilledFile, got[0], got[1], got[2])
		}
	}
	// The dataset files the run read belong to its dataset or source ("mnist/...").
	for _, k := range slices.Sorted(maps.Keys(rep.DataSHA256)) {
		// (an image folder's name "imagefolder:PATH" holds slashes itself)
		if strings.Contains(k, "/") && !strings.HasPrefix(k, c.Dataset+"/") && !strings.HasPrefix(k, c.Source+"/") {
			return bad("data_sha256 lists %s, a file of neither the dataset %s nor the source %s", k, c.Dataset, c.Source)
		}
	}
	if c.Method == config.MethodDD {
		if len(a.StepLRs) != c.DDUnrolledSteps() || rep.T != len(a.StepLRs) {
			return bad("method dd with %d unrolled steps and T %d, but %s holds %d step sizes", c.DDUnrolledSteps(), rep.T, DistilledFile, len(a.StepLRs))
		}
		return nil
	}
	if a.StepLRs != nil {
		return bad("method %s, but %s holds step sizes (%s), which only method dd learns", c.Method, DistilledFile, StepLRsMember)
	}
	// T is the kept validation's T; a validation's T never exceeds its meta-step.
	if rep.T < 1 || rep.T > max(rep.MetaSteps, 1) {
		return bad("steps (T) %d is not between 1 and meta_steps %d", rep.T, rep.MetaSteps)
	}
	if len(rep.Validations) > 0 && rep.T != rep.BestValidation.T {
		return bad("steps (T) %d but best_validation.steps_T %d", rep.T, rep.BestValidation.T)
	}
	return nil
}

// DataChanges compares the data files read now (files: "<dataset>/<file>" → sha256, as
// labeldistill.Data.Files) with those the report's run read, and describes each file whose
// checksum changed since: the run's numbers were measured on other data.
func DataChanges(rep *Report, files map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(files)) {
		if was, ok := rep.DataSHA256[k]; ok && was != files[k] {
			out = append(out, fmt.Sprintf("data file %s changed since the artifact was made (sha256 %s, the run read %s): results are not comparable with the run's", k, short(files[k]), short(was)))
		}
	}
	return out
}

func short(sum string) string {
	if len(sum) > 16 {
		return sum[:16] + "…"
	}
	return sum
}

func isFolder(name string) bool {
	_, ok := data.ImageFolderPath(name)
	return ok
}

func isFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
