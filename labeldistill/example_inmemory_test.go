package labeldistill_test

// example_inmemory_test.go: a distillation from start to end on a Go program's own data,
// run with the tests (a few seconds on one CPU thread).

import (
	"context"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/labeldistill/engine"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
)

// bars makes n noisy 28×28 images of three classes: a bright horizontal bar near the top
// (class 0), the middle (1) or the bottom (2), already normalised (background ≈ 0).
func bars(rng *rand.Rand, n int) data.Split {
	s := data.Split{Images: make([]float32, n*28*28), Labels: make([]int64, n), N: n, C: 1, H: 28, W: 28, Classes: 3}
	for i := range n {
		class := i % 3
		img := s.Images[i*28*28 : (i+1)*28*28]
		for p := range img {
			img[p] = float32(0.3 * rng.NormFloat64())
		}
		top := 4 + 8*class + rng.IntN(3)
		for p := top * 28; p < (top+3)*28; p++ {
			img[p] += 2
		}
		s.Labels[i] = int64(class)
	}
	return s
}

// Distil labels for six synthetic images in memory with LD RR, train a fresh LeNet on the
// distilled images and labels, save it as a PyTorch state dict and read its parameters
// back.
func ExampleWithData() {
	rng := rand.New(rand.NewPCG(1, 2))
	ds := &labeldistill.Data{Target: "bars", Source: "bars", Classes: 3, Shape: [3]int64{1, 28, 28},
		TargetSet: bars(rng, 300), Validation: bars(rng, 90), Test: bars(rng, 90), Base: bars(rng, 6)}
	cfg := config.Default()
	// mnist's defaults for 1×28×28 images; the images themselves are ds's (whose base
	// examples need no selection from mnist's ten classes)
	cfg.Dataset, cfg.BaseSelection = "mnist", config.SelectUnbalanced
	cfg.Method, cfg.BaseExamples, cfg.InnerBatch, cfg.OuterBatch = config.MethodRR, 6, 6, 60
	cfg.Epochs, cfg.EvalModels, cfg.Baselines, cfg.Threads = 8, 1, []string{}, 1
	ctx := context.Background()
	res, err := labeldistill.Distill(ctx, cfg, labeldistill.WithData(ds))
	if err != nil {
		log.Fatal(err)
	}
	right := 0
	for i, class := range ds.Base.Labels {
		row := res.Labels[i*res.Classes : (i+1)*res.Classes]
		if slices.Index(row, slices.Max(row)) == int(class) {
			right++
		}
	}
	fmt.Printf("%d distilled labels, %d with most weight on their image's class\n", len(ds.Base.Labels), right)

	// A fresh LeNet with the RR head, trained on the distilled data as the final test
	// trains its models, saved as dir/model-0.pt.
	dir, err := os.MkdirTemp("", "ldtorch-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	acc, err := torch.Guard("example", func() ([]float64, error) {
		s := torch.NewScope()
		defer s.Close()
		net, err := nets.New(config.ArchLeNet, 1, 28, 28, int64(res.Classes))
		if err != nil {
			return nil, err
		}
		images, err := torch.FromFloat32(res.BaseImages, res.BaseShape[:]...)
		if err != nil {
			return nil, err
		}
		labels, err := torch.FromFloat32(res.Labels, res.BaseShape[0], int64(res.Classes))
		if err != nil {
			return nil, err
		}
		x, y, err := engine.SplitTensors(&ds.Test, ds.Shape, torch.CPU)
		if err != nil {
			return nil, err
		}
		saver, err := train.NewModelSaver(dir)
		if err != nil {
			return nil, err
		}
		tr := &train.Trainer{Net: net, RR: true, Cfg: res.Config, Images: images, Labels: labels, Batch: res.Config.EvalBatch,
			Opt: train.AdamSpec(res.Config.EvalLR), Device: torch.CPU, Trained: saver.Save}
		return tr.Test(ctx, res.T, 1, 7, "example", x, y)
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("test accuracy of the fresh model above 90 %%: %v\n", acc[0] > 90)

	// Its parameters, read back (torch.load reads the same file in Python).
	names, params, err := torch.LoadPickle(filepath.Join(dir, train.ModelFile(0)))
	if err != nil {
		log.Fatal(err)
	}
	defer torch.FreeAll(params)
	for i, name := range names {
		fmt.Println(name, params[i].Shape())
	}
	// Output:
	// 6 distilled labels, 6 with most weight on their image's class
	// test accuracy of the fresh model above 90 %: true
	// conv1.weight [6 1 5 5]
	// conv1.bias [6]
	// conv2.weight [16 6 5 5]
	// conv2.bias [16]
	// fc1.weight [120 400]
	// fc1.bias [120]
	// fc2.weight [84 120]
	// fc2.bias [84]
	// rr.scale [1]
	// rr.W [85 3]
}
