package labeldistill

// load.go: LoadDataset, the bridge from a Config to the data package's readers, splits and
// base-example selection.

import "fmt"

// LoadDataset reads cfg's target (and source) dataset from cfg.DataDir, verifies it, splits
// it and selects the base examples.
func LoadDataset(cfg Config) (*Dataset, error) {
	return nil, fmt.Errorf("LoadDataset: not wired yet")
}
