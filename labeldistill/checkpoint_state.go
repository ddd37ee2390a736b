package labeldistill

// checkpoint_state.go: the run's side of checkpoints: writing the run's state at a meta-step
// boundary, choosing the newest valid checkpoint on resume, refusing an incompatible one,
// and restoring the state from it. The file format (members, meta, integrity, listing,
// pruning) is in checkpoint_file.go.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/npz"
)

// ResumeError is why a run cannot be resumed from a checkpoint folder (none there, none
// valid, another configuration or other data); Msg is the sentence after "resume: ". Err,
// when set, is the underlying error.
type ResumeError struct {
	Msg string
	Err error
}

func (e *ResumeError) Error() string { return "resume: " + e.Msg }
func (e *ResumeError) Unwrap() error { return e.Err }

func resumeErrorf(format string, args ...any) *ResumeError {
	err := fmt.Errorf(format, args...)
	return &ResumeError{Msg: err.Error(), Err: errors.Unwrap(err)}
}

// checkpointsEnabled reports whether this run writes checkpoints.
func (r *run) checkpointsEnabled() bool { return r.ckptDir != "" && r.cfg.CheckpointEvery >= 0 }

// position is a place in the meta-loop, a meta-step boundary: meta-steps done, the epoch
// in progress (1-based; Epochs+1 when done) and the batches of it done. A checkpoint is
// written at an explicit position, which the run resumes from.
type position struct {
	step, epoch, nextBatch int
}

// position is where the meta-loop is now.
func (r *run) position() position { return position{r.step, r.epoch, r.nextBatch} }

// namedTensor is one tensor of the run's state and its member name in a checkpoint.
type namedTensor struct {
	name string
	t    *torch.Tensor
}

// tensorState is the run's tensor state, in checkpoint order: the one list that
// writeCheckpoint saves and restore loads. The rest of the state (best labels, the epoch's
// permutation, the random generators, and the scalars in meta) is not tensors and is
// written and read next to it.
func (r *run) tensorState(modelAdam *torch.Adam) []namedTensor {
	state := []namedTensor{{"labels", r.labels.Y}, {"labels.exp_avg", r.labels.opt.ExpAvg[0]}, {"labels.exp_avg_sq", r.labels.opt.ExpAvgSq[0]}}
	for i, sp := range r.model.specs {
		state = append(state, namedTensor{"param." + sp.Name, r.model.params[i]},
			namedTensor{"param." + sp.Name + ".exp_avg", modelAdam.ExpAvg[i]},
			namedTensor{"param." + sp.Name + ".exp_avg_sq", modelAdam.ExpAvgSq[i]})
	}
	for i, b := range r.net.Buffers {
		state = append(state, namedTensor{"buffer." + b.Name, r.model.buffers[i]})
	}
	if r.model.rr {
		state = append(state, namedTensor{"rr.w", r.model.w}, namedTensor{"rr.scale", r.model.scale},
			namedTensor{"rr.scale.exp_avg", r.model.sOpt.ExpAvg[0]}, namedTensor{"rr.scale.exp_avg_sq", r.model.sOpt.ExpAvgSq[0]})
	}
	return state
}

// arrayState is a part of the run's state that is not a tensor, saved as one raw array:
// the best labels, the epoch's permutation, the random generators. save returns the array's
// shape and data, or ok = false when there is nothing to save at this position; load reads
// it back into the run. Whether restore expects the member is decided from the meta
// (needed).
type arrayState struct {
	name   string
	save   func() (shape []int, data any, ok bool, err error)
	needed func(m *checkpointMeta) bool
	load   func(a *npz.Array) error
}

// arrayStates lists the run's non-tensor arrays, in checkpoint order: the one list that
// writeCheckpoint saves and restore loads (tensorState lists the tensors).
func (r *run) arrayStates(pos position) []arrayState {
	perEpoch := StepsPerEpoch(r.ds.TargetSet.N(), r.cfg.OuterBatch)
	midEpoch := func(nextBatch int) bool { return nextBatch > 0 && nextBatch < perEpoch }
	always := func(*checkpointMeta) bool { return true }
	return []arrayState{
		{
			name: "best_labels",
			save: func() ([]int, any, bool, error) {
				if r.best == nil {
					return nil, nil, false, nil
				}
				for i, v := range r.best {
					if !finite(float64(v)) {
						return nil, nil, false, &NonFiniteError{Step: pos.step, Quantity: fmt.Sprintf("best labels (element %d)", i), Value: float64(v)}
					}
				}
				return []int{r.ds.Base.N(), r.ds.Classes}, slices.Clone(r.best), true, nil
			},
			needed: func(m *checkpointMeta) bool { return m.HasBest },
			load: func(a *npz.Array) error {
				v, ok := a.Data.([]float32)
				if !ok || len(a.Shape) != 2 || a.Shape[0] != r.ds.Base.N() || a.Shape[1] != r.ds.Classes {
					return fmt.Errorf("best_labels: want float32 %d×%d, got %s %v", r.ds.Base.N(), r.ds.Classes, a.DType, a.Shape)
				}
				r.best = v
				return nil
			},
		},
		{
			// The epoch's order of target examples, needed only mid-epoch.
			name: "epoch_order",
			save: func() ([]int, any, bool, error) {
				if !midEpoch(pos.nextBatch) {
					return nil, nil, false, nil
				}
				order := make([]int64, len(r.order))
				for i, v := range r.order {
					order[i] = int64(v)
				}
				return []int{len(order)}, order, true, nil
			},
			needed: func(m *checkpointMeta) bool { return midEpoch(m.NextBatch) },
			load: func(a *npz.Array) error {
				v, ok := a.Data.([]int64)
				if !ok || len(v) != r.ds.TargetSet.N() {
					return fmt.Errorf("epoch_order: want int64 (%d), got %s %v", r.ds.TargetSet.N(), a.DType, a.Shape)
				}
				seen := make([]bool, len(v))
				order := make([]int, len(v))
				for i, x := range v {
					if x < 0 || int(x) >= len(v) || seen[x] {
						return errors.New("epoch_order is not a permutation of the target set")
					}
					seen[x] = true
					order[i] = int(x)
				}
				r.order = order
				return nil
			},
		},
		{
			name: "rng.go_pcg", // base batches and epoch permutations
			save: func() ([]int, any, bool, error) {
				b, err := r.pcg.MarshalBinary()
				if err != nil {
					return nil, nil, false, fmt.Errorf("checkpoint: Go random state: %w", err)
				}
				return []int{len(b)}, b, true, nil
			},
			needed: always,
			load: func(a *npz.Array) error {
				b, ok := a.Data.([]uint8)
				if !ok {
					return fmt.Errorf("rng.go_pcg: want uint8, got %s", a.DType)
				}
				pcg := &rand.PCG{}
				if err := pcg.UnmarshalBinary(b); err != nil {
					return fmt.Errorf("rng.go_pcg: %w", err)
				}
				r.pcg, r.rng = pcg, rand.New(pcg)
				return nil
			},
		},
		{
			name: "rng.torch", // model (re-)initialisations
			save: func() ([]int, any, bool, error) {
				gs, err := r.gen.State()
				if err != nil {
					return nil, nil, false, fmt.Errorf("checkpoint: torch generator state: %w", err)
				}
				b, err := gs.Uint8s()
				if err != nil {
					return nil, nil, false, fmt.Errorf("checkpoint: torch generator state: %w", err)
				}
				return []int{len(b)}, b, true, nil
			},
			needed: always,
			load: func(a *npz.Array) error {
				b, ok := a.Data.([]uint8)
				if !ok {
					return fmt.Errorf("rng.torch: want uint8, got %s", a.DType)
				}
				state, err := torch.FromUint8(b, int64(len(b)))
				if err != nil {
					return err
				}
				err = r.gen.SetState(state)
				state.Free()
				if err != nil {
					return fmt.Errorf("rng.torch: %w", err)
				}
				return nil
			},
		},
	}
}

// scalar pairs one scalar of the run's state with its field in the checkpoint's meta.
type scalar struct{ save, load func() }

// bind is the scalar kept in *run and recorded in *meta.
func bind[T any](run, meta *T) scalar {
	return scalar{save: func() { *meta = *run }, load: func() { *run = *meta }}
}

// scalarStates lists the run's scalar state and its meta fields: the one list that
// writeCheckpoint copies into m and restore copies back. (The position, the configuration
// and the data checksums are written by writeCheckpoint and checked by compatible and
// restore instead.)
func (r *run) scalarStates(m *checkpointMeta, modelAdam *torch.Adam) []scalar {
	out := []scalar{
		bind(&r.labels.opt.StepCount, &m.LabelAdamSteps),
		bind(&modelAdam.StepCount, &m.ModelAdamSteps),
		bind(&r.bestRecord, &m.BestRecord),
		bind(&r.validations, &m.Validations),
		bind(&r.distillSeconds, &m.DistillSeconds),
		bind(&r.lastLoss, &m.LastLabelLoss),
		// Wall time: the time so far is saved; a resumed run counts on from it.
		{save: func() { m.WallSeconds = r.wallSeconds() }, load: func() { r.priorWall = m.WallSeconds }},
		// The last validation accuracy: NaN in the run, null in the meta before the first.
		{save: func() {
			m.LastValAcc = nil
			if !math.IsNaN(r.lastValAcc) {
				v := r.lastValAcc
				m.LastValAcc = &v
			}
		}, load: func() {
			r.lastValAcc = math.NaN()
			if m.LastValAcc != nil {
				r.lastValAcc = *m.LastValAcc
			}
		}},
	}
	if r.model.rr {
		out = append(out, bind(&r.model.sOpt.StepCount, &m.ScaleAdamSteps))
	}
	return out
}

// adamOf returns the model's Adam (distillation always uses Adam).
func (r *run) adamOf() (*torch.Adam, error) {
	a, ok := r.model.opt.(*torch.Adam)
	if !ok {
		return nil, fmt.Errorf("checkpoint: the distillation model's optimizer is %T, not Adam", r.model.opt)
	}
	return a, nil
}

// writeCheckpoint saves the run's whole state as <ckptDir>/ckpt-<step>.npz, to be resumed
// at pos, and prunes old ones. pos is the position after the last meta-step done: the
// current one, or the start of the next batch or epoch when the loop has not advanced to it
// yet. Non-finite state is refused with a *NonFiniteError (the previous checkpoints stay).
func (r *run) writeCheckpoint(reason string, pos position) (err error) {
	if !r.checkpointsEnabled() {
		return nil
	}
	// The state saved includes every step's checks and its observation by the reset rule.
	if err := r.readSteps(); err != nil {
		return err
	}
	if r.lastCkpt == pos {
		return nil
	}
	// The history up to this position must survive whatever follows the checkpoint.
	if err := r.history.sync(); err != nil {
		return err
	}
	s := torch.NewScope()
	defer s.Close()
	step := pos.step
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
		Step:    pos.step, Epoch: pos.epoch, NextBatch: pos.nextBatch,
		StepsPerEpoch: StepsPerEpoch(r.ds.TargetSet.N(), r.cfg.OuterBatch), TargetSize: r.ds.TargetSet.N(),
		WorldSize: r.par.size(),
		Config:    r.cfg, DataSHA256: r.ds.Files, DataDigest: r.dataDigest,
		T: r.T(), HasBest: r.best != nil, TorchVersion: torch.Version(),
	}
	for _, sc := range r.scalarStates(&meta, modelAdam) {
		sc.save()
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
	js, err := json.Marshal(meta)
	if err != nil {
		return fmt.Errorf("checkpoint: meta: %w", err)
	}
	addRaw("meta", []int{len(js)}, js)

	for _, nt := range r.tensorState(modelAdam) {
		// Detached, so that the trainable ones (labels, parameters, the RR scale) can be read;
		// a missing tensor is named by tensorArray.
		t := nt.t
		if t != nil && !t.Freed() {
			var derr error
			if t, derr = t.Detach(); derr != nil {
				return derr
			}
		}
		add(nt.name, t)
	}
	if err != nil {
		return err
	}
	for _, st := range r.arrayStates(pos) {
		shape, data, ok, serr := st.save()
		if serr != nil {
			return serr
		}
		if ok {
			addRaw(st.name, shape, data)
		}
	}
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
	r.report(Progress{Phase: "checkpoint", Epoch: min(pos.epoch, r.cfg.Epochs), Epochs: r.cfg.Epochs, Message: fmt.Sprintf("wrote %s (%s)", path, reason)})
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
		r.resumeChanges = config.DiffDetails(c.Meta.Config, r.cfg)
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

// compatible refuses a checkpoint written under another configuration or data.
func (r *run) compatible(c *checkpoint) error {
	if conflicts := config.ResumeConflicts(c.Meta.Config, r.cfg); len(conflicts) > 0 {
		details := config.DiffDetails(c.Meta.Config, r.cfg)
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
	if n := c.Meta.WorldSize; n != 0 && n != r.par.size() {
		// A data-parallel run's arithmetic depends on its world size (each rank's shard of
		// the outer batch, the order of the sums): resuming with another would silently mix
		// two computations. (Checkpoints from before world_size was recorded have 0.)
		return resumeErrorf("%s was written by a run of %d process(es), this one has %d: resume it with %d (ldtorch distill --nproc %d, or torchrun with as many)",
			c.Path, n, r.par.size(), n, n)
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
	for i, sp := range r.model.specs {
		if m.Params[i] != sp.Name {
			return fmt.Errorf("parameter %d is %q in the checkpoint, %q in the model", i, m.Params[i], sp.Name)
		}
	}
	for i, b := range r.net.Buffers {
		if m.Buffers[i] != b.Name {
			return fmt.Errorf("buffer %d is %q in the checkpoint, %q in the model", i, m.Buffers[i], b.Name)
		}
	}
	for _, nt := range r.tensorState(modelAdam) {
		a, err := c.array(nt.name)
		if err != nil {
			return err
		}
		if err := restoreTensor(nt.t, a); err != nil {
			return err
		}
	}
	r.best, r.order = nil, nil
	for _, st := range r.arrayStates(position{m.Step, m.Epoch, m.NextBatch}) {
		if !st.needed(&m) {
			continue
		}
		a, err := c.array(st.name)
		if err != nil {
			return err
		}
		if err := st.load(a); err != nil {
			return err
		}
	}
	for _, sc := range r.scalarStates(&m, modelAdam) {
		sc.load()
	}
	r.tracker = &tr
	r.step, r.epoch, r.nextBatch = m.Step, m.Epoch, m.NextBatch
	r.lastCkpt = r.position()
	return nil
}
