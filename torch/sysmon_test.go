package torch

import (
	"testing"
	"time"
)

// TestShimCallsYieldEveryFewMilliseconds: a goroutine that does nothing but short shim calls
// yields about every yieldEvery (callDone), never more often, and not at all for yieldPause
// after a gap longer than longCall.
func TestShimCallsYieldEveryFewMilliseconds(t *testing.T) {
	x, err := Ones([]int64{4})
	ok(t, err)
	defer x.Free()
	call := func() {
		y, err := x.Add(x)
		ok(t, err)
		y.Free()
	}
	// callsFor makes shim calls for d and returns how many times they yielded.
	callsFor := func(d time.Duration) (yielded int64, calls int) {
		before, start := yields.Load(), time.Now()
		for time.Since(start) < d {
			call()
			calls++
		}
		return yields.Load() - before, calls
	}
	const span = 10 * yieldEvery
	const tries = 50
	// A loaded machine may deschedule this test for longer than longCall, which pauses the
	// yields as a long call does, and on a machine that does so every second they never
	// resume: start each try unpaused, as after a second of short calls, and measure a span
	// that no such gap interrupted.
	measured := false
	for try := 0; try < tries && !measured; try++ {
		lastCall.Store(int64(time.Since(clockStart)))
		pauseUntil.Store(0)
		n, calls := callsFor(span)
		if pauseUntil.Load() != 0 {
			t.Logf("try %d: a gap over %v paused the yields; again", try, longCall)
			continue
		}
		measured = true
		// at most one yield per yieldEvery (and one at the start); at least a few, however
		// the machine schedules this test
		if n > int64(span/yieldEvery)+1 || n < 3 {
			t.Errorf("%d yields in %v of shim calls (%d calls), want about %d", n, span, calls, span/yieldEvery)
		}
		t.Logf("%d yields in %v, %d shim calls", n, span, calls)
	}
	if !measured {
		t.Fatalf("no %v of shim calls without a gap over %v in %d tries", span, longCall, tries)
	}

	time.Sleep(2 * longCall) // as if the last call had taken that long
	if n, calls := callsFor(span); n != 0 {
		t.Errorf("%d yields in %v of shim calls (%d calls) right after a long one, want none", n, span, calls)
	}
}
