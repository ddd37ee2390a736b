package labeldistill_test

// example_test.go: the library's entry point, run as a test: labels distilled for a few
// in-memory images, their artifact written, read back and evaluated.

import (
	"context"
	"fmt"
	"log"
	"math/rand/v2"
	"os"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
)

// tenBars is an MNIST-shaped task held in memory: class c is a bright horizontal bar at row
// 4+2c of a 28×28 image, over noise.
func tenBars(n int, rng *rand.Rand) data.Split {
	s := data.Split{N: n, C: 1, H: 28, W: 28, Classes: 10, Images: make([]float32, n*28*28), Labels: make([]int64, n)}
	for i := range n {
		c := i % 10
		s.Labels[i] = int64(c)
		img := s.Images[i*784 : (i+1)*784]
		for p := range img {
			img[p] = float32(rng.NormFloat64() * 0.3)
		}
		for x := 2; x < 26; x++ {
			img[(4+2*c)*28+x] += 2
		}
	}
	return s
}

// Distil soft labels for 20 images (two of each class) with ridge regression (LD RR), then
// write the artifact, read it back and train fresh models on it with SGD instead of Adam
// (as ldtorch evaluate --optimizer sgd does).
func ExampleDistill() {
	rng := rand.New(rand.NewPCG(1, 2))
	d := &labeldistill.Data{Target: "mnist", Source: "mnist", Classes: 10, Shape: [3]int64{1, 28, 28},
		TargetSet: tenBars(1024, rng), Validation: tenBars(200, rng), Test: tenBars(200, rng), Base: tenBars(20, rng),
		Files: map[string]string{}}
	cfg := config.Default()
	cfg.Method, cfg.BaseExamples, cfg.InnerBatch, cfg.OuterBatch = config.MethodRR, 20, 10, 256
	cfg.Epochs, cfg.ValidateEvery, cfg.ResetWindow, cfg.EvalModels = 40, 5, 50, 2
	cfg.Baselines, cfg.Threads = []string{}, 1
	res, err := labeldistill.Distill(context.Background(), cfg, labeldistill.WithData(d))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d meta-steps, %d labels of %d classes\n", res.MetaSteps, len(res.Labels)/res.Classes, res.Classes)
	fmt.Println("test accuracy above 90 %:", res.TestMean > 90)

	dir, err := os.MkdirTemp("", "distilled")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := artifact.Write(dir, res); err != nil {
		log.Fatal(err)
	}
	art, err := artifact.Read(dir)
	if err != nil {
		log.Fatal(err)
	}
	ev, err := artifact.Evaluate(context.Background(), art, &d.Test, artifact.EvalConfig{Optimizer: "sgd", LR: 0.01, Models: 2})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s trained with %s for T = %v; %d models\n", ev.Arch, ev.Optimizer, ev.Steps == res.T, len(ev.Accuracies))
	// Output:
	// 160 meta-steps, 20 labels of 10 classes
	// test accuracy above 90 %: true
	// lenet trained with sgd for T = true; 2 models
}
