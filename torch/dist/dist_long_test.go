//go:build long

package dist

// dist_long_test.go: the long tests of dist_test.go (multi-process, signals, soaks),
// run by scripts/test-long.sh.

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A rank that waits long polls for LDTORCH_DIST_SPIN, then sleeps: its CPU time while its
// peer arrives 1.5 s late is at most the spin time, not the wait. (How much of the spin
// time it spends depends on what else runs: a polling rank yields its core to any other
// work between polls; on a loaded 2-vCPU machine it used 42 ms of the 300.)
func TestSpinWaitBounded(t *testing.T) {
	for _, c := range []struct {
		spin string
		max  time.Duration
	}{
		{"0", 100 * time.Millisecond},
		{"300ms", 900 * time.Millisecond},
	} {
		err, out, _ := launch(t, "late-peer", 2, 30*time.Second, "LDTORCH_DIST_SPIN="+c.spin)
		if err != nil {
			t.Fatalf("LDTORCH_DIST_SPIN=%s: %v\n%s", c.spin, err, out)
		}
		var ns int64
		if _, err := fmt.Sscanf(strings.TrimSpace(out), "cpu %d ns", &ns); err != nil {
			t.Fatalf("cannot read %q: %v", out, err)
		}
		cpu := time.Duration(ns)
		t.Logf("LDTORCH_DIST_SPIN=%s: %v of CPU waiting 1.5 s for the peer", c.spin, cpu.Round(time.Millisecond))
		if cpu > c.max {
			t.Errorf("LDTORCH_DIST_SPIN=%s: %v of CPU while waiting; want at most %v", c.spin, cpu, c.max)
		}
	}
}

// A hung rank: the survivor times out (3 s), names rank 1, and Launch kills the hung one.
func TestHungRankFailsOthers(t *testing.T) {
	err, out, took := launch(t, "hung", 2, 3*time.Second)
	checkFailure(t, err, out, took, 3*time.Second+FailureGrace+40*time.Second, "")
	if !strings.Contains(out, "stopped responding") {
		t.Errorf("the survivor's message does not say rank 1 stopped responding:\n%s", out)
	}
}
