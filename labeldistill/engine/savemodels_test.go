package engine

// savemodels_test.go: WithSaveModels keeps the final test's models without changing the run.

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/internal/testkit"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/torch"
)

func TestWithSaveModels(t *testing.T) {
	testkit.RestoreThreads(t)
	ds := testkit.SmallDataset(t)
	cfg := testkit.SmallConfig(config.MethodRR)
	cfg.Epochs, cfg.CheckpointEvery = 1, -1
	plain, err := testDistill(context.Background(), cfg, WithData(ds))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "models")
	saved, err := testDistill(context.Background(), cfg, WithData(ds), WithSaveModels(dir))
	if err != nil {
		t.Fatal(err)
	}
	if !testkit.SameBits(plain.Labels, saved.Labels) || !slices.Equal(plain.TestAccuracies, saved.TestAccuracies) {
		t.Fatalf("saving the models changed the run: test accuracies %v, then %v", plain.TestAccuracies, saved.TestAccuracies)
	}
	var m train.SavedModels
	js, err := os.ReadFile(filepath.Join(dir, train.ManifestFile))
	if err != nil || json.Unmarshal(js, &m) != nil {
		t.Fatalf("models.json: %v\n%s", err, js)
	}
	if m.Arch != "lenet" || !m.RR || m.Steps != saved.T || len(m.Models) != cfg.EvalModels {
		t.Fatalf("models.json: %s", js)
	}
	for k, sm := range m.Models {
		if sm.TestAccuracy == nil || *sm.TestAccuracy != saved.TestAccuracies[k] {
			t.Fatalf("model %d: models.json says %v, the run %v", k, sm.TestAccuracy, saved.TestAccuracies)
		}
		if err := torch.WithScope(func(*torch.Scope) error {
			names, _, err := torch.LoadPickle(filepath.Join(dir, sm.File))
			if err == nil && (len(names) != 10 || names[9] != train.RRWeightName) {
				t.Errorf("%s holds %v", sm.File, names)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	// A folder of saved models is refused before any work.
	started := false
	if _, err := testDistill(context.Background(), cfg, WithData(ds), WithSaveModels(dir), WithProgress(func(p Progress) {
		started = started || p.Phase == "distill"
	})); err == nil || !strings.Contains(err.Error(), "already holds saved models") || started {
		t.Fatalf("a folder of saved models accepted: %v (run started: %v)", err, started)
	}
}
