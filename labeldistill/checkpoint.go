package labeldistill

// checkpoint.go: the complete state of a distillation run in one self-verifying .npz file,
// written atomically every Config.CheckpointEvery meta-steps and on cancellation, and
// restored by WithResume so that the resumed run continues bit-identically (CPU, fixed
// thread count). See docs/RELIABILITY.md.
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
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

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

	Config     Config            `json:"config"`
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

// ---- the run's side ----------------------------------------------------------------------

// checkpointsEnabled reports whether this run writes checkpoints.
func (r *run) checkpointsEnabled() bool { return r.ckptDir != "" && r.cfg.CheckpointEvery >= 0 }

// adamOf returns the model's Adam (distillation always uses Adam).
func (r *run) adamOf() (*torch.Adam, error) {
	a, ok := r.model.opt.(*torch.Adam)
	if !ok {
		return nil, fmt.Errorf("checkpoint: the distillation model's optimizer is %T, not Adam", r.model.opt)
	}
	return a, nil
}

// writeCheckpoint saves the run's whole state at its current position (a meta-step
// boundary) as <ckptDir>/ckpt-<step>.npz and prunes old ones. Non-finite state is refused
// with a *NonFiniteError (the previous checkpoints stay).
func (r *run) writeCheckpoint(reason string) (err error) {
	if !r.checkpointsEnabled() {
		return nil
	}
	// The state saved includes every step's checks and its observation by the reset rule.
	if err := r.readSteps(); err != nil {
		return err
	}
	pos := [3]int{r.step, r.epoch, r.nextBatch}
	if r.lastCkpt == pos {
		return nil
	}
	// The history up to this position must survive whatever follows the checkpoint.
	if err := r.history.sync(); err != nil {
		return err
	}
	s := torch.NewScope()
	defer s.Close()
	step := r.step
	var arrays []*npz.Array
	add := func(name string, t *torch.Tensor) {
		if err != nil {
			return
		}
		var a *npz.Array
		if a, err = tensorArray(name, t, step); err == nil {
			arrays = append(arrays, a)
		}
	}
	addRaw := func(name string, shape []int, data any) {
		if err != nil {
			return
		}
		var a *npz.Array
		if a, err = npz.New(name, shape, data); err == nil {
			arrays = append(arrays, a)
		}
	}
	modelAdam, err := r.adamOf()
	if err != nil {
		return err
	}
	meta := checkpointMeta{
		Format: CheckpointFormat, Version: CheckpointVersion, Reason: reason,
		Written: time.Now().UTC().Format(time.RFC3339),
		Step:    r.step, Epoch: r.epoch, NextBatch: r.nextBatch,
		StepsPerEpoch: StepsPerEpoch(r.ds.TargetSet.N(), r.cfg.OuterBatch), TargetSize: r.ds.TargetSet.N(),
		Config: r.cfg, DataSHA256: r.ds.Files, DataDigest: r.dataDigest,
		T: r.T(), HasBest: r.best != nil, BestRecord: r.bestRecord, Validations: r.validations,
		LabelAdamSteps: r.labels.opt.StepCount, ModelAdamSteps: modelAdam.StepCount,
		DistillSeconds: r.distillSeconds, WallSeconds: r.wallSeconds(),
		LastLabelLoss: r.lastLoss, TorchVersion: torch.Version(),
	}
	if !math.IsNaN(r.lastValAcc) {
		v := r.lastValAcc
		meta.LastValAcc = &v
	}
	if meta.Tracker, err = json.Marshal(r.tracker); err != nil {
		return fmt.Errorf("checkpoint: reset tracker: %w", err)
	}
	for _, sp := range r.model.specs {
		meta.Params = append(meta.Params, sp.Name)
	}
	for _, b := range r.net.Buffers {
		meta.Buffers = append(meta.Buffers, b.Name)
	}
	if r.model.rr {
		meta.ScaleAdamSteps = r.model.sOpt.StepCount
	}
	js, err := json.Marshal(meta)
	if err != nil {
		return fmt.Errorf("checkpoint: meta: %w", err)
	}
	addRaw("meta", []int{len(js)}, js)

	labels, derr := r.labels.Y.Detach()
	if derr != nil {
		return derr
	}
	add("labels", labels)
	add("labels.exp_avg", r.labels.opt.ExpAvg[0])
	add("labels.exp_avg_sq", r.labels.opt.ExpAvgSq[0])
	for i, sp := range r.model.specs {
		p, derr := r.model.params[i].Detach()
		if derr != nil {
			return derr
		}
		add("param."+sp.Name, p)
		add("param."+sp.Name+".exp_avg", modelAdam.ExpAvg[i])
		add("param."+sp.Name+".exp_avg_sq", modelAdam.ExpAvgSq[i])
	}
	for i, b := range r.net.Buffers {
		add("buffer."+b.Name, r.model.buffers[i])
	}
	if r.model.rr {
		sc, derr := r.model.scale.Detach()
		if derr != nil {
			return derr
		}
		add("rr.w", r.model.w)
		add("rr.scale", sc)
		add("rr.scale.exp_avg", r.model.sOpt.ExpAvg[0])
		add("rr.scale.exp_avg_sq", r.model.sOpt.ExpAvgSq[0])
	}
	if err != nil {
		return err
	}
	if r.best != nil {
		for i, v := range r.best {
			if !finite(float64(v)) {
				return &NonFiniteError{Step: step, Quantity: fmt.Sprintf("best labels (element %d)", i), Value: float64(v)}
			}
		}
		addRaw("best_labels", []int{r.ds.Base.N(), r.ds.Classes}, append([]float32(nil), r.best...))
	}
	if r.nextBatch > 0 && r.nextBatch < meta.StepsPerEpoch {
		order := make([]int64, len(r.order))
		for i, v := range r.order {
			order[i] = int64(v)
		}
		addRaw("epoch_order", []int{len(order)}, order)
	}
	pcg, perr := r.pcg.MarshalBinary()
	if perr != nil {
		return fmt.Errorf("checkpoint: Go random state: %w", perr)
	}
	addRaw("rng.go_pcg", []int{len(pcg)}, pcg)
	gs, gerr := r.gen.State()
	if gerr != nil {
		return fmt.Errorf("checkpoint: torch generator state: %w", gerr)
	}
	gb, gerr := gs.Uint8s()
	if gerr != nil {
		return fmt.Errorf("checkpoint: torch generator state: %w", gerr)
	}
	addRaw("rng.torch", []int{len(gb)}, gb)
	if err != nil {
		return err
	}
	if arrays, err = npz.Seal(arrays); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	path := filepath.Join(r.ckptDir, CheckpointName(step))
	if err := npz.WriteFile(path, arrays); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	r.lastCkpt = pos
	r.report(Progress{Phase: "checkpoint", Epoch: min(r.epoch, r.cfg.Epochs), Epochs: r.cfg.Epochs, Message: fmt.Sprintf("wrote %s (%s)", path, reason)})
	if err := pruneCheckpoints(r.ckptDir, r.ckptKeep); err != nil {
		r.report(Progress{Phase: "checkpoint", Message: fmt.Sprintf("warning: could not remove old checkpoints: %v", err)})
	}
	return nil
}

// resume loads the newest valid checkpoint in dir into the freshly set-up run. Corrupt
// checkpoints are skipped with a warning (Progress.Message); a checkpoint of another
// configuration or other data is refused with an error naming the difference.
func (r *run) resume(dir string) error {
	paths, err := CheckpointFiles(dir)
	if err != nil {
		return resumeErrorf("%w", err)
	}
	if len(paths) == 0 {
		return resumeErrorf("no checkpoint (%s*%s) in %s", checkpointPrefix, checkpointSuffix, dir)
	}
	var problems []string
	for _, p := range paths {
		c, err := readCheckpoint(p)
		if err != nil {
			problems = append(problems, err.Error())
			r.report(Progress{Phase: "resume", Message: fmt.Sprintf("warning: skipping invalid checkpoint: %v", err)})
			continue
		}
		if err := r.compatible(c); err != nil {
			return err
		}
		if err := r.restore(c); err != nil {
			return fmt.Errorf("resume from %s: %w", p, err)
		}
		// The allowed changes (more epochs, threads, device, ...) are recorded.
		r.resumeChanges = DiffDetails(c.Meta.Config, r.cfg)
		changed := ""
		if len(r.resumeChanges) > 0 {
			changed = " (changed: " + strings.Join(r.resumeChanges, "; ") + ")"
		}
		r.report(Progress{Phase: "resume", Epoch: min(r.epoch, r.cfg.Epochs), Epochs: r.cfg.Epochs,
			Message: fmt.Sprintf("resumed from %s at meta-step %d%s", p, r.step, changed)})
		return nil
	}
	return resumeErrorf("no valid checkpoint in %s: %s", dir, strings.Join(problems, "; "))
}

// CheckpointConfig returns the configuration of the newest valid checkpoint in dir (a
// checkpoint folder, or an output folder holding checkpoints/), the checkpoint's path and
// the folder the checkpoints are in: what `--resume DIR` alone continues with. Invalid
// checkpoints are skipped like on resume; with none valid the error is resume's.
func CheckpointConfig(dir string) (cfg Config, path, ckptDir string, err error) {
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

// compatible refuses a checkpoint written under another configuration or data.
func (r *run) compatible(c *checkpoint) error {
	if conflicts := ResumeConflicts(c.Meta.Config, r.cfg); len(conflicts) > 0 {
		details := DiffDetails(c.Meta.Config, r.cfg)
		var lines []string
		for _, d := range details {
			name, _, _ := strings.Cut(d, ":")
			if slices.Contains(conflicts, name) {
				lines = append(lines, d)
			}
		}
		return resumeErrorf("%s was written under a different configuration (checkpoint -> now): %s",
			c.Path, strings.Join(lines, "; "))
	}
	var diffs []string
	names := map[string]bool{}
	for k := range c.Meta.DataSHA256 {
		names[k] = true
	}
	for k := range r.ds.Files {
		names[k] = true
	}
	sorted := slices.Sorted(func(yield func(string) bool) {
		for k := range names {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range sorted {
		a, okA := c.Meta.DataSHA256[k]
		b, okB := r.ds.Files[k]
		switch {
		case !okA:
			diffs = append(diffs, fmt.Sprintf("%s: not used by the checkpointed run", k))
		case !okB:
			diffs = append(diffs, fmt.Sprintf("%s: used by the checkpointed run (sha256 %s) but not now", k, a))
		case a != b:
			diffs = append(diffs, fmt.Sprintf("%s: sha256 %s -> %s", k, a, b))
		}
	}
	if len(diffs) == 0 && c.Meta.DataDigest != r.dataDigest {
		diffs = append(diffs, fmt.Sprintf("the data trained on (splits and base examples) differ: digest %s -> %s", c.Meta.DataDigest, r.dataDigest))
	}
	if len(diffs) > 0 {
		return resumeErrorf("%s was written with different data (checkpoint -> now): %s", c.Path, strings.Join(diffs, "; "))
	}
	return nil
}

// restore loads a verified, compatible checkpoint into the run.
func (r *run) restore(c *checkpoint) error {
	m := c.Meta
	perEpoch := StepsPerEpoch(r.ds.TargetSet.N(), r.cfg.OuterBatch)
	switch {
	case m.StepsPerEpoch != perEpoch || m.TargetSize != r.ds.TargetSet.N():
		return fmt.Errorf("checkpoint has %d steps per epoch over %d target examples, the run %d over %d", m.StepsPerEpoch, m.TargetSize, perEpoch, r.ds.TargetSet.N())
	case m.Epoch < 1 || m.Epoch > r.cfg.Epochs+1 || m.NextBatch < 0 || m.NextBatch > perEpoch ||
		(m.Epoch == r.cfg.Epochs+1 && m.NextBatch != 0) || m.Step != (m.Epoch-1)*perEpoch+m.NextBatch:
		return fmt.Errorf("inconsistent position: step %d, epoch %d, batch %d", m.Step, m.Epoch, m.NextBatch)
	}
	var tr ResetTracker
	if err := json.Unmarshal(m.Tracker, &tr); err != nil {
		return err
	}
	if tr.Window() != r.cfg.ResetWindow || tr.MeanOfLast() != r.cfg.ResetMeanOfLast || tr.TotalSteps() != m.Step {
		return fmt.Errorf("reset tracker (window %d, mean of last %d, %d steps) does not match the run (%d, %d, %d steps)",
			tr.Window(), tr.MeanOfLast(), tr.TotalSteps(), r.cfg.ResetWindow, r.cfg.ResetMeanOfLast, m.Step)
	}
	modelAdam, err := r.adamOf()
	if err != nil {
		return err
	}
	if len(m.Params) != len(r.model.specs) || len(m.Buffers) != len(r.net.Buffers) {
		return fmt.Errorf("checkpoint holds %d parameters and %d buffers, the model has %d and %d", len(m.Params), len(m.Buffers), len(r.model.specs), len(r.net.Buffers))
	}
	type pair struct {
		name string
		dst  *torch.Tensor
	}
	pairs := []pair{{"labels", r.labels.Y}, {"labels.exp_avg", r.labels.opt.ExpAvg[0]}, {"labels.exp_avg_sq", r.labels.opt.ExpAvgSq[0]}}
	for i, sp := range r.model.specs {
		if m.Params[i] != sp.Name {
			return fmt.Errorf("parameter %d is %q in the checkpoint, %q in the model", i, m.Params[i], sp.Name)
		}
		pairs = append(pairs, pair{"param." + sp.Name, r.model.params[i]}, pair{"param." + sp.Name + ".exp_avg", modelAdam.ExpAvg[i]},
			pair{"param." + sp.Name + ".exp_avg_sq", modelAdam.ExpAvgSq[i]})
	}
	for i, b := range r.net.Buffers {
		if m.Buffers[i] != b.Name {
			return fmt.Errorf("buffer %d is %q in the checkpoint, %q in the model", i, m.Buffers[i], b.Name)
		}
		pairs = append(pairs, pair{"buffer." + b.Name, r.model.buffers[i]})
	}
	if r.model.rr {
		pairs = append(pairs, pair{"rr.w", r.model.w}, pair{"rr.scale", r.model.scale},
			pair{"rr.scale.exp_avg", r.model.sOpt.ExpAvg[0]}, pair{"rr.scale.exp_avg_sq", r.model.sOpt.ExpAvgSq[0]})
	}
	for _, p := range pairs {
		a, err := c.array(p.name)
		if err != nil {
			return err
		}
		if err := restoreTensor(p.dst, a); err != nil {
			return err
		}
	}
	var best []float32
	if m.HasBest {
		a, err := c.array("best_labels")
		if err != nil {
			return err
		}
		v, ok := a.Data.([]float32)
		if !ok || len(a.Shape) != 2 || a.Shape[0] != r.ds.Base.N() || a.Shape[1] != r.ds.Classes {
			return fmt.Errorf("best_labels: want float32 %d×%d, got %s %v", r.ds.Base.N(), r.ds.Classes, a.DType, a.Shape)
		}
		best = v
	}
	var order []int
	if m.NextBatch > 0 && m.NextBatch < perEpoch {
		a, err := c.array("epoch_order")
		if err != nil {
			return err
		}
		v, ok := a.Data.([]int64)
		if !ok || len(v) != r.ds.TargetSet.N() {
			return fmt.Errorf("epoch_order: want int64 (%d), got %s %v", r.ds.TargetSet.N(), a.DType, a.Shape)
		}
		seen := make([]bool, len(v))
		order = make([]int, len(v))
		for i, x := range v {
			if x < 0 || int(x) >= len(v) || seen[x] {
				return errors.New("epoch_order is not a permutation of the target set")
			}
			seen[x] = true
			order[i] = int(x)
		}
	}
	pcgA, err := c.array("rng.go_pcg")
	if err != nil {
		return err
	}
	pcgBytes, _ := pcgA.Data.([]uint8)
	pcg := &rand.PCG{}
	if err := pcg.UnmarshalBinary(pcgBytes); err != nil {
		return fmt.Errorf("rng.go_pcg: %w", err)
	}
	genA, err := c.array("rng.torch")
	if err != nil {
		return err
	}
	genBytes, ok := genA.Data.([]uint8)
	if !ok {
		return fmt.Errorf("rng.torch: want uint8, got %s", genA.DType)
	}
	state, err := torch.FromUint8(genBytes, int64(len(genBytes)))
	if err != nil {
		return err
	}
	err = r.gen.SetState(state)
	state.Free()
	if err != nil {
		return fmt.Errorf("rng.torch: %w", err)
	}

	r.labels.opt.StepCount = m.LabelAdamSteps
	modelAdam.StepCount = m.ModelAdamSteps
	if r.model.rr {
		r.model.sOpt.StepCount = m.ScaleAdamSteps
	}
	r.tracker = &tr
	r.pcg = pcg
	r.rng = rand.New(pcg)
	r.best = best
	r.bestRecord = m.BestRecord
	r.validations = m.Validations
	r.step, r.epoch, r.nextBatch, r.order = m.Step, m.Epoch, m.NextBatch, order
	r.distillSeconds, r.priorWall = m.DistillSeconds, m.WallSeconds
	r.lastLoss = m.LastLabelLoss
	r.lastValAcc = math.NaN()
	if m.LastValAcc != nil {
		r.lastValAcc = *m.LastValAcc
	}
	r.lastCkpt = [3]int{r.step, r.epoch, r.nextBatch}
	return nil
}
