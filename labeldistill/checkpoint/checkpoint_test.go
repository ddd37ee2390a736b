package checkpoint

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestCheckpointNameParsing: only ckpt-<digits>.npz files are checkpoints.
func TestCheckpointNameParsing(t *testing.T) {
	for name, want := range map[string]int{"ckpt-000000012.npz": 12, "ckpt-7.npz": 7, Name(123456): 123456} {
		if got, ok := stepOf(name); !ok || got != want {
			t.Fatalf("%s: %d %v", name, got, ok)
		}
	}
	for _, name := range []string{"ckpt-.npz", "ckpt--1.npz", "ckpt-1a.npz", "ckpt-1.npz.tmp-3", ".ckpt-000000001.npz.tmp-123", "ckpt-+1.npz", "distilled.npz"} {
		if _, ok := stepOf(name); ok {
			t.Fatalf("%s parsed as a checkpoint", name)
		}
	}
	// Pruning keeps the newest and removes leftovers of interrupted writes.
	dir := t.TempDir()
	for _, n := range []string{Name(1), Name(20), Name(3), Name(100), ".ckpt-000000101.npz.tmp-42", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := Prune(dir, 2); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{Name(20), Name(100), "notes.txt"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("after pruning: %v, want %v", names, want)
	}
}
