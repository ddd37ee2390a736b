package sweep

import (
	"strings"
	"testing"
)

// TestDDCellRefusesIgnoredSettings: a grid giving a method dd cell a setting dd ignores
// (label_lr, from the grid's config, a row or a column; inner_batch without baselines) is
// refused naming the cell, the key and where it was set, as distill --config refuses it;
// the cell used to run and record it.
func TestDDCellRefusesIgnoredSettings(t *testing.T) {
	for _, tc := range []struct {
		grid, want string
	}{
		{`{"config": {"dataset": "mnist", "baselines": ["none"]}, "rows": [{"label": "DD", "set": {"method": "dd", "label_lr": 0.1}}], "columns": {"key": "base_examples", "values": [100]}}`,
			`cell "DD"/"100": label_lr (set by row "DD") does not apply to method dd`},
		{`{"config": {"dataset": "mnist", "baselines": ["none"], "reset_window": 20}, "rows": [{"label": "DD", "set": {"method": "dd"}}], "columns": {"key": "base_examples", "values": [100]}}`,
			`reset_window (set by the grid's config) does not apply to method dd`},
		{`{"config": {"dataset": "mnist", "baselines": ["none"]}, "rows": [{"label": "DD", "set": {"method": "dd"}}], "columns": [{"label": "b", "set": {"base_examples": 100, "inner_batch": 5}}]}`,
			`inner_batch (set by column "b") does not apply to method dd without baselines`},
	} {
		g, err := ParseGrid([]byte(tc.grid)) // which expands the cells to check them
		if err == nil {
			_, err = g.Cells(t.TempDir(), nil)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.grid, err, tc.want)
		}
	}
	// The same cells without them, and an LD row beside with its label_lr, are fine.
	g, err := ParseGrid([]byte(`{"config": {"dataset": "mnist", "baselines": ["none"]}, "rows": [{"label": "DD", "set": {"method": "dd", "dd_lr": 0.02}}, {"label": "LD", "set": {"method": "ld", "label_lr": 0.1}}], "columns": {"key": "base_examples", "values": [100]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Cells(t.TempDir(), nil); err != nil {
		t.Errorf("dd cell of its own settings: %v", err)
	}
}
