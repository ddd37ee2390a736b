package train

// epochs_checkpoint_test.go: a training stopped after an epoch and resumed from its
// checkpoint ends with the bits of one that ran through; a checkpoint of another training,
// or a damaged one, is not resumed from.

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ldtorch/ldtorch/nets/augment"
	"github.com/ldtorch/ldtorch/torch"
)

func TestEpochTrainerResumesBitForBit(t *testing.T) {
	s := torch.NewScope()
	defer s.Close()
	x, labels, _ := blobs(t, 48, 21)
	vx, _, vy := blobs(t, 60, 22)
	dsa := augment.Default()
	// Momentum, weight decay, a decay mid-way, augmentation, a validation every 2 epochs and
	// a last one: every piece of state the next epoch reads.
	r := EpochRecipe{Epochs: 7, Batch: 10, Schedule: StepLR{LR: 0.05, StepSize: 3, Gamma: 0.1}, Momentum: 0.9,
		WeightDecay: 5e-4, ValidateEvery: 2, Augment: &dsa}
	seeds := []uint64{31, 32, 33}
	for _, perModel := range []bool{false, true} {
		et := epochTrainer(t, x, labels, r)
		et.PerModel = perModel
		whole, err := et.Train(context.Background(), seeds, vx, vy)
		if err != nil {
			t.Fatal(err)
		}
		defer whole.Models.Close()

		path := filepath.Join(t.TempDir(), "training.npz")
		et.Checkpoint = &EpochCheckpoint{Path: path, Tag: "resume test"}
		// Stopped between validations (a validation stopped midway is not saved): before
		// the first, after one and after two.
		for _, stopAfter := range []int{1, 3, 5} {
			ctx, cancel := context.WithCancel(context.Background())
			et.Progress = func(done, total int) {
				if done == stopAfter {
					cancel() // the epoch still ends (and saves); the next one's first batch stops
				}
			}
			if _, err := et.Train(ctx, seeds, vx, vy); !errors.Is(err, context.Canceled) {
				t.Fatalf("per model %v, stopped after %d: %v, want the cancellation", perModel, stopAfter, err)
			}
			cancel()
			et.Progress = nil
			res, err := et.Train(context.Background(), seeds, vx, vy)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Models.Close()
			if res.ResumedAt != stopAfter {
				t.Errorf("per model %v: resumed at epoch %d, want %d", perModel, res.ResumedAt, stopAfter)
			}
			sameResult(t, whole, res, seeds)
			if err := RemoveEpochCheckpoint(path); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := os.Stat(path); err == nil {
			t.Errorf("the checkpoint is still there")
		}
	}
}

// sameResult: every model's parameters, validation, epoch, curve and divergence agree.
func sameResult(t *testing.T, a, b *EpochResult, seeds []uint64) {
	t.Helper()
	for i := range seeds {
		if !slices.Equal(params(t, a.Models, i), params(t, b.Models, i)) {
			t.Errorf("model %d: other parameters", i)
		}
	}
	if !slices.Equal(a.Epoch, b.Epoch) || !slices.Equal(a.Diverged, b.Diverged) || !slices.EqualFunc(a.Validation, b.Validation, sameFloat) {
		t.Errorf("epochs %v / %v, validation %v / %v, diverged %v / %v", a.Epoch, b.Epoch, a.Validation, b.Validation, a.Diverged, b.Diverged)
	}
	if len(a.Curve) != len(b.Curve) {
		t.Fatalf("curves of %d and %d checks", len(a.Curve), len(b.Curve))
	}
	for k := range a.Curve {
		if !slices.EqualFunc(a.Curve[k], b.Curve[k], sameFloat) {
			t.Errorf("check %d: %v / %v", k, a.Curve[k], b.Curve[k])
		}
	}
}

func sameFloat(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }

// A checkpoint is resumed only by its own training: another tag, other seeds or another
// recipe start over (and the result is that of a fresh training), as does a damaged file.
func TestEpochTrainerIgnoresOtherCheckpoints(t *testing.T) {
	s := torch.NewScope()
	defer s.Close()
	x, labels, _ := blobs(t, 30, 23)
	vx, _, vy := blobs(t, 30, 24)
	r := EpochRecipe{Epochs: 4, Batch: 10, Schedule: StepLR{LR: 0.05}, Momentum: 0.9, WeightDecay: 5e-4, ValidateEvery: 3}
	seeds := []uint64{41, 42}
	et := epochTrainer(t, x, labels, r)
	fresh, err := et.Train(context.Background(), seeds, vx, vy)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Models.Close()
	path := filepath.Join(t.TempDir(), "training.npz")
	save := func(tag string, seeds []uint64, r EpochRecipe) {
		t.Helper()
		et := epochTrainer(t, x, labels, r)
		et.Checkpoint = &EpochCheckpoint{Path: path, Tag: tag}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		et.Progress = func(done, _ int) {
			if done == 2 {
				cancel()
			}
		}
		if _, err := et.Train(ctx, seeds, vx, vy); !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	}
	other := r
	other.Schedule.LR = 0.01
	for name, prepare := range map[string]func(){
		"another tag":    func() { save("b", seeds, r) },
		"other seeds":    func() { save("a", []uint64{41, 43}, r) },
		"another recipe": func() { save("a", seeds, other) },
		"damaged": func() {
			save("a", seeds, r)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 1
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
		},
		"not a checkpoint": func() {
			if err := os.WriteFile(path, []byte("hello"), 0o644); err != nil {
				t.Fatal(err)
			}
		},
	} {
		if err := RemoveEpochCheckpoint(path); err != nil {
			t.Fatal(err)
		}
		prepare()
		et.Checkpoint = &EpochCheckpoint{Path: path, Tag: "a"}
		res, err := et.Train(context.Background(), seeds, vx, vy)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.ResumedAt != 0 {
			t.Errorf("%s: resumed at epoch %d", name, res.ResumedAt)
		}
		sameResult(t, fresh, res, seeds)
		res.Models.Close()
	}
	// And the training's own checkpoint is resumed.
	if err := RemoveEpochCheckpoint(path); err != nil {
		t.Fatal(err)
	}
	save("a", seeds, r)
	res, err := et.Train(context.Background(), seeds, vx, vy)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Models.Close()
	if res.ResumedAt != 2 {
		t.Errorf("its own checkpoint: resumed at %d, want 2", res.ResumedAt)
	}
	sameResult(t, fresh, res, seeds)
}
