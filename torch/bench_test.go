package torch

// bench_test.go: binding overhead and end-to-end step times (not asserted; see
// docs/benchmarks/binding.md, and scripts/bench/torch_ops.py for the same
// work in PyTorch). Run with one libtorch thread:
//
//	OMP_NUM_THREADS=1 go test ./torch -run '^$' -bench . -count 5
//
// Besides ns/op (wall time), every benchmark reports the CPU time of its OS thread per
// operation (cpu-ns/op), which a busy shared machine disturbs much less than wall time:
// with one libtorch thread (and a single-threaded BLAS) all the work runs on the locked
// benchmark thread. The two model benchmarks report per-iteration medians instead
// (ms-median/op wall, cpu-ms-median/op).

import (
	"runtime"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// benchSetup pins the goroutine (libtorch's grad mode and OpenMP team are per thread).
func benchSetup(b *testing.B) {
	b.Helper()
	runtime.LockOSThread()
	b.Cleanup(runtime.UnlockOSThread)
}

// cpuLoop runs body in a b.Loop on a pinned thread and reports the thread's CPU time per
// iteration (cpu-ns/op) next to the wall time.
func cpuLoop(b *testing.B, body func()) {
	b.Helper()
	benchSetup(b)
	c0 := threadCPU()
	for b.Loop() {
		body()
	}
	b.ReportMetric(float64(threadCPU()-c0)/float64(b.N), "cpu-ns/op")
}

// threadCPU is the calling OS thread's CPU time (CLOCK_THREAD_CPUTIME_ID: exact, where
// getrusage(RUSAGE_THREAD) lags by up to a scheduler tick).
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// BenchmarkCallIsGradEnabled: a bare cgo call into the shim (no handle, no error).
func BenchmarkCallIsGradEnabled(b *testing.B) {
	n := 0
	cpuLoop(b, func() {
		if IsGradEnabled() {
			n++
		}
	})
}

// BenchmarkCallDim: the trivial checked call, t.Dim() (freed check + one cgo call).
func BenchmarkCallDim(b *testing.B) {
	x := Must(Ones([]int64{1}))
	defer x.Free()
	n := 0
	cpuLoop(b, func() { n += x.Dim() })
}

// BenchmarkCallNilFailFast: an op on a nil tensor fails in Go without calling C.
func BenchmarkCallNilFailFast(b *testing.B) {
	var nilT *Tensor
	y := Must(Ones([]int64{1}))
	defer y.Free()
	cpuLoop(b, func() {
		if _, err := nilT.Add(y); err == nil {
			b.Fatal("no error")
		}
	})
}

// BenchmarkAdd1Free: a 1-element add whose result is freed explicitly.
func BenchmarkAdd1Free(b *testing.B) {
	x, y := Must(Ones([]int64{1})), Must(Ones([]int64{1}))
	defer x.Free()
	defer y.Free()
	cpuLoop(b, func() {
		z, err := x.Add(y)
		if err != nil {
			b.Fatal(err)
		}
		z.Free()
	})
}

// BenchmarkAdd1Scope: a 1-element add owned by a Scope, closed every 100 ops.
func BenchmarkAdd1Scope(b *testing.B) {
	x, y := Must(Ones([]int64{1})), Must(Ones([]int64{1}))
	defer x.Free()
	defer y.Free()
	s := NewScope()
	i := 0
	cpuLoop(b, func() {
		if _, err := x.Add(y); err != nil {
			b.Fatal(err)
		}
		if i++; i%100 == 0 {
			s.Close()
			s = NewScope()
		}
	})
	s.Close()
}

// BenchmarkAdd1GC: a 1-element add left to the garbage collector's cleanup (the
// discouraged mode, for comparison). cpu-ns/op misses the frees, which run on the
// cleanup goroutine's thread.
func BenchmarkAdd1GC(b *testing.B) {
	x, y := Must(Ones([]int64{1})), Must(Ones([]int64{1}))
	defer x.Free()
	defer y.Free()
	cpuLoop(b, func() {
		if _, err := x.Add(y); err != nil {
			b.Fatal(err)
		}
	})
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
	var ds, cs []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0, c0 := time.Now(), threadCPU()
		if err := step(); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(t0))
		cs = append(cs, threadCPU()-c0)
	}
	b.StopTimer()
	slices.Sort(ds)
	slices.Sort(cs)
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "ms-median/op")
	b.ReportMetric(float64(cs[len(cs)/2].Microseconds())/1000, "cpu-ms-median/op")
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

// BenchmarkAdamStepLeNet: one Adam update of LeNet's 10 parameter tensors (61,706 values)
// with fixed gradients, as a meta-step's model step and every evaluation-model step take it.
func BenchmarkAdamStepLeNet(b *testing.B) {
	p := lenetParams(b, 1, Float)
	defer FreeAll(p)
	grads := make([]*Tensor, len(p))
	for i, t := range p {
		r := Must(Randn(t.Shape(), nil))
		grads[i] = Must(r.MulScalar(1e-3))
		r.Free()
	}
	defer FreeAll(grads)
	opt, err := NewAdam(p, AdamOpts{LR: 1e-3})
	if err != nil {
		b.Fatal(err)
	}
	defer opt.Close()
	cpuLoop(b, func() {
		if err := opt.StepWith(grads); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkPool2x2 compares libtorch's max_pool2d with the fused MaxPool2x2 on LeNet's
// first activation of a meta-step's target batch (1024×6×24×24 float32): forward with a
// recorded graph, then backward, as the LD meta-step runs them; and forward alone, as
// scoring runs it.
func BenchmarkPool2x2(b *testing.B) {
	x := Must(Randn([]int64{1024, 6, 24, 24}, nil))
	defer x.Free()
	if err := x.SetRequiresGrad(true); err != nil {
		b.Fatal(err)
	}
	for _, impl := range []struct {
		name string
		pool func(*Tensor) (*Tensor, error)
	}{
		{"max_pool2d", func(x *Tensor) (*Tensor, error) { return MaxPool2d(x, PoolOpts{Kernel: [2]int64{2, 2}}) }},
		{"MaxPool2x2", MaxPool2x2},
	} {
		name, pool := impl.name, impl.pool
		b.Run(name+"/fwd+bwd", func(b *testing.B) {
			cpuLoop(b, func() {
				sc := NewScope()
				defer sc.Close()
				y := Must(pool(x))
				g := Must(Ones(y.Shape()))
				Must(Grad([]*Tensor{y}, []*Tensor{x}, GradOpts{GradOutputs: []*Tensor{g}}))
			})
		})
		b.Run(name+"/fwd-graph", func(b *testing.B) {
			cpuLoop(b, func() { Must(pool(x)).Free() })
		})
		b.Run(name+"/fwd-nograd", func(b *testing.B) {
			cpuLoop(b, func() {
				_ = NoGrad(func() error { Must(pool(x)).Free(); return nil })
			})
		})
	}
}

// BenchmarkConvPool times LeNet's two convolution + 2×2 max-pool layers over a meta-step's
// target batch (1024 float32 images): the first (1→6, 28×28, padding 2) and the second
// (6→16, 14×14), computed as MaxPool2x2(Conv2d) (libtorch's convolution), as
// MaxPool2x2(Conv2dDirect) and as Conv2dMaxPool2x2 (fused). fwd-nograd is the forward alone
// (LD RR's target batch); bwd-w the forward with a graph and the gradient with respect to the
// weights (the first layer in LD's label gradient); bwd-xw the same with the input's gradient
// too (the second layer). Run with the allocator settings of the ldtorch command
// (MALLOC_ARENA_MAX=1 MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=1073741824
// MALLOC_TOP_PAD_=268435456) to time the kernels rather than page faults.
func BenchmarkConvPool(b *testing.B) {
	layers := []struct {
		name      string
		x, w      []int64
		pad       int64
		inputGrad bool
	}{
		{"conv1", []int64{1024, 1, 28, 28}, []int64{6, 1, 5, 5}, 2, false},
		{"conv2", []int64{1024, 6, 14, 14}, []int64{16, 6, 5, 5}, 0, true},
	}
	pooled := func(conv func(x, w, b *Tensor, o Conv2dOpts) (*Tensor, error)) func(x, w, b *Tensor, o Conv2dOpts) (*Tensor, error) {
		return func(x, w, b *Tensor, o Conv2dOpts) (*Tensor, error) {
			y, err := conv(x, w, b, o)
			if err != nil {
				return nil, err
			}
			defer y.Free()
			return MaxPool2x2(y)
		}
	}
	for _, l := range layers {
		x := Must(Randn(l.x, nil))
		w := Must(Randn(l.w, nil))
		bias := Must(Randn([]int64{l.w[0]}, nil))
		xg := Must(x.Detach())
		if l.inputGrad {
			if err := xg.SetRequiresGrad(true); err != nil {
				b.Fatal(err)
			}
		}
		wg := Must(w.Detach())
		if err := wg.SetRequiresGrad(true); err != nil {
			b.Fatal(err)
		}
		opts := Conv2dOpts{Padding: [2]int64{l.pad, l.pad}}
		for _, impl := range []struct {
			name string
			f    func(x, w, b *Tensor, o Conv2dOpts) (*Tensor, error)
		}{{"conv2d", pooled(Conv2d)}, {"direct", pooled(Conv2dDirect)}, {"fused", Conv2dMaxPool2x2}} {
			f := impl.f
			b.Run(l.name+"/"+impl.name+"/fwd-nograd", func(b *testing.B) {
				cpuLoop(b, func() {
					_ = NoGrad(func() error { Must(f(x, w, bias, opts)).Free(); return nil })
				})
			})
			bwd := "bwd-w"
			inputs := []*Tensor{wg}
			if l.inputGrad {
				bwd = "bwd-xw"
				inputs = []*Tensor{xg, wg}
			}
			b.Run(l.name+"/"+impl.name+"/"+bwd, func(b *testing.B) {
				cpuLoop(b, func() {
					sc := NewScope()
					defer sc.Close()
					y := Must(f(xg, wg, bias, opts))
					g := Must(Ones(y.Shape()))
					Must(Grad([]*Tensor{y}, inputs, GradOpts{GradOutputs: []*Tensor{g}}))
				})
			})
		}
		FreeAll([]*Tensor{x, w, bias, xg, wg})
	}
}

// BenchmarkMaxPool2d3x3 compares MaxPool2d with MaxPool2dDirect on AlexCifarNet's first pool
// (3×3, stride 2, padding 1) over a meta-step's target batch (1024×64×32×32 float32),
// forward without a graph (LD RR's target batch) and forward + backward.
func BenchmarkMaxPool2d3x3(b *testing.B) {
	x := Must(Randn([]int64{1024, 64, 32, 32}, nil))
	defer x.Free()
	xg := Must(x.Detach())
	defer xg.Free()
	if err := xg.SetRequiresGrad(true); err != nil {
		b.Fatal(err)
	}
	o := PoolOpts{Kernel: [2]int64{3, 3}, Stride: [2]int64{2, 2}, Padding: [2]int64{1, 1}}
	for _, impl := range []struct {
		name string
		pool func(*Tensor, PoolOpts) (*Tensor, error)
	}{{"max_pool2d", MaxPool2d}, {"direct", MaxPool2dDirect}} {
		pool := impl.pool
		b.Run(impl.name+"/fwd-nograd", func(b *testing.B) {
			cpuLoop(b, func() {
				_ = NoGrad(func() error { Must(pool(x, o)).Free(); return nil })
			})
		})
		// The same work on 16 images at a time (4 MiB, in cache): the loop's own cost,
		// without the wait for memory.
		b.Run(impl.name+"/fwd-nograd-in-cache", func(b *testing.B) {
			x16 := Must(x.Narrow(0, 0, 16))
			defer x16.Free()
			cpuLoop(b, func() {
				for range 1024 / 16 {
					_ = NoGrad(func() error { Must(pool(x16, o)).Free(); return nil })
				}
			})
		})
		b.Run(impl.name+"/fwd+bwd", func(b *testing.B) {
			cpuLoop(b, func() {
				sc := NewScope()
				defer sc.Close()
				y := Must(pool(xg, o))
				g := Must(Ones(y.Shape()))
				Must(Grad([]*Tensor{y}, []*Tensor{xg}, GradOpts{GradOutputs: []*Tensor{g}}))
			})
		})
	}
}
