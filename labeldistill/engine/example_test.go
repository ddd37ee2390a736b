package engine_test

import (
	"context"
	"fmt"
	"log"
	"math/rand/v2"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/labeldistill/engine"
)

// bars makes n noisy 28×28 images of three classes: a bright bar near the top (class 0),
// the middle (1) or the bottom (2), already normalised.
func bars(rng *rand.Rand, n int) data.Split {
	s := data.Split{Images: make([]float32, n*28*28), Labels: make([]int64, n), N: n, C: 1, H: 28, W: 28, Classes: 3}
	for i := range n {
		img := s.Images[i*28*28 : (i+1)*28*28]
		for p := range img {
			img[p] = float32(0.3 * rng.NormFloat64())
		}
		top := 4 + 8*(i%3) + rng.IntN(3)
		for p := top * 28; p < (top+3)*28; p++ {
			img[p] += 2
		}
		s.Labels[i] = int64(i % 3)
	}
	return s
}

// The meta-loop with an observer of one's own: its Stepped hook sees every meta-step, its
// Validated hook every validation, through the loop's accessors.
func ExampleDistill() {
	rng := rand.New(rand.NewPCG(1, 2))
	ds := &engine.Data{Target: "bars", Source: "bars", Classes: 3, Shape: [3]int64{1, 28, 28},
		TargetSet: bars(rng, 300), Validation: bars(rng, 90), Test: bars(rng, 90), Base: bars(rng, 6)}
	cfg := config.Default()
	cfg.Dataset, cfg.BaseSelection = "mnist", config.SelectUnbalanced // mnist's defaults for 1×28×28 images
	cfg.Method, cfg.BaseExamples, cfg.InnerBatch, cfg.OuterBatch = config.MethodRR, 6, 6, 60
	cfg.Epochs, cfg.ValidateEvery, cfg.EvalModels, cfg.Baselines, cfg.Threads = 4, 2, 1, []string{}, 1
	steps, validations := 0, 0
	count := engine.Observer{
		Name:    "counter",
		Stepped: func(l *engine.Loop) error { steps = l.Position().Step; return nil },
		Validated: func(l *engine.Loop, v engine.ValidationRecord, _ time.Duration) error {
			validations++
			return nil
		},
	}
	r, err := config.Resolve(cfg) // every "auto" value filled in and checked, once
	if err != nil {
		log.Fatal(err)
	}
	res, err := engine.Distill(context.Background(), r, engine.Options{Start: time.Now(), Dataset: ds, Observers: []engine.Observer{count}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d meta-steps, %d validations seen; %d label rows of %d classes kept\n",
		steps, validations, len(res.Labels)/res.Classes, res.Classes)
	// Output:
	// 20 meta-steps, 2 validations seen; 6 label rows of 3 classes kept
}
