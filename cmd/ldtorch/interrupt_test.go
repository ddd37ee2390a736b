package main

import (
	"os"
	"syscall"
	"testing"
	"time"
)

func TestInterruptionTellsASecondFromTheFirstAgain(t *testing.T) {
	var in interruption
	steps := []struct {
		s    os.Signal
		ago  time.Duration // how long before now the first came, set before this step
		want bool
	}{
		{syscall.SIGTERM, 0, false},                    // the first
		{syscall.SIGTERM, 0, false},                    // the first again at once (timeout(1))
		{syscall.SIGINT, 0, true},                      // another signal
		{syscall.SIGTERM, sameInterruption + 1, true},  // the first again, later
		{syscall.SIGTERM, sameInterruption / 2, false}, // ... and within the window
	}
	for i, st := range steps {
		if i > 0 {
			in.at = time.Now().Add(-st.ago)
		}
		if got := in.second(st.s); got != st.want {
			t.Errorf("step %d (%v, first %v ago): second = %v, want %v", i, st.s, st.ago, got, st.want)
		}
	}
	var late interruption
	late.first = earlierSignal{}
	if !late.second(syscall.SIGTERM) {
		t.Error("after a first interrupt before the watch, SIGTERM is not a second one")
	}
}
