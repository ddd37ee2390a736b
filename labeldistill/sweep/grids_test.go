package sweep

// grids_test.go: the grids shipped in scripts/paper read and resolve; the IPC grids'
// columns are 1, 10 and 50 images per class of a 10-class target.

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestPaperGridsResolve(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("..", "..", "scripts", "paper", "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no grids in scripts/paper: %v", err)
	}
	ipc := 0
	for _, path := range paths {
		g, err := ReadGrid(path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if !strings.HasPrefix(filepath.Base(path), "ipc-") {
			continue
		}
		ipc++
		cells, err := g.Cells(t.TempDir(), nil)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		archs := map[string]bool{}
		for _, c := range cells {
			want := map[string]int{"IPC 1": 10, "IPC 10": 100, "IPC 50": 500}[c.Column]
			if c.Config.BaseExamples != want || c.Config.NumClasses() != 10 || c.Config.BaseSelection != "balanced" {
				t.Errorf("%s: cell %s/%s has %d base examples (%s, %d classes), want %d balanced", path, c.Row, c.Column,
					c.Config.BaseExamples, c.Config.BaseSelection, c.Config.NumClasses(), want)
			}
			archs[c.Config.Arch] = true
		}
		if !archs["convnet"] || len(archs) != 2 {
			t.Errorf("%s: architectures %v, want ConvNet-3 and the paper's network", path, archs)
		}
	}
	if ipc != 3 {
		t.Errorf("%d IPC grids, want 3 (mnist, fashion-mnist, cifar10)", ipc)
	}
}
