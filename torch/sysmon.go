package torch

// sysmon.go: the goroutine that runs libtorch work is locked to its thread (Guard) and spends
// most of its time in cgo calls; it never blocks, so Go's system monitor (sysmon) sees it
// unscheduled for 10 ms, preempts it, and then wakes every 20 µs for a millisecond or more
// before it backs off again: about 3,000 wake-ups and 6 % of a core a second in an MNIST
// LeNet LD RR run. Where every core computes (two ranks on two cores, two runs side by side)
// each wake-up takes a core from a computation for a moment, and ranks that wait for each
// other at every meta-step wait for the slowest of those moments (docs/benchmarks/sysmon.md#yielding-to-the-system-monitor).
// Yielding every few milliseconds from the calls into the shim keeps the
// goroutine's scheduling count moving, so sysmon sleeps.
//
// A yield is not free on a busy machine (the locked thread is handed off and back, two
// wake-ups), and a single call longer than sysmon's 10 ms (LD's backward through a LeNet
// batch, most ConvNet-3 steps) wakes sysmon whatever the yields do: after such a call the
// yields pause for a while.

import (
	"runtime"
	"sync/atomic"
	"time"
)

const (
	// yieldEvery is the longest a goroutine runs shim calls without yielding: well under
	// sysmon's 10 ms.
	yieldEvery = 4 * time.Millisecond
	// longCall is a gap between two shim calls after which sysmon has woken anyway (its
	// patience is 10 ms); yieldPause is how long the yields then stop.
	longCall   = 10 * time.Millisecond
	yieldPause = time.Second
)

var (
	clockStart = time.Now()
	lastCall   atomic.Int64 // nanoseconds since clockStart, as the other times here
	lastYield  atomic.Int64
	pauseUntil atomic.Int64
	yields     atomic.Int64 // how many times callDone yielded (tests)
)

// callDone is called after every call into the shim (cerr): it yields the processor when
// yieldEvery has passed since the last yield of any goroutine, unless a long call came
// within yieldPause.
func callDone() {
	now := int64(time.Since(clockStart))
	if prev := lastCall.Swap(now); now-prev > int64(longCall) {
		pauseUntil.Store(now + int64(yieldPause))
	}
	if now < pauseUntil.Load() {
		return
	}
	if last := lastYield.Load(); now-last >= int64(yieldEvery) && lastYield.CompareAndSwap(last, now) {
		yields.Add(1)
		runtime.Gosched()
	}
}
