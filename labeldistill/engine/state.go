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
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/ldtorch/ldtorch/labeldistill/checkpoint"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/fileio/npz"
)

// CheckpointMeta is the JSON "meta" member of a checkpoint: the format, the Position, the
// run's record as of the Position, and what restoring needs besides the arrays.
type CheckpointMeta struct {
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
	// StepsPerEpoch and TargetSize are recorded to check the Position on resume.
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
func (m *CheckpointMeta) optimizerSteps() map[string]int64 {
	if m.OptimizerSteps != nil {
		return m.OptimizerSteps
	}
	return map[string]int64{"labels": m.LabelAdamSteps, "model": m.ModelAdamSteps, "rr.scale": m.ScaleAdamSteps}
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
	needed func(m *CheckpointMeta) bool
	load   func(a *npz.Array) error
}

// arrayStates lists the loop's non-tensor arrays, in checkpoint order: the one list that
// write saves and restore loads.
func (l *Loop) arrayStates(pos Position) []arrayState {
	ds := l.in.ds
	perEpoch := l.stepsPerEpoch()
	midEpoch := func(nextBatch int) bool { return nextBatch > 0 && nextBatch < perEpoch }
	always := func(*CheckpointMeta) bool { return true }
	s := ds.Shape
	return []arrayState{
		keptArray("best_labels", &l.best.labels, []int{ds.Base.N, ds.Classes}, pos.Step,
			func(m *CheckpointMeta) bool { return m.HasBest }),
		keptArray("best_images", &l.best.images, []int{ds.Base.N, int(s[0]), int(s[1]), int(s[2])}, pos.Step,
			func(m *CheckpointMeta) bool { return false }), // optional: loaded when present (see restore)
		keptArray("best_step_lrs", &l.best.lrs, []int{l.T()}, pos.Step,
			func(m *CheckpointMeta) bool { return m.HasBest && l.dd != nil }),
		{
			// The epoch's order of target examples, needed only mid-epoch.
			name: "epoch_order",
			save: func() ([]int, any, bool, error) {
				if !midEpoch(pos.NextBatch) {
					return nil, nil, false, nil
				}
				order := make([]int64, len(l.order))
				for i, v := range l.order {
					order[i] = int64(v)
				}
				return []int{len(order)}, order, true, nil
			},
			needed: func(m *CheckpointMeta) bool { return midEpoch(m.NextBatch) },
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
func keptArray(name string, dst *[]float32, shape []int, step int, needed func(*CheckpointMeta) bool) arrayState {
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
// copies into m and restore copies back. (The Position, the configuration and the data
// checksums are written by write and checked by compatible and restore instead.)
func (l *Loop) scalarStates(m *CheckpointMeta) []scalar {
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

// restore loads a verified, compatible checkpoint into the loop.
func (l *Loop) restore(f *checkpoint.File, m *CheckpointMeta) error {
	cfg := l.in.cfg
	perEpoch := l.stepsPerEpoch()
	nTarget := l.in.ds.TargetSet.N
	switch {
	case m.StepsPerEpoch != perEpoch || m.TargetSize != nTarget:
		return fmt.Errorf("checkpoint has %d steps per epoch over %d target examples, the run %d over %d", m.StepsPerEpoch, m.TargetSize, perEpoch, nTarget)
	case m.Epoch < 1 || m.Epoch > cfg.Epochs+1 || m.NextBatch < 0 || m.NextBatch > perEpoch ||
		(m.Epoch == cfg.Epochs+1 && m.NextBatch != 0) || m.Step != (m.Epoch-1)*perEpoch+m.NextBatch:
		return fmt.Errorf("inconsistent position: step %d, epoch %d, batch %d", m.Step, m.Epoch, m.NextBatch)
	}
	var tr ResetTracker
	if err := json.Unmarshal(m.Tracker, &tr); err != nil {
		return err
	}
	observed := m.Step
	if l.dd != nil {
		observed = 0 // method dd has no reset rule
	}
	if tr.Window() != cfg.ResetWindow || tr.MeanOfLast() != cfg.ResetMeanOfLast || tr.TotalSteps() != observed {
		return fmt.Errorf("reset tracker (window %d, mean of last %d, %d steps) does not match the run (%d, %d, %d steps)",
			tr.Window(), tr.MeanOfLast(), tr.TotalSteps(), cfg.ResetWindow, cfg.ResetMeanOfLast, observed)
	}
	model := l.model
	if len(m.Params) != len(model.specs) || len(m.Buffers) != len(l.in.net.Buffers) {
		return fmt.Errorf("checkpoint holds %d parameters and %d buffers, the model has %d and %d", len(m.Params), len(m.Buffers), len(model.specs), len(l.in.net.Buffers))
	}
	for i, sp := range model.specs {
		if m.Params[i] != sp.Name {
			return fmt.Errorf("parameter %d is %q in the checkpoint, %q in the model", i, m.Params[i], sp.Name)
		}
	}
	for i, b := range l.in.net.Buffers {
		if m.Buffers[i] != b.Name {
			return fmt.Errorf("buffer %d is %q in the checkpoint, %q in the model", i, m.Buffers[i], b.Name)
		}
	}
	for _, nt := range l.tensorState() {
		a, err := f.Array(nt.name)
		if err != nil {
			return err
		}
		if err := checkpoint.RestoreTensor(nt.t, a); err != nil {
			return err
		}
	}
	l.best.labels, l.best.images, l.best.lrs, l.order = nil, nil, nil, nil
	for _, st := range l.arrayStates(Position{m.Step, m.Epoch, m.NextBatch}) {
		a, err := f.Array(st.name)
		if !st.needed(m) && err != nil {
			continue // absent and not required
		}
		if err != nil {
			return err
		}
		if err := st.load(a); err != nil {
			return err
		}
	}
	for _, sc := range l.scalarStates(m) {
		sc.load()
	}
	l.tracker = &tr
	l.pos = Position{m.Step, m.Epoch, m.NextBatch}
	return nil
}

// Snapshot is the loop's whole state at pos, a meta-step boundary, as a checkpoint's meta
// and arrays (the three lists above), with reason ("periodic", "validation", "final",
// "cancelled") and the time of writing in the meta. Non-finite state is refused with a
// *NonFiniteError. The caller reads the pending steps first (ReadPending).
func (l *Loop) Snapshot(reason string, pos Position) (CheckpointMeta, []*npz.Array, error) {
	s := torch.NewScope()
	defer s.Close()
	in := l.in
	meta := CheckpointMeta{
		Format: checkpoint.Format, Version: checkpoint.Version, Reason: reason,
		Written: time.Now().UTC().Format(time.RFC3339),
		Step:    pos.Step, Epoch: pos.Epoch, NextBatch: pos.NextBatch,
		StepsPerEpoch: l.stepsPerEpoch(), TargetSize: in.ds.TargetSet.N, WorldSize: l.par.size(),
		Record: Record{Config: in.cfg, T: l.T(), MetaSteps: pos.Step, Resets: l.tracker.Resets(),
			DataSHA256: in.ds.Files, NetworkSHA256: in.networkSHA256(), LibtorchVersion: torch.Version(), BaseOrigin: in.origin},
		DataDigest: in.dataDigest(), HasBest: l.best.labels != nil,
	}
	for _, sc := range l.scalarStates(&meta) {
		sc.save()
	}
	var err error
	if meta.Tracker, err = json.Marshal(l.tracker); err != nil {
		return CheckpointMeta{}, nil, fmt.Errorf("checkpoint: reset tracker: %w", err)
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
				return CheckpointMeta{}, nil, err
			}
		}
		a, err := tensorArray(nt.name, t, pos.Step)
		if err != nil {
			return CheckpointMeta{}, nil, err
		}
		arrays = append(arrays, a)
	}
	for _, st := range l.arrayStates(pos) {
		shape, data, ok, err := st.save()
		if err != nil {
			return CheckpointMeta{}, nil, err
		}
		if !ok {
			continue
		}
		a, err := npz.New(st.name, shape, data)
		if err != nil {
			return CheckpointMeta{}, nil, err
		}
		arrays = append(arrays, a)
	}
	return meta, arrays, nil
}
