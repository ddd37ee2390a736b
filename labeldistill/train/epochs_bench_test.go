package train

// epochs_bench_test.go: what the benchmark protocol's pieces cost (docs/benchmarks/convnet.md): one EpochTrainer step (SGD, DSA) of one model on a batch of 10, 100
// or 256 images, and scoring 1000 images, for ConvNet-3 and LeNet. Besides wall time each
// reports the process's CPU seconds per operation (cpu-s/op), which a loaded machine
// disturbs less:
//
//	OMP_NUM_THREADS=1 go test ./labeldistill/train -run '^$' -bench EpochTrainer -benchtime 3x

import (
	"context"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/nets/augment"
	"github.com/ldtorch/ldtorch/torch"
)

func processCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func benchImages(b *testing.B, n int, c, h int64) (x, labels, y *torch.Tensor) {
	rng := rand.New(rand.NewPCG(1, 2))
	img := make([]float32, n*int(c*h*h))
	for i := range img {
		img[i] = float32(rng.NormFloat64())
	}
	lab, cls := make([]float32, n*10), make([]int64, n)
	for i := range n {
		lab[i*10+i%10], cls[i] = 1, int64(i%10)
	}
	var ch torch.Chain
	x = ch.T(torch.FromFloat32(img, int64(n), c, h, h))
	labels = ch.T(torch.FromFloat32(lab, int64(n), 10))
	y = ch.T(torch.FromInt64(cls, int64(n)))
	if ch.Err() != nil {
		b.Fatal(ch.Err())
	}
	return x, labels, y
}

func BenchmarkEpochTrainer(b *testing.B) {
	prev := torch.NumThreads()
	if err := torch.SetNumThreads(1); err != nil {
		b.Fatal(err)
	}
	defer torch.SetNumThreads(prev)
	for _, sh := range []struct{ c, h int64 }{{1, 28}, {3, 32}} {
		for _, arch := range []string{"convnet", "lenet"} {
			net, err := nets.New(arch, sh.c, sh.h, sh.h, 10)
			if err != nil {
				b.Fatal(err)
			}
			for _, n := range []int{10, 100, 256} {
				b.Run(fmt.Sprintf("%s-%dx%d-step-batch%d", arch, sh.c, sh.h, n), func(b *testing.B) {
					s := torch.NewScope()
					defer s.Close()
					x, labels, _ := benchImages(b, n, sh.c, sh.h)
					dsa := augment.Default()
					l, err := NewModels(net, false, config.Default(), OptSpec{Kind: "sgd", LR: 0.01, Momentum: 0.9, WeightDecay: 5e-4}, []uint64{1}, torch.CPU, torch.Float, nets.BodyPerModel)
					if err != nil {
						b.Fatal(err)
					}
					defer l.Close()
					g, err := torch.NewGenerator(7)
					if err != nil {
						b.Fatal(err)
					}
					defer g.Close()
					l.Augment = augmentEach(dsa, []*torch.Generator{g})
					idx := make([]int64, n)
					for i := range idx {
						idx[i] = int64(i)
					}
					it, err := torch.FromInt64(idx, int64(n))
					if err != nil {
						b.Fatal(err)
					}
					cpu := processCPU()
					b.ResetTimer()
					for range b.N {
						if err := l.Step(x, labels, it, int64(n)); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric((processCPU()-cpu)/float64(b.N), "cpu-s/op")
				})
			}
			b.Run(fmt.Sprintf("%s-%dx%d-score1000", arch, sh.c, sh.h), func(b *testing.B) {
				s := torch.NewScope()
				defer s.Close()
				x, _, y := benchImages(b, 1000, sh.c, sh.h)
				l, err := NewModels(net, false, config.Default(), OptSpec{Kind: "sgd", LR: 0.01}, []uint64{1}, torch.CPU, torch.Float, nets.BodyPerModel)
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				cpu := processCPU()
				b.ResetTimer()
				for range b.N {
					if _, err := l.Accuracies(context.Background(), x, y); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric((processCPU()-cpu)/float64(b.N), "cpu-s/op")
			})
		}
	}
}
