package train

// epochs_checkpoint.go: EpochTrainer's training saved and resumed at epoch boundaries. A
// checkpoint holds everything the next epoch depends on (each model's parameters, buffers
// and momentum, its shuffling and augmentation random states, its best parameters and
// validation so far), so a resumed training ends with the same bits as one that ran
// through, on the same machine and libtorch.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/checkpoint"
	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/fileio/npz"
)

// EpochCheckpoint is where and how often EpochTrainer saves its training.
type EpochCheckpoint struct {
	// Path is the checkpoint file (one file, replaced atomically at each save); its folder
	// must exist. Train leaves it in place when it returns: the caller removes it once it
	// has kept the result.
	Path string
	// Every: a save at the end of an epoch once this much wall time has passed since the
	// start or the last save (0: after every epoch). The last epoch is never saved.
	Every time.Duration
	// Tag names the training (what it trains on and how, beyond the recipe and seeds,
	// which are checked too): a checkpoint with another tag is not resumed from.
	Tag string
	// Resumed, when set, hears that the training goes on from a checkpoint after epochs of
	// its total; Saved, when set, is called after each save (an error stops the training).
	Resumed func(epochs, total int)
	Saved   func() error
}

// epochCheckpointKind tells an epoch training's checkpoint from a distillation's.
const epochCheckpointKind = "ldtorch epoch training"

// epochMeta is a checkpoint's JSON: what the training is (checked on resuming) and its
// scalars. The arrays hold the tensors, the validation accuracies and the curve.
type epochMeta struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	Kind    string `json:"kind"`

	Tag      string   `json:"tag"`
	Seeds    []uint64 `json:"seeds"`
	Recipe   string   `json:"recipe"`
	Arch     string   `json:"arch"`
	Images   []int64  `json:"images"` // the training images' shape
	PerModel bool     `json:"per_model"`
	DType    string   `json:"dtype"`

	Epochs   int      `json:"epochs_done"`
	Next     int      `json:"next_check"`
	Steps    int      `json:"steps"`
	OptSteps int64    `json:"optimizer_steps"`
	Seconds  float64  `json:"seconds"`
	Epoch    []int    `json:"best_epochs"`
	Diverged []bool   `json:"diverged"`
	HasBest  []bool   `json:"has_best"`
	Shuffle  [][]byte `json:"shuffle_states"` // each model's PCG (MarshalBinary)
}

// epochState is a training's state beyond its models: what Train keeps between epochs.
type epochState struct {
	res     *EpochResult
	best    [][]*torch.Tensor
	pcgs    []*rand.PCG
	gens    []*torch.Generator // nil without augmentation
	epochs  int                // epochs done
	next    int                // index of the next check in res.Checks
	seconds float64            // wall time of earlier parts
}

// identity is the part of the meta a resumed training must match.
func (st *epochState) identity(et *EpochTrainer, seeds []uint64, ck *EpochCheckpoint) (epochMeta, error) {
	recipe, err := json.Marshal(et.Recipe)
	if err != nil {
		return epochMeta{}, err
	}
	return epochMeta{Format: checkpoint.Format, Version: checkpoint.Version, Kind: epochCheckpointKind,
		Tag: ck.Tag, Seeds: slices.Clone(seeds), Recipe: string(recipe), Arch: et.Net.Arch,
		Images: et.Images.Shape(), PerModel: et.PerModel, DType: et.Images.DType().String()}, nil
}

func sameIdentity(a, b epochMeta) bool {
	return a.Format == b.Format && a.Version == b.Version && a.Kind == b.Kind && a.Tag == b.Tag &&
		slices.Equal(a.Seeds, b.Seeds) && a.Recipe == b.Recipe && a.Arch == b.Arch &&
		slices.Equal(a.Images, b.Images) && a.PerModel == b.PerModel && a.DType == b.DType
}

// sgdOf is the models' optimizer: EpochTrainer's models always train with SGD.
func sgdOf(l *Models) (*torch.SGD, error) {
	s, ok := l.Opt.(*torch.SGD)
	if !ok {
		return nil, fmt.Errorf("train: checkpoint: the models' optimizer is %T, not SGD", l.Opt)
	}
	return s, nil
}

// save writes the state after st.epochs epochs, seconds of wall time in all so far.
func (st *epochState) save(et *EpochTrainer, seeds []uint64, ck *EpochCheckpoint, seconds float64) error {
	l, res := st.res.Models, st.res
	meta, err := st.identity(et, seeds, ck)
	if err != nil {
		return err
	}
	opt, err := sgdOf(l)
	if err != nil {
		return err
	}
	m := len(seeds)
	meta.Epochs, meta.Next, meta.Steps, meta.OptSteps, meta.Seconds = st.epochs, st.next, l.steps, opt.StepCount, seconds
	meta.Epoch, meta.Diverged = slices.Clone(res.Epoch), slices.Clone(res.Diverged)
	for i := range m {
		meta.HasBest = append(meta.HasBest, st.best[i] != nil)
		b, err := st.pcgs[i].MarshalBinary()
		if err != nil {
			return err
		}
		meta.Shuffle = append(meta.Shuffle, b)
	}
	var arrays []*npz.Array
	add := func(name string, t *torch.Tensor) error {
		a, err := checkpoint.TensorArray(name, t)
		if err == nil {
			arrays = append(arrays, a)
		}
		return err
	}
	for i := range m {
		for j, p := range l.Params[i] {
			if err := add(fmt.Sprintf("param.%d.%d", i, j), p); err != nil {
				return err
			}
		}
		for j, b := range l.Buffers[i] {
			if err := add(fmt.Sprintf("buffer.%d.%d", i, j), b); err != nil {
				return err
			}
		}
		for j, b := range st.best[i] {
			if err := add(fmt.Sprintf("best.%d.%d", i, j), b); err != nil {
				return err
			}
		}
	}
	for j, b := range opt.Buffers {
		if err := add(fmt.Sprintf("momentum.%d", j), b); err != nil {
			return err
		}
	}
	for i, g := range st.gens {
		state, err := g.State()
		if err != nil {
			return err
		}
		v, err := state.Uint8s()
		state.Free()
		if err != nil {
			return err
		}
		a, err := npz.New(fmt.Sprintf("generator.%d", i), []int{len(v)}, v)
		if err != nil {
			return err
		}
		arrays = append(arrays, a)
	}
	val, err := npz.New("validation", []int{m}, slices.Clone(res.Validation))
	if err != nil {
		return err
	}
	var curve []float64
	for _, row := range res.Curve {
		curve = append(curve, row...)
	}
	if curve == nil {
		curve = []float64{}
	}
	cv, err := npz.New("curve", []int{len(res.Curve), m}, curve)
	if err != nil {
		return err
	}
	arrays = append(arrays, val, cv)
	if err := checkpoint.Write(ck.Path, meta, arrays); err != nil {
		return fmt.Errorf("train: saving the training: %w", err)
	}
	if ck.Saved != nil {
		return ck.Saved()
	}
	return nil
}

// restore resumes from ck.Path when it holds this training (same identity) and reads back
// whole; otherwise it leaves the fresh state as it is. An error means the models were
// touched and cannot go on.
func (st *epochState) restore(et *EpochTrainer, seeds []uint64, ck *EpochCheckpoint) error {
	f, err := checkpoint.Read(ck.Path)
	if err != nil {
		return nil // missing, damaged or not a checkpoint: a fresh start
	}
	var meta epochMeta
	if err := f.Meta(&meta); err != nil {
		return nil
	}
	want, err := st.identity(et, seeds, ck)
	if err != nil {
		return err
	}
	l, res := st.res.Models, st.res
	m := len(seeds)
	opt, err := sgdOf(l)
	if err != nil {
		return err
	}
	if !sameIdentity(meta, want) || meta.Epochs < 1 || meta.Epochs >= et.Recipe.Epochs || meta.Next < 0 ||
		meta.Next > len(res.Checks) || len(meta.Epoch) != m || len(meta.Diverged) != m || len(meta.HasBest) != m ||
		len(meta.Shuffle) != m || meta.Steps < 0 || meta.OptSteps < 1 {
		return nil
	}
	// Everything is read and checked before anything is changed.
	type copyTo struct {
		dst *torch.Tensor
		a   *npz.Array
	}
	var copies []copyTo
	whole := true // every member present, of the shape and dtype it restores into
	want1 := func(name string, dst *torch.Tensor) {
		a, err := f.Array(name)
		if err != nil || checkpoint.Fits(dst, a) != nil {
			whole = false
			return
		}
		copies = append(copies, copyTo{dst, a})
	}
	best := make([][]*torch.Tensor, m)
	defer func() {
		for _, b := range best {
			torch.FreeAll(b)
		}
	}()
	for i := range m {
		for j, p := range l.Params[i] {
			want1(fmt.Sprintf("param.%d.%d", i, j), p)
			if meta.HasBest[i] {
				var c *torch.Tensor
				err := torch.NoGrad(func() (err error) {
					c, err = p.Clone() // a tensor of p's shape, dtype and device; overwritten
					return err
				})
				if err != nil {
					return err
				}
				torch.Escape(c)
				best[i] = append(best[i], c)
				want1(fmt.Sprintf("best.%d.%d", i, j), c)
			}
		}
		for j, b := range l.Buffers[i] {
			want1(fmt.Sprintf("buffer.%d.%d", i, j), b)
		}
	}
	for j, b := range opt.Buffers {
		want1(fmt.Sprintf("momentum.%d", j), b)
	}
	gens := make([][]byte, len(st.gens))
	for i := range st.gens {
		a, _ := f.Array(fmt.Sprintf("generator.%d", i))
		v, ok := dataOf[uint8](a)
		gens[i], whole = v, whole && ok
	}
	val, _ := f.Array("validation")
	curve, _ := f.Array("curve")
	vv, ok1 := dataOf[float64](val)
	cv, ok2 := dataOf[float64](curve)
	if !whole || !ok1 || !ok2 || len(vv) != m || !slices.Equal(curve.Shape, []int{meta.Next, m}) {
		return nil
	}
	pcgs := make([]rand.PCG, m)
	for i, b := range meta.Shuffle {
		if pcgs[i].UnmarshalBinary(b) != nil {
			return nil
		}
	}

	// Apply.
	for _, c := range copies {
		if err := checkpoint.RestoreTensor(c.dst, c.a); err != nil {
			return fmt.Errorf("train: resuming from %s: %w", ck.Path, err)
		}
	}
	for i, b := range gens {
		state, err := torch.FromUint8(b, int64(len(b)))
		if err != nil {
			return err
		}
		err = st.gens[i].SetState(state)
		state.Free()
		if err != nil {
			return fmt.Errorf("train: resuming from %s: generator %d: %w", ck.Path, i, err)
		}
	}
	for i := range pcgs {
		*st.pcgs[i] = pcgs[i]
	}
	opt.StepCount = meta.OptSteps
	l.steps = meta.Steps
	for i := range m {
		torch.FreeAll(st.best[i])
		st.best[i], best[i] = best[i], nil
	}
	copy(res.Validation, vv)
	copy(res.Epoch, meta.Epoch)
	copy(res.Diverged, meta.Diverged)
	res.Curve = nil
	for k := range meta.Next {
		res.Curve = append(res.Curve, slices.Clone(cv[k*m:(k+1)*m]))
	}
	st.epochs, st.next, st.seconds = meta.Epochs, meta.Next, meta.Seconds
	res.ResumedAt = meta.Epochs
	if ck.Resumed != nil {
		ck.Resumed(meta.Epochs, et.Recipe.Epochs)
	}
	return nil
}

// RemoveEpochCheckpoint deletes a training's checkpoint file; a missing one is no error.
func RemoveEpochCheckpoint(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// dataOf is a's values when a is present and holds T.
func dataOf[T any](a *npz.Array) ([]T, bool) {
	if a == nil {
		return nil, false
	}
	v, ok := a.Data.([]T)
	return v, ok
}
