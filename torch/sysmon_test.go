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
	// callsFor makes shim calls for d and returns how many times they yielded.
	callsFor := func(d time.Duration) (yielded int64, calls int) {
		before, start := yields.Load(), time.Now()
		for time.Since(start) < d {
			y, err := x.Add(x)
			ok(t, err)
			y.Free()
			calls++
		}
		return yields.Load() - before, calls
	}
	callsFor(yieldPause + longCall) // past any pause left by earlier tests
	const span = 10 * yieldEvery
	n, calls := callsFor(span)
	// at most one yield per yieldEvery (and one at the start); at least a few, however the
	// machine schedules this test
	if n > int64(span/yieldEvery)+1 || n < 3 {
		t.Errorf("%d yields in %v of shim calls (%d calls), want about %d", n, span, calls, span/yieldEvery)
	}
	t.Logf("%d yields in %v, %d shim calls", n, span, calls)

	time.Sleep(2 * longCall) // as if the last call had taken that long
	if n, calls := callsFor(span); n != 0 {
		t.Errorf("%d yields in %v of shim calls (%d calls) right after a long one, want none", n, span, calls)
	}
}
