package torch

// bench_test.go: binding overhead and end-to-end step times (not asserted; see
// docs/BENCHMARKS.md, "Binding (issue 2)", and scripts/bench/torch_ops.py for the same
// work in PyTorch). Run with one libtorch thread:
//
//	OMP_NUM_THREADS=1 go test ./torch -run '^$' -bench . -count 5
//
// The two model benchmarks also report the median time of one iteration (ms-median/op).

import (
	"runtime"
	"slices"
	"testing"
	"time"
)

// benchSetup pins the goroutine (libtorch's grad mode and OpenMP team are per thread).
func benchSetup(b *testing.B) {
	b.Helper()
	runtime.LockOSThread()
	b.Cleanup(runtime.UnlockOSThread)
}

// BenchmarkCallIsGradEnabled: a bare cgo call into the shim (no handle, no error).
func BenchmarkCallIsGradEnabled(b *testing.B) {
	benchSetup(b)
	n := 0
	for b.Loop() {
		if IsGradEnabled() {
			n++
		}
	}
	_ = n
}

// BenchmarkCallDim: the trivial checked call, t.Dim() (freed check + one cgo call).
func BenchmarkCallDim(b *testing.B) {
	benchSetup(b)
	x := Must(Ones([]int64{1}))
	defer x.Free()
	n := 0
	for b.Loop() {
		n += x.Dim()
	}
	_ = n
}

// BenchmarkCallNilFailFast: an op on a nil tensor fails in Go without calling C.
func BenchmarkCallNilFailFast(b *testing.B) {
	benchSetup(b)
	var nilT *Tensor
	y := Must(Ones([]int64{1}))
	defer y.Free()
	for b.Loop() {
		if _, err := nilT.Add(y); err == nil {
			b.Fatal("no error")
		}
	}
}

// BenchmarkAdd1Free: a 1-element add whose result is freed explicitly.
func BenchmarkAdd1Free(b *testing.B) {
	benchSetup(b)
	x, y := Must(Ones([]int64{1})), Must(Ones([]int64{1}))
	defer x.Free()
	defer y.Free()
	for b.Loop() {
		z, err := x.Add(y)
		if err != nil {
			b.Fatal(err)
		}
		z.Free()
	}
}

// BenchmarkAdd1Scope: a 1-element add owned by a Scope, closed every 100 ops.
func BenchmarkAdd1Scope(b *testing.B) {
	benchSetup(b)
	x, y := Must(Ones([]int64{1})), Must(Ones([]int64{1}))
	defer x.Free()
	defer y.Free()
	s := NewScope()
	i := 0
	for b.Loop() {
		if _, err := x.Add(y); err != nil {
			b.Fatal(err)
		}
		if i++; i%100 == 0 {
			s.Close()
			s = NewScope()
		}
	}
	s.Close()
}

// BenchmarkAdd1GC: a 1-element add left to the garbage collector's cleanup (the
// discouraged mode, for comparison).
func BenchmarkAdd1GC(b *testing.B) {
	benchSetup(b)
	x, y := Must(Ones([]int64{1})), Must(Ones([]int64{1}))
	defer x.Free()
	defer y.Free()
	for b.Loop() {
		if _, err := x.Add(y); err != nil {
			b.Fatal(err)
		}
	}
	runtime.GC()
}

// timed runs step b.N times (after warm-up iterations) and reports the median.
func timed(b *testing.B, warm int, step func() error) {
	b.Helper()
	for i := 0; i < warm; i++ {
		if err := step(); err != nil {
			b.Fatal(err)
		}
	}
	var ds []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if err := step(); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "ms-median/op")
}

// BenchmarkLeNetFwdBwd1024: LeNet forward, cross-entropy and backward into the parameters'
// .grad, batch 1024 of 28×28 float32 images.
func BenchmarkLeNetFwdBwd1024(b *testing.B) {
	benchSetup(b)
	p := lenetParams(b, 1, Float)
	defer FreeAll(p)
	_, _, x, y := metaData(b, 2, 1, 1024)
	defer x.Free()
	defer y.Free()
	timed(b, 2, func() error {
		return WithScope(func(*Scope) error {
			for _, q := range p {
				if err := q.ClearGrad(); err != nil {
					return err
				}
			}
			var c Chain
			loss := c.T(CrossEntropy(c.T(lenet(p, x)), y))
			if c.Err() != nil {
				return c.Err()
			}
			return loss.Backward()
		})
	})
}

// BenchmarkMetaStep: one second-order LD iteration: LeNet, 50 base images with soft
// labels, inner SGD step with CreateGraph, outer CE on 1024 target images, gradient to
// the labels only, one Adam step on the labels.
func BenchmarkMetaStep(b *testing.B) {
	benchSetup(b)
	p := lenetParams(b, 1, Float)
	defer FreeAll(p)
	xb, labels, xt, yt := metaData(b, 2, 50, 1024)
	defer FreeAll([]*Tensor{xb, labels, xt, yt})
	opt, err := NewAdam([]*Tensor{labels}, AdamOpts{LR: 1e-3})
	if err != nil {
		b.Fatal(err)
	}
	defer opt.Close()
	timed(b, 2, func() error {
		return WithScope(func(*Scope) error {
			_, err := metaStep(p, xb, labels, xt, yt, 0.01, opt)
			return err
		})
	})
}
