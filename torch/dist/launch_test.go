package dist

import (
	"os/exec"
	"testing"
	"time"
)

// The rank Launch names when two fail together: a survivor that exited with an error
// just before a killed rank was reaped gives way to the killed one (the cause), but only
// within causeWindow; otherwise the first failure stands.
func TestFirstFailureNamesTheKilledRank(t *testing.T) {
	exitErr := func(script string) error {
		err := exec.Command("/bin/sh", "-c", script).Run()
		if err == nil {
			t.Fatalf("sh -c %q succeeded", script)
		}
		return err
	}
	status, killed := exitErr("exit 4"), exitErr("kill -9 $$")
	if killedBySignal(status) || !killedBySignal(killed) {
		t.Fatalf("killedBySignal: exit 4 %v, kill -9 %v", killedBySignal(status), killedBySignal(killed))
	}
	t0 := time.Now()
	for _, c := range []struct {
		name     string
		errs     [2]error
		after    time.Duration
		wantRank int
	}{
		{"a survivor's error, then the killed rank", [2]error{status, killed}, 10 * time.Millisecond, 1},
		{"the same, past the window", [2]error{status, killed}, causeWindow + time.Millisecond, 0},
		{"the killed rank first", [2]error{killed, status}, 10 * time.Millisecond, 0},
		{"two errors", [2]error{status, status}, 10 * time.Millisecond, 0},
		{"two killed", [2]error{killed, killed}, 10 * time.Millisecond, 0},
	} {
		var f firstFailure
		if !f.add(0, c.errs[0], t0) {
			t.Errorf("%s: the first failure is not first", c.name)
		}
		if f.add(1, c.errs[1], t0.Add(c.after)) {
			t.Errorf("%s: the second failure is first", c.name)
		}
		if f.exit.Rank != c.wantRank {
			t.Errorf("%s: names rank %d (%v), want rank %d", c.name, f.exit.Rank, f.exit, c.wantRank)
		}
	}
}
