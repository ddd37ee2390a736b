//go:build long

package torch

// pickle_long_test.go: the long tests of pickle_test.go (multi-process, signals, soaks),
// run by scripts/test-long.sh.

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Every single-bit flip of a saved file either fails to load, with an error and never a
// crash, or loads the same names, dtypes, shapes and values (a flip in a timestamp or in the
// padding of a zip header).
func TestPickleBitFlips(t *testing.T) {
	scoped(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "full.pt")
	cases := savePickleCases(t, path)
	data, err := os.ReadFile(path)
	ok(t, err)
	bad := filepath.Join(dir, "flipped.pt")
	failed, same := 0, 0
	for i := range data {
		for bit := 0; bit < 8; bit++ {
			d := slices.Clone(data)
			d[i] ^= 1 << bit
			ok(t, os.WriteFile(bad, d, 0o644))
			s := NewScope()
			names, ts, err := LoadPickle(bad)
			if err != nil {
				failed++
				s.Close()
				continue
			}
			if len(names) != len(cases) {
				t.Fatalf("byte %d bit %d: loaded %v", i, bit, names)
			}
			for k, c := range cases {
				if names[k] != c.name {
					t.Fatalf("byte %d bit %d: name %q, want %q", i, bit, names[k], c.name)
				}
				checkCase(t, c, ts[k])
			}
			same++
			s.Close()
		}
	}
	t.Logf("%d flips: %d refused, %d loaded unchanged", 8*len(data), failed, same)
}
