package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestMallocReexec checks that the binary restarts itself with glibc's allocator settings,
// leaves a variable the user set alone, keeps the defaults with LDTORCH_MALLOC=off and
// refuses a bad value.
func TestMallocReexec(t *testing.T) {
	t.Parallel() // the built binary in child processes only
	malloc := func(env ...string) string {
		t.Helper()
		r := runBinary(t, 0, env, "version", "--json")
		var v versionInfo
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || r.code != 0 {
			t.Fatalf("version --json with %v: exit %d, %v: %q %q", env, r.code, err, r.stdout, r.stderr)
		}
		return v.Malloc
	}
	if got := malloc(); !strings.HasPrefix(got, "tuned by ldtorch") || !strings.Contains(got, "MALLOC_ARENA_MAX=") {
		t.Errorf("default: malloc %q, want the tuned settings", got)
	}
	if got := malloc("MALLOC_TOP_PAD_=12345"); !strings.Contains(got, "MALLOC_TOP_PAD_=12345") {
		t.Errorf("user's MALLOC_TOP_PAD_ overridden: %q", got)
	}
	if got := malloc("LDTORCH_MALLOC=off"); !strings.HasPrefix(got, "glibc defaults") {
		t.Errorf("LDTORCH_MALLOC=off: malloc %q", got)
	}
	r := runBinary(t, 0, []string{"LDTORCH_MALLOC=fast"}, "version")
	if r.code != exitUsage || !strings.Contains(r.stderr, "LDTORCH_MALLOC") {
		t.Errorf("LDTORCH_MALLOC=fast: exit %d, stderr %q; want 2 naming the variable", r.code, r.stderr)
	}
}

// A bad LDTORCH_CUDA_GRAPHS is a usage error naming the variable, before any work.
func TestCUDAGraphsVariableChecked(t *testing.T) {
	t.Parallel() // the built binary in child processes only
	r := runBinary(t, 0, []string{"LDTORCH_CUDA_GRAPHS=fast"}, "version")
	if r.code != exitUsage || !strings.Contains(r.stderr, `LDTORCH_CUDA_GRAPHS="fast": want on, off or all`) {
		t.Errorf("LDTORCH_CUDA_GRAPHS=fast: exit %d, stderr %q; want 2 naming the variable", r.code, r.stderr)
	}
	if r := runBinary(t, 0, []string{"LDTORCH_CUDA_GRAPHS=off"}, "version"); r.code != 0 {
		t.Errorf("LDTORCH_CUDA_GRAPHS=off: exit %d, stderr %q", r.code, r.stderr)
	}
}
