package sweep

import (
	"os"
	"path/filepath"
	"testing"
)

// sharedDataDir is the test data beside the repository (../shared/datasets), or a skip.
func sharedDataDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join("..", "..", "..", "shared", "datasets")
	if _, err := os.Stat(filepath.Join(dir, "mnist")); err != nil {
		t.Skipf("shared datasets not found at %s", dir)
	}
	return dir
}
