package artifact

// ddranking_resume_test.go: an evaluation stopped in the full-data training, in a training
// of the distilled images and in one of the random images, each time run again, ends with
// the numbers of one that ran through; its progress folder is gone once ddranking.json is
// written; an evaluation with other settings does not use it, the same one running twice
// at once is refused (and reported as running, not interrupted), and a damaged record is
// said and done again.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/torch/fileio/atomicfile"
)

func TestDDRankingResumes(t *testing.T) {
	art, d := tinyMNISTArtifact(t)
	evalDir := filepath.Join(art.Dir, EvaluationsFolder)
	partials := func() []string {
		m, _ := filepath.Glob(filepath.Join(evalDir, ddrPartialPrefix+"*"))
		return m
	}
	for _, cached := range []bool{false, true} {
		cache := ""
		if cached {
			cache = filepath.Join(t.TempDir(), "cache")
		}
		// 3 epochs: one validation, at the end; a checkpoint after every epoch.
		dc := DDRankingConfig{Arch: config.ArchLeNet, Epochs: 3, Models: 2, CheckpointEvery: time.Nanosecond}
		whole, err := EvaluateDDRanking(context.Background(), art, d, dc)
		if err != nil {
			t.Fatal(err)
		}
		if whole.Resumed || len(partials()) != 0 {
			t.Errorf("an evaluation that ran through: resumed %v, progress folders %v", whole.Resumed, partials())
		}

		dc.CacheDir = cache
		var notes []string
		dc.Notes = func(s string) { notes = append(notes, s) }
		// Stopped at the second epoch of three trainings, one after the other.
		for _, stopIn := range []string{"full data", "hard labels, lr 0.01", "random images, lr 0.1"} {
			ctx, cancel := context.WithCancel(context.Background())
			dc.Progress = func(stage string, done, total int) {
				if stage == stopIn && done == 1 {
					cancel()
				}
			}
			if _, err := EvaluateDDRanking(ctx, art, d, dc); !errors.Is(err, context.Canceled) {
				t.Fatalf("cached %v, stopped in %s: %v", cached, stopIn, err)
			}
			cancel()
			if len(partials()) != 1 {
				t.Fatalf("cached %v, stopped in %s: progress folders %v", cached, stopIn, partials())
			}
			// The wall time so far is kept with every save, the first training's too.
			var st ddrState
			if b, err := os.ReadFile(filepath.Join(partials()[0], "state.json")); err != nil || json.Unmarshal(b, &st) != nil || st.Seconds <= 0 {
				t.Errorf("cached %v, stopped in %s: state.json %+v (%v)", cached, stopIn, st, err)
			}
		}
		dc.Progress = nil
		lastPart := time.Now()
		res, err := EvaluateDDRanking(context.Background(), art, d, dc)
		if err != nil {
			t.Fatal(err)
		}
		// The wall time sums the parts (up to each stopped part's last save).
		if last := time.Since(lastPart).Seconds(); res.WallSeconds <= last {
			t.Errorf("cached %v: wall %.2f s, no more than the last part's %.2f s", cached, res.WallSeconds, last)
		}
		if !reflect.DeepEqual(res.Runs, whole.Runs) || !reflect.DeepEqual(res.HardLabel, whole.HardLabel) ||
			!reflect.DeepEqual(res.SoftLabel, whole.SoftLabel) || !reflect.DeepEqual(res.RandomSoftLabel, whole.RandomSoftLabel) ||
			res.FullData.Accuracy != whole.FullData.Accuracy || res.FullData.Epoch != whole.FullData.Epoch {
			t.Errorf("cached %v: the resumed evaluation differs from the whole one:\n%+v\n%+v", cached, res.Runs, whole.Runs)
		}
		if !res.Resumed || res.FullData.Cached != cached {
			t.Errorf("cached %v: resumed %v, full data %+v", cached, res.Resumed, res.FullData)
		}
		text := strings.Join(notes, "\n")
		for _, want := range []string{"resuming the full-data model", "from epoch 1 of 3", "resuming hard labels, lr 0.01, models 1 to 2", "trainings finished earlier"} {
			if !strings.Contains(text, want) {
				t.Errorf("cached %v: no note %q in:\n%s", cached, want, text)
			}
		}
		if len(partials()) != 0 {
			t.Errorf("cached %v: progress folders left: %v", cached, partials())
		}
		if cached {
			if left, _ := filepath.Glob(filepath.Join(cache, "*.training.npz")); len(left) != 0 {
				t.Errorf("the full-data training's checkpoint is left in the cache: %v", left)
			}
		}
	}

	// Other settings: the interrupted evaluation's progress is neither used nor touched.
	dc := DDRankingConfig{Arch: config.ArchLeNet, Epochs: 3, Models: 2, CheckpointEvery: time.Nanosecond}
	ctx, cancel := context.WithCancel(context.Background())
	dc.Progress = func(stage string, done, total int) {
		if strings.HasPrefix(stage, "distilled labels") && done == 2 {
			cancel()
		}
	}
	if _, err := EvaluateDDRanking(ctx, art, d, dc); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	cancel()
	before := partials()
	// Reports say what is kept: the five hard-label trainings of fifteen.
	if notes := DDRankingInProgress(art.Dir); len(notes) != 1 || !strings.Contains(notes[0], "(lenet, 3 epochs, 2 runs, seed 1234, augmentation dsa): 5 of 15 trainings finished") {
		t.Errorf("DDRankingInProgress: %q", notes)
	}
	dc.Progress, dc.Augment = nil, AugmentNone
	other, err := EvaluateDDRanking(context.Background(), art, d, dc)
	if err != nil {
		t.Fatal(err)
	}
	if other.Resumed || !reflect.DeepEqual(partials(), before) || len(before) != 1 {
		t.Errorf("another recipe: resumed %v; progress folders %v, before %v", other.Resumed, partials(), before)
	}
	if _, err := os.Stat(filepath.Join(before[0], "state.json")); err != nil {
		t.Errorf("the interrupted evaluation's progress: %v", err)
	}
	// The same evaluation running elsewhere (its folder locked) is refused, naming it; a
	// state.json that does not read back is said and its trainings done again.
	unlock, err := atomicfile.LockDir(before[0])
	if err != nil {
		t.Fatal(err)
	}
	dc.Augment = AugmentDSA
	if _, err := EvaluateDDRanking(context.Background(), art, d, dc); err == nil || !strings.Contains(err.Error(), "the same evaluation") ||
		!strings.Contains(err.Error(), "is in use by another run") {
		t.Errorf("the same evaluation twice at once: %v", err)
	}
	// Reports call it running, not interrupted, while its lock is held (where the kernel's
	// lock table shows it).
	if _, seen := atomicfile.HeldBy(before[0]); seen {
		want := fmt.Sprintf("a DD-Ranking evaluation running in ldtorch process %d (lenet,", os.Getpid())
		if notes := DDRankingInProgress(art.Dir); len(notes) != 1 || !strings.Contains(notes[0], want) || strings.Contains(notes[0], "goes on from it") {
			t.Errorf("DDRankingInProgress while running: %q, want %q", notes, want)
		}
	}
	unlock()
	if err := os.WriteFile(filepath.Join(before[0], "state.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	var notes []string
	dc.Notes = func(s string) { notes = append(notes, s) }
	if _, err := EvaluateDDRanking(context.Background(), art, d, dc); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.Join(notes, "\n"), "state.json is unreadable: its trainings are done again") {
		t.Errorf("a damaged state.json: notes %q", notes)
	}
	before = partials()

	// Without checkpoints nothing is kept.
	dc.Augment, dc.CheckpointEvery = AugmentDSA, -1
	if _, err := EvaluateDDRanking(context.Background(), art, d, dc); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(partials(), before) {
		t.Errorf("an evaluation without checkpoints: progress folders %v, before %v", partials(), before)
	}
}
