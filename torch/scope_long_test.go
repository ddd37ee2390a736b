//go:build long

package torch

// scope_long_test.go: the long tests of scope_test.go (multi-process, signals, soaks),
// run by scripts/test-long.sh.

import (
	"runtime"
	"testing"
	"time"
)

// TestMemoryMetaStepsFlat runs 400 second-order LeNet meta-steps (10 base images with
// soft labels, 64 target images, inner SGD step with CreateGraph, gradient to the labels,
// Adam on the labels), each inside its own Scope, and asserts that RSS grows by less than
// 10 MB between iteration 100 and the end, so a leak of 34 KB per meta-step fails it (one
// leaked activation of the first convolution is 1.2 MB).
func TestMemoryMetaStepsFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("400 meta-steps: skipped in -short mode")
	}
	noOpenScope(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p := lenetParams(t, 1, Float)
	defer FreeAll(p)
	xb, labels, xt, yt := metaData(t, 2, 10, 64)
	defer FreeAll([]*Tensor{xb, labels, xt, yt})
	opt, err := NewAdam([]*Tensor{labels}, AdamOpts{LR: 1e-3})
	ok(t, err)
	defer opt.Close()

	const iters, warm, limitMB = 400, 100, 10
	var rssWarm, rssPeak int64
	var first, last float64
	start := time.Now()
	var warmAt time.Time
	for i := 0; i < iters; i++ {
		s := NewScope()
		loss, err := metaStep(p, xb, labels, xt, yt, 0.01, opt)
		s.Close()
		if err != nil {
			t.Fatalf("iteration %d: %v", i, err)
		}
		if i == 0 {
			first = loss
		}
		last = loss
		if i+1 == warm {
			runtime.GC()
			rssWarm = rssBytes(t)
			warmAt = time.Now()
		}
		if i+1 > warm && (i+1)%100 == 0 {
			rssPeak = max(rssPeak, rssBytes(t))
		}
	}
	runtime.GC()
	rssEnd := rssBytes(t)
	elapsed := time.Since(warmAt)
	const MB = 1 << 20
	t.Logf("RSS after %d warm-up iterations %.1f MB, at the end (%d) %.1f MB (peak sampled %.1f MB): growth %+.2f MB",
		warm, float64(rssWarm)/MB, iters, float64(rssEnd)/MB, float64(rssPeak)/MB, float64(rssEnd-rssWarm)/MB)
	t.Logf("%.2f ms per meta-step; outer loss %.4f → %.4f; total %v",
		float64(elapsed.Milliseconds())/float64(iters-warm), first, last, time.Since(start).Round(time.Millisecond))
	if growth := max(rssEnd, rssPeak) - rssWarm; growth > limitMB*MB {
		t.Errorf("RSS grew by %.1f MB over %d meta-steps (limit %d MB)", float64(growth)/MB, iters-warm, limitMB)
	}
	if opt.StepCount != iters {
		t.Errorf("Adam took %d steps, want %d", opt.StepCount, iters)
	}
	noOpenScope(t)
}
