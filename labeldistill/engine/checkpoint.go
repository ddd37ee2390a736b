package engine

// checkpoint.go: a distillation's checkpoints (the file format is labeldistill/checkpoint):
// the observer that writes the loop's whole state at meta-step boundaries (every
// CheckpointEvery meta-steps, after validations, at the end, on cancellation), and the one
// list of that state which writing saves and resume.go restores, so that a resumed run
// continues bit-identically (CPU, fixed thread count). See docs/RELIABILITY.md.
//
// Members (after meta, in this order):
//
//	<learnable>                float32  each learnt value ("labels": N×C, the current table;
//	                                    "images": N×C×H×W pixels; "dd.images", "dd.step_raw")
//	<learnable>.exp_avg, .exp_avg_sq    its Adam moments
//	param.<name>               float32  model parameters (the RR body under rr)
//	param.<name>.exp_avg, .exp_avg_sq   their Adam moments
//	buffer.<name>              float32  BatchNorm running statistics (none for LeNet/AlexCifarNet)
//	rr.w, rr.scale, rr.scale.exp_avg, rr.scale.exp_avg_sq   (rr only)
//	best_labels                float32  N×C, the labels kept by validation (when one ran)
//	best_images                float32  N×C×H×W, the images kept, when a learnable changes them
//	best_step_lrs              float32  T, method dd's kept step sizes
//	epoch_order                int64    the epoch's permutation of the target set (mid-epoch only)
//	rng.go_pcg                 uint8    math/rand/v2 PCG state (MarshalBinary)
//	rng.torch                  uint8    the torch generator's state (model re-initialisation)

import (
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
	"strings"
	"time"
	"unsafe"

	"github.com/ldtorch/ldtorch/labeldistill/checkpoint"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/atomicfile"
	"github.com/ldtorch/ldtorch/torch/npz"
)

// checkpointMeta is the JSON "meta" member of a checkpoint: the format, the position, the
// run's record as of the position, and what restoring needs besides the arrays.
type checkpointMeta struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	Reason  string `json:"reason"` // periodic, validation, final, cancelled
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

	Record
	// DataDigest is the SHA-256 of the data as trained on (every split's images and labels
	// and the base indices), so that data given through WithData is checked too.
	DataDigest string          `json:"data_digest"`
	Tracker    json.RawMessage `json:"reset_tracker"`
	HasBest    bool            `json:"has_best"`
	// OptimizerSteps are the Adams' step counts by name: each learnable's ("labels"),
	// "model", and "rr.scale" under rr.
	OptimizerSteps map[string]int64 `json:"optimizer_steps,omitempty"`
	Params         []string         `json:"params"`
	Buffers        []string         `json:"buffers"`
	LastLabelLoss  float64          `json:"last_label_loss"`
	LastValAcc     *float64         `json:"last_validation_accuracy"` // null before the first validation

	// Read from checkpoints written before OptimizerSteps and the shared record: the three
	// step counts and T (informational).
	LabelAdamSteps int64 `json:"label_adam_steps,omitempty"`
	ModelAdamSteps int64 `json:"model_adam_steps,omitempty"`
	ScaleAdamSteps int64 `json:"scale_adam_steps,omitempty"`
	OldT           int   `json:"steps_T,omitempty"`
}

// optimizerSteps is m's step counts, taken from the fields of older checkpoints when they
// are all it has.
func (m *checkpointMeta) optimizerSteps() map[string]int64 {
	if m.OptimizerSteps != nil {
		return m.OptimizerSteps
	}
	return map[string]int64{"labels": m.LabelAdamSteps, "model": m.ModelAdamSteps, "rr.scale": m.ScaleAdamSteps}
}

// checkpointer is the observer that writes checkpoints into dir, keeping the newest keep.
type checkpointer struct {
	dir  string
	keep int
	last position // of the last checkpoint written or loaded
	// written is that checkpoint's time stamp (its meta's "written"), which with its step
	// names it (phases.go).
	written string
}

func (c *checkpointer) observer() Observer {
	return Observer{
		Stepped: func(l *Loop) error {
			every := l.in.cfg.CheckpointEvery
			// A checkpoint due with an epoch's last batch waits for its validation (epochEnd).
			if every > 0 && l.pos.step%every == 0 && l.pos.nextBatch < l.stepsPerEpoch() {
				return c.write(l, "periodic", l.pos)
			}
			return nil
		},
		EpochEnd: func(l *Loop, epoch int, validated bool) error {
			// At the position (next epoch, batch 0), before the next epoch's permutation.
			every := l.in.cfg.CheckpointEvery
			reason := ""
			switch {
			case every > 0 && l.pos.step%every == 0:
				reason = "periodic"
			case every == 0 && validated:
				reason = "validation"
			case epoch == l.in.cfg.Epochs:
				reason = "final"
			}
			if reason == "" {
				return nil
			}
			return c.write(l, reason, position{l.pos.step, epoch + 1, 0})
		},
		End: func(l *Loop, err error) error {
			if werr := c.write(l, "cancelled", l.pos); werr != nil {
				return fmt.Errorf("the checkpoint on cancellation failed: %v", werr)
			}
			return nil
		},
	}
}

// tensorState is the loop's tensor state, in checkpoint order: the one list that write
// saves and restore loads.
func (l *Loop) tensorState() []namedTensor {
	var state []namedTensor
	for _, v := range l.learnt {
		state = append(state, v.state()...)
	}
	m := l.model
	adam := m.adam()
	for i, sp := range m.specs {
		state = append(state, namedTensor{"param." + sp.Name, m.params[i]},
			namedTensor{"param." + sp.Name + ".exp_avg", adam.ExpAvg[i]},
			namedTensor{"param." + sp.Name + ".exp_avg_sq", adam.ExpAvgSq[i]})
	}
	for i, b := range m.net.Buffers {
		state = append(state, namedTensor{"buffer." + b.Name, m.buffers[i]})
	}
	if m.rr {
		state = append(state, namedTensor{"rr.w", m.w}, namedTensor{"rr.scale", m.scale},
			namedTensor{"rr.scale.exp_avg", m.sOpt.ExpAvg[0]}, namedTensor{"rr.scale.exp_avg_sq", m.sOpt.ExpAvgSq[0]})
	}
	return state
}

// optimizers are the loop's Adams by name (their step counts go into the meta).
func (l *Loop) optimizers() []namedAdam {
	var out []namedAdam
	for _, v := range l.learnt {
		out = append(out, v.optimizers()...)
	}
	out = append(out, namedAdam{"model", l.model.adam()})
	if l.model.rr {
		out = append(out, namedAdam{"rr.scale", l.model.sOpt})
	}
	return out
}

// arrayState is a part of the loop's state that is not a tensor, saved as one raw array.
// save returns the array's shape and data, or ok = false when there is nothing to save at
// this position; needed says from the meta whether a checkpoint holds it; load reads it back.
type arrayState struct {
	name   string
	save   func() (shape []int, data any, ok bool, err error)
	needed func(m *checkpointMeta) bool
	load   func(a *npz.Array) error
}

// arrayStates lists the loop's non-tensor arrays, in checkpoint order: the one list that
// write saves and restore loads.
func (l *Loop) arrayStates(pos position) []arrayState {
	ds := l.in.ds
	perEpoch := l.stepsPerEpoch()
	midEpoch := func(nextBatch int) bool { return nextBatch > 0 && nextBatch < perEpoch }
	always := func(*checkpointMeta) bool { return true }
	s := ds.Shape
	return []arrayState{
		keptArray("best_labels", &l.best.labels, []int{ds.Base.N, ds.Classes}, pos.step,
			func(m *checkpointMeta) bool { return m.HasBest }),
		keptArray("best_images", &l.best.images, []int{ds.Base.N, int(s[0]), int(s[1]), int(s[2])}, pos.step,
			func(m *checkpointMeta) bool { return false }), // optional: loaded when present (see restore)
		keptArray("best_step_lrs", &l.best.lrs, []int{l.T()}, pos.step,
			func(m *checkpointMeta) bool { return m.HasBest && l.dd != nil }),
		{
			// The epoch's order of target examples, needed only mid-epoch.
			name: "epoch_order",
			save: func() ([]int, any, bool, error) {
				if !midEpoch(pos.nextBatch) {
					return nil, nil, false, nil
				}
				order := make([]int64, len(l.order))
				for i, v := range l.order {
					order[i] = int64(v)
				}
				return []int{len(order)}, order, true, nil
			},
			needed: func(m *checkpointMeta) bool { return midEpoch(m.NextBatch) },
			load: func(a *npz.Array) error {
				v, ok := a.Data.([]int64)
				if !ok || len(v) != ds.TargetSet.N {
					return fmt.Errorf("epoch_order: want int64 (%d), got %s %v", ds.TargetSet.N, a.DType, a.Shape)
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
				l.order = order
				return nil
			},
		},
		{
			name: "rng.go_pcg", // base batches and epoch permutations
			save: func() ([]int, any, bool, error) {
				b, err := l.rand.pcg.MarshalBinary()
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
				l.rand.pcg, l.rand.rng = pcg, rand.New(pcg)
				return nil
			},
		},
		{
			name: "rng.torch", // model (re-)initialisations
			save: func() ([]int, any, bool, error) {
				gs, err := l.rand.gen.State()
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
				err = l.rand.gen.SetState(state)
				state.Free()
				if err != nil {
					return fmt.Errorf("rng.torch: %w", err)
				}
				return nil
			},
		},
	}
}

// keptArray is the arrayState of one kept table (*dst, float32 of shape), refused when not
// finite.
func keptArray(name string, dst *[]float32, shape []int, step int, needed func(*checkpointMeta) bool) arrayState {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return arrayState{
		name: name,
		save: func() ([]int, any, bool, error) {
			if *dst == nil {
				return nil, nil, false, nil
			}
			for i, v := range *dst {
				if !finite(float64(v)) {
					return nil, nil, false, &NonFiniteError{Step: step, Quantity: fmt.Sprintf("%s (element %d)", strings.ReplaceAll(name, "_", " "), i), Value: float64(v)}
				}
			}
			return shape, slices.Clone(*dst), true, nil
		},
		needed: needed,
		load: func(a *npz.Array) error {
			v, ok := a.Data.([]float32)
			if !ok || len(v) != n || !slices.Equal(a.Shape, shape) {
				return fmt.Errorf("%s: want float32 %v, got %s %v", name, shape, a.DType, a.Shape)
			}
			*dst = v
			return nil
		},
	}
}

// scalar pairs one scalar of the loop's state with its field in the checkpoint's meta.
type scalar struct{ save, load func() }

// bindScalar is the scalar kept in *run and recorded in *meta.
func bindScalar[T any](run, meta *T) scalar {
	return scalar{save: func() { *meta = *run }, load: func() { *run = *meta }}
}

// scalarStates lists the loop's scalar state and its meta fields: the one list that write
// copies into m and restore copies back. (The position, the configuration and the data
// checksums are written by write and checked by compatible and restore instead.)
func (l *Loop) scalarStates(m *checkpointMeta) []scalar {
	return []scalar{
		bindScalar(&l.best.record, &m.BestValidation),
		bindScalar(&l.vals, &m.Validations),
		bindScalar(&l.clock.distillSeconds, &m.DistillSeconds),
		bindScalar(&l.last.loss, &m.LastLabelLoss),
		// Wall time: the time so far is saved; a resumed run counts on from it.
		{save: func() { m.WallSeconds = l.wallSeconds() }, load: func() { l.clock.priorWall = m.WallSeconds }},
		// The last validation accuracy: NaN in the run, null in the meta before the first.
		{save: func() {
			m.LastValAcc = nil
			if !math.IsNaN(l.last.valAcc) {
				v := l.last.valAcc
				m.LastValAcc = &v
			}
		}, load: func() {
			l.last.valAcc = math.NaN()
			if m.LastValAcc != nil {
				l.last.valAcc = *m.LastValAcc
			}
		}},
		{save: func() {
			m.OptimizerSteps = map[string]int64{}
			for _, o := range l.optimizers() {
				m.OptimizerSteps[o.name] = o.opt.StepCount
			}
		}, load: func() {
			steps := m.optimizerSteps()
			for _, o := range l.optimizers() {
				o.opt.StepCount = steps[o.name]
			}
		}},
	}
}

// write saves the loop's whole state as <dir>/ckpt-<step>.npz, to be resumed at pos, and
// prunes old ones. pos is the position after the last meta-step done: the current one, or
// the start of the next batch or epoch when the loop has not advanced to it yet. Non-finite
// state is refused with a *NonFiniteError (the previous checkpoints stay).
func (c *checkpointer) write(l *Loop, reason string, pos position) error {
	// The state saved includes every step's checks and its observation by the reset rule.
	if err := l.read(); err != nil {
		return err
	}
	if c.last == pos {
		return nil
	}
	// What the observers wrote up to this position (the history) must survive whatever
	// follows the checkpoint.
	if err := l.sync(); err != nil {
		return err
	}
	s := torch.NewScope()
	defer s.Close()
	in := l.in
	meta := checkpointMeta{
		Format: checkpoint.Format, Version: checkpoint.Version, Reason: reason,
		Written: time.Now().UTC().Format(time.RFC3339),
		Step:    pos.step, Epoch: pos.epoch, NextBatch: pos.nextBatch,
		StepsPerEpoch: l.stepsPerEpoch(), TargetSize: in.ds.TargetSet.N, WorldSize: l.par.size(),
		Record: Record{Config: in.cfg, T: l.T(), MetaSteps: pos.step, Resets: l.tracker.Resets(),
			DataSHA256: in.ds.Files, LibtorchVersion: torch.Version(), BaseOrigin: in.origin},
		DataDigest: in.dataDigest(), HasBest: l.best.labels != nil,
	}
	for _, sc := range l.scalarStates(&meta) {
		sc.save()
	}
	var err error
	if meta.Tracker, err = json.Marshal(l.tracker); err != nil {
		return fmt.Errorf("checkpoint: reset tracker: %w", err)
	}
	for _, sp := range l.model.specs {
		meta.Params = append(meta.Params, sp.Name)
	}
	for _, b := range in.net.Buffers {
		meta.Buffers = append(meta.Buffers, b.Name)
	}
	var arrays []*npz.Array
	for _, nt := range l.tensorState() {
		// Detached, so that the trainable ones (labels, parameters, the RR scale) can be read;
		// a missing tensor is named by tensorArray.
		t := nt.t
		if t != nil && !t.Freed() {
			if t, err = t.Detach(); err != nil {
				return err
			}
		}
		a, err := tensorArray(nt.name, t, pos.step)
		if err != nil {
			return err
		}
		arrays = append(arrays, a)
	}
	for _, st := range l.arrayStates(pos) {
		shape, data, ok, err := st.save()
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		a, err := npz.New(st.name, shape, data)
		if err != nil {
			return err
		}
		arrays = append(arrays, a)
	}
	path := filepath.Join(c.dir, checkpoint.Name(pos.step))
	if err := checkpoint.Write(path, meta, arrays); err != nil {
		return err
	}
	c.last, c.written = pos, meta.Written
	l.note(Progress{Phase: "checkpoint", Epoch: min(pos.epoch, in.cfg.Epochs), Epochs: in.cfg.Epochs, Message: fmt.Sprintf("wrote %s (%s)", path, reason)})
	if err := checkpoint.Prune(c.dir, c.keep); err != nil {
		l.note(Progress{Phase: "checkpoint", Message: fmt.Sprintf("warning: could not remove old checkpoints: %v", err)})
	}
	return nil
}

// dataDigest is the SHA-256 of the data a run trains on.
func dataDigest(ds *Data) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s|%s|%d|%v|", ds.Target, ds.Source, ds.Classes, ds.Shape)
	for _, s := range []*data.Split{&ds.TargetSet, &ds.Validation, &ds.Test, &ds.Base} {
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

// describeMember names a checkpoint member for people: "labels.exp_avg_sq" is "Adam
// second moment of the labels", "param.conv1.weight" is "model parameter conv1.weight".
func describeMember(name string) string {
	base, moment := name, ""
	for _, m := range []struct{ suffix, words string }{{".exp_avg_sq", "Adam second moment of "}, {".exp_avg", "Adam first moment of "}} {
		if b, ok := strings.CutSuffix(name, m.suffix); ok {
			base, moment = b, m.words
			break
		}
	}
	what := base
	switch {
	case base == "labels":
		what = "the labels"
	case base == "rr.w":
		what = "the ridge weights W"
	case base == "rr.scale":
		what = "the RR scale s"
	case strings.HasPrefix(base, "param."):
		what = "model parameter " + strings.TrimPrefix(base, "param.")
	case strings.HasPrefix(base, "buffer."):
		what = "model buffer " + strings.TrimPrefix(base, "buffer.")
	}
	return moment + what
}

// tensorArray copies t to the host as a named array, refusing non-finite values.
func tensorArray(name string, t *torch.Tensor, step int) (*npz.Array, error) {
	a, err := checkpoint.TensorArray(name, t)
	if err != nil {
		return nil, err
	}
	switch v := a.Data.(type) {
	case []float32:
		for i, x := range v {
			if !finite(float64(x)) {
				return nil, &NonFiniteError{Step: step, Quantity: fmt.Sprintf("%s (element %d)", describeMember(name), i), Value: float64(x)}
			}
		}
	case []float64:
		for i, x := range v {
			if !finite(x) {
				return nil, &NonFiniteError{Step: step, Quantity: fmt.Sprintf("%s (element %d)", describeMember(name), i), Value: x}
			}
		}
	}
	return a, nil
}

// prepareCheckpointDir creates dir and proves it writable, so that an unusable folder fails
// before any work starts.
func prepareCheckpointDir(dir string) error {
	if err := atomicfile.EnsureWritableDir(dir); err != nil {
		return fmt.Errorf("checkpoint folder %s is not writable: %w", dir, err)
	}
	return nil
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
