package labeldistill

// checkpoint_file.go: the checkpoint file format and its folder (naming, reading, listing,
// pruning). A checkpoint is the complete state of a distillation run in one self-verifying
// .npz file, written atomically every Config.CheckpointEvery meta-steps and on cancellation,
// and restored by WithResume so that the resumed run continues bit-identically (CPU, fixed
// thread count); the run's side (what is written and restored) is checkpoint_state.go.
// See docs/RELIABILITY.md.
//
// File: <dir>/ckpt-<step, 9 digits>.npz, an uncompressed NumPy archive (np.load reads it):
//
//	meta                      uint8    JSON (checkpointMeta): format, version, position, config,
//	                                   data checksums, tracker, validations, step counts, timings
//	labels                    float32  N×C, the current label table
//	labels.exp_avg, .exp_avg_sq        its Adam moments (the step count is in meta)
//	param.<name>              float32  model parameters (the RR body under rr)
//	param.<name>.exp_avg, .exp_avg_sq  their Adam moments
//	buffer.<name>             float32  BatchNorm running statistics (none for LeNet/AlexCifarNet)
//	rr.w, rr.scale, rr.scale.exp_avg, rr.scale.exp_avg_sq   (rr only)
//	best_labels               float32  N×C, the labels kept by validation (when one ran)
//	epoch_order               int64    the epoch's permutation of the target set (mid-epoch only)
//	rng.go_pcg                uint8    math/rand/v2 PCG state (MarshalBinary)
//	rng.torch                 uint8    the torch generator's state (model re-initialisation)
//	sha256                    uint8    32 bytes: the seal, SHA-256 of every array above (npz.Seal)
//
// Integrity: the file is written to a temporary file in the same folder, fsynced and renamed
// (npz.WriteFile), so a crash leaves the previous checkpoints intact; on reading, the zip
// structure (a truncated file loses its central directory), each member's .npy header, and
// the SHA-256 over names, dtypes, shapes and values must all agree, so a flipped bit or a
// truncation is detected and the checkpoint is skipped.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/npz"
)

// Checkpoint file layout constants.
const (
	CheckpointFormat  = "ldtorch-checkpoint"
	CheckpointVersion = 1
	// DefaultCheckpointKeep is how many of the newest checkpoints a run keeps.
	DefaultCheckpointKeep = 3
	checkpointPrefix      = "ckpt-"
	checkpointSuffix      = ".npz"
)

// CheckpointName is the file name of the checkpoint taken after step meta-steps.
func CheckpointName(step int) string {
	return fmt.Sprintf("%s%09d%s", checkpointPrefix, step, checkpointSuffix)
}

// checkpointStep parses a checkpoint file name; ok is false for any other name.
func checkpointStep(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, checkpointPrefix)
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, checkpointSuffix)
	if !ok || s == "" {
		return 0, false
	}
	for _, ch := range s {
		if ch < '0' || ch > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// checkpointMeta is the JSON "meta" member of a checkpoint.
type checkpointMeta struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	Reason  string `json:"reason"` // periodic, validation, epoch, final, cancelled
	Written string `json:"written"`

	// Position. Step meta-steps are done. Epoch is the epoch in progress (1-based; Epochs+1
	// once the meta-loop has finished) and NextBatch how many of its batches are done:
	// 0 < NextBatch < steps per epoch needs epoch_order; NextBatch = steps per epoch means
	// the epoch's steps are done and its validation (if due) has not run yet.
	Step      int `json:"step"`
	Epoch     int `json:"epoch"`
	NextBatch int `json:"next_batch"`
	// StepsPerEpoch and TargetSize are recorded to check the position on resume.
	StepsPerEpoch int `json:"steps_per_epoch"`
	TargetSize    int `json:"target_set_size"`
	// WorldSize is the number of processes of a data-parallel run (1 alone); a resume needs
	// as many. 0 in checkpoints written before it was recorded.
	WorldSize int `json:"world_size,omitempty"`

	Config     config.Config     `json:"config"`
	DataSHA256 map[string]string `json:"data_sha256"`
	// DataDigest is the SHA-256 of the data as trained on (every split's images and labels
	// and the base indices), so that data given through WithDataset is checked too.
	DataDigest string `json:"data_digest"`

	Tracker     json.RawMessage    `json:"reset_tracker"`
	T           int                `json:"steps_T"` // informational: T at the checkpoint
	HasBest     bool               `json:"has_best"`
	BestRecord  ValidationRecord   `json:"best_validation"`
	Validations []ValidationRecord `json:"validations"`

	LabelAdamSteps int64    `json:"label_adam_steps"`
	ModelAdamSteps int64    `json:"model_adam_steps"`
	ScaleAdamSteps int64    `json:"scale_adam_steps"`
	Params         []string `json:"params"`
	Buffers        []string `json:"buffers"`

	DistillSeconds float64  `json:"distill_seconds"`
	WallSeconds    float64  `json:"wall_seconds"`
	LastLabelLoss  float64  `json:"last_label_loss"`
	LastValAcc     *float64 `json:"last_validation_accuracy"` // null before the first validation
	TorchVersion   string   `json:"libtorch_version"`
}

// checkpoint is a checkpoint file read back and verified.
type checkpoint struct {
	Path   string
	Meta   checkpointMeta
	arrays map[string]*npz.Array
}

func (c *checkpoint) array(name string) (*npz.Array, error) {
	a := c.arrays[name]
	if a == nil {
		return nil, fmt.Errorf("checkpoint %s: missing array %q", c.Path, name)
	}
	return a, nil
}

// dataDigest is the SHA-256 of the data a run trains on.
func dataDigest(ds *Dataset) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s|%s|%d|%v|", ds.Target, ds.Source, ds.Classes, ds.Shape)
	for _, s := range []*Split{&ds.TargetSet, &ds.Validation, &ds.Test, &ds.Base} {
		fmt.Fprintf(h, "%d|%d|", len(s.Images), len(s.Labels))
		h.Write(rawBytes(s.Images))
		h.Write(rawBytes(s.Labels))
	}
	fmt.Fprintf(h, "%d|", len(ds.BaseIndices))
	h.Write(rawBytes(ds.BaseIndices))
	return hex.EncodeToString(h.Sum(nil))
}

// rawBytes views a numeric slice as bytes (native order: little-endian on every platform
// libtorch supports), without copying.
func rawBytes[T float32 | int64](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

// tensorArray copies t to the host as a named array, refusing non-finite values.
func tensorArray(name string, t *torch.Tensor, step int) (*npz.Array, error) {
	if t == nil || t.Freed() {
		return nil, fmt.Errorf("checkpoint: tensor %q is missing", name)
	}
	shape := make([]int, 0, t.Dim())
	for _, d := range t.Shape() {
		shape = append(shape, int(d))
	}
	var data any
	var err error
	switch t.DType() {
	case torch.Float:
		var v []float32
		v, err = t.Float32s()
		for i, x := range v {
			if !finite(float64(x)) {
				return nil, &NonFiniteError{Step: step, Quantity: fmt.Sprintf("%s (element %d)", name, i), Value: float64(x)}
			}
		}
		data = v
	case torch.Double:
		var v []float64
		v, err = t.Float64s()
		for i, x := range v {
			if !finite(x) {
				return nil, &NonFiniteError{Step: step, Quantity: fmt.Sprintf("%s (element %d)", name, i), Value: x}
			}
		}
		data = v
	default:
		return nil, fmt.Errorf("checkpoint: tensor %q has unsupported dtype %s", name, t.DType())
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint: tensor %q: %w", name, err)
	}
	return npz.New(name, shape, data)
}

// restoreTensor copies a checkpointed array into dst (same shape and dtype), without grad.
func restoreTensor(dst *torch.Tensor, a *npz.Array) error {
	shape := dst.Shape()
	if len(shape) != len(a.Shape) {
		return fmt.Errorf("array %q has shape %v, the run needs %v", a.Name, a.Shape, shape)
	}
	for i := range shape {
		if int(shape[i]) != a.Shape[i] {
			return fmt.Errorf("array %q has shape %v, the run needs %v", a.Name, a.Shape, shape)
		}
	}
	var src *torch.Tensor
	var err error
	switch dst.DType() {
	case torch.Float:
		v, ok := a.Data.([]float32)
		if !ok {
			return fmt.Errorf("array %q is %s, the run needs float32", a.Name, a.DType)
		}
		src, err = torch.FromFloat32(v, shape...)
	case torch.Double:
		v, ok := a.Data.([]float64)
		if !ok {
			return fmt.Errorf("array %q is %s, the run needs float64", a.Name, a.DType)
		}
		src, err = torch.FromFloat64(v, shape...)
	default:
		return fmt.Errorf("array %q: unsupported dtype %s", a.Name, dst.DType())
	}
	if err != nil {
		return err
	}
	defer src.Free()
	return torch.NoGrad(func() error { return dst.Copy_(src) })
}

// ReadCheckpointMeta reads and verifies a checkpoint file and returns its meta as JSON
// (for tools and tests); it fails on any corruption.
func ReadCheckpointMeta(path string) ([]byte, error) {
	c, err := readCheckpoint(path)
	if err != nil {
		return nil, err
	}
	return json.MarshalIndent(c.Meta, "", "  ")
}

// readCheckpoint reads and verifies one checkpoint file.
func readCheckpoint(path string) (*checkpoint, error) {
	arc, err := npz.ReadFile(path)
	if err != nil {
		return nil, err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("checkpoint %s: %s", path, fmt.Sprintf(format, args...))
	}
	arrays, err := npz.Unseal(arc.Arrays)
	if err != nil {
		return nil, bad("%v", err)
	}
	if len(arrays) == 0 {
		return nil, bad("no arrays: not a complete checkpoint")
	}
	c := &checkpoint{Path: path, arrays: map[string]*npz.Array{}}
	for _, a := range arrays {
		c.arrays[a.Name] = a
	}
	meta := c.arrays["meta"]
	if meta == nil {
		return nil, bad("missing array %q", "meta")
	}
	js, ok := meta.Data.([]uint8)
	if !ok {
		return nil, bad("'meta' must be uint8 JSON, got %s", meta.DType)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c.Meta); err != nil {
		return nil, bad("meta: %v", err)
	}
	if c.Meta.Format != CheckpointFormat || c.Meta.Version != CheckpointVersion {
		return nil, bad("format %q version %d, want %q version %d", c.Meta.Format, c.Meta.Version, CheckpointFormat, CheckpointVersion)
	}
	return c, nil
}

// CheckpointFiles returns the checkpoint files (ckpt-<step>.npz) in dir, newest (highest
// step) first.
func CheckpointFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	type ck struct {
		step int
		path string
	}
	var cks []ck
	for _, e := range entries {
		if step, ok := checkpointStep(e.Name()); ok && e.Type().IsRegular() {
			cks = append(cks, ck{step, filepath.Join(dir, e.Name())})
		}
	}
	slices.SortFunc(cks, func(a, b ck) int { return b.step - a.step })
	paths := make([]string, len(cks))
	for i, c := range cks {
		paths[i] = c.path
	}
	return paths, nil
}

// prepareCheckpointDir creates dir and proves it writable, so that an unusable folder fails
// before any work starts.
func prepareCheckpointDir(dir string) error {
	if err := EnsureWritableDir(dir); err != nil {
		return fmt.Errorf("checkpoint folder %s is not writable: %w", dir, err)
	}
	return nil
}

// EnsureWritableDir creates dir if needed and proves it writable: a probe file is written,
// synced and removed. The CLI checks --out with it before any work starts.
func EnsureWritableDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".ldtorch-probe-*")
	if err != nil {
		return err
	}
	_, werr := f.WriteString("probe\n")
	serr := f.Sync()
	cerr := f.Close()
	rerr := os.Remove(f.Name())
	return errors.Join(werr, serr, cerr, rerr)
}

// pruneCheckpoints removes all but the newest keep checkpoints (keep < 1: none removed) and
// the temporary files an interrupted write may have left.
func pruneCheckpoints(dir string, keep int) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "."+checkpointPrefix) && strings.Contains(e.Name(), ".tmp-") {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
	if keep < 1 {
		return nil
	}
	paths, err := CheckpointFiles(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range paths[min(keep, len(paths)):] {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// CheckpointConfig returns the configuration of the newest valid checkpoint in dir (a
// checkpoint folder, or an output folder holding checkpoints/), the checkpoint's path and
// the folder the checkpoints are in: what `--resume DIR` alone continues with. Invalid
// checkpoints are skipped like on resume; with none valid the error is resume's.
func CheckpointConfig(dir string) (cfg config.Config, path, ckptDir string, err error) {
	if ckptDir, err = resolveResumeDir(dir); err != nil {
		return cfg, "", "", err
	}
	paths, err := CheckpointFiles(ckptDir)
	if err != nil {
		return cfg, "", "", resumeErrorf("%w", err)
	}
	if len(paths) == 0 {
		return cfg, "", "", resumeErrorf("no checkpoint (%s*%s) in %s", checkpointPrefix, checkpointSuffix, ckptDir)
	}
	var problems []string
	for _, p := range paths {
		c, err := readCheckpoint(p)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		return c.Meta.Config, p, ckptDir, nil
	}
	return cfg, "", "", resumeErrorf("no valid checkpoint in %s: %s", ckptDir, strings.Join(problems, "; "))
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
