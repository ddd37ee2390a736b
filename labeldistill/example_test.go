package labeldistill_test

// example_test.go: the library's two entry points as the README shows them. The examples
// are compiled with the tests but not run (no Output comment): a distillation takes minutes
// and needs the MNIST files in the data folder (ldtorch data fetch mnist).

import (
	"context"
	"fmt"
	"log"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/labeldistill/config"
)

// Distil 100 soft labels for MNIST with ridge regression (LD RR) and write the artifact
// (distilled.npz and report.json) that ldtorch evaluate and ReadArtifact read.
func ExampleDistill() {
	ctx := context.Background()
	cfg := config.Default()
	cfg.Dataset, cfg.Method, cfg.BaseExamples = "mnist", config.MethodRR, 100
	res, err := labeldistill.Distill(ctx, cfg, labeldistill.WithProgress(func(p labeldistill.Progress) {
		if p.Phase == "validate" {
			fmt.Printf("epoch %d: validation accuracy %.2f %%\n", p.Epoch, p.ValidationAccuracy)
		}
	}))
	if err != nil {
		log.Fatal(err)
	}
	if err := artifact.Write("out/rr", res); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("test accuracy %.2f ± %.2f %% after T = %d steps\n", res.TestMean, res.TestStd, res.T)
}

// Train 20 fresh LeNets on an artifact's images and labels with SGD instead of Adam and
// score them on the target's test split (ldtorch evaluate --optimizer sgd --lr 0.01).
func ExampleEvaluate() {
	ctx := context.Background()
	art, err := artifact.Read("out/rr")
	if err != nil {
		log.Fatal(err)
	}
	test, err := labeldistill.LoadTestSplit(art.Report.Config)
	if err != nil {
		log.Fatal(err)
	}
	res, err := artifact.Evaluate(ctx, art, test, artifact.EvalConfig{Arch: config.ArchLeNet, Optimizer: "sgd", LR: 0.01, Models: 20})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %.2f ± %.2f %% over %d models\n", res.Arch, res.Mean, res.Std, len(res.Accuracies))
}
