package labeldistill

import (
	"context"
	"testing"
)

func TestSpeedSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip()
	}
	ds := testMNIST(t, 50000, 2000, 2000, 100)
	for _, m := range []string{"ld", "rr"} {
		cfg := DefaultConfig()
		cfg.Method, cfg.Epochs, cfg.EvalModels, cfg.Baselines = m, 1, 2, []string{}
		res, err := Distill(context.Background(), cfg, WithDataset(ds))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: steps %d, %.3f s/step, T %d, val %+v, test %.2f±%.2f wall %.1f", m, res.MetaSteps, res.SecondsPerStep, res.T, res.BestValidation, res.TestMean, res.TestStd, res.WallSeconds)
	}
}
