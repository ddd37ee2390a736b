package config_test

import (
	"fmt"
	"log"

	"github.com/ldtorch/ldtorch/labeldistill/config"
)

// Resolve a configuration: every "auto" value filled in from the dataset, N and the method,
// and checked.
func ExampleConfig_Resolved() {
	cfg := config.Default()
	cfg.Dataset, cfg.Method, cfg.BaseExamples = "mnist", config.MethodRR, 20
	cfg.Learn = config.LearnImages
	r, err := cfg.Resolved()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.MethodName(), "on", r.Dataset, "with", r.Arch)
	fmt.Println("inner batch", r.InnerBatch, "outer batch", r.OuterBatch, "epochs", r.Epochs)
	fmt.Println("model training:", r.ModelTraining)

	cfg.EvalArch = "vgg"
	fmt.Println(cfg.Validate())
	// Output:
	// Our DD RR on mnist with lenet
	// inner batch 10 outer batch 1024 epochs 400
	// model training: never
	// eval_arch: unknown architecture "vgg" (want lenet, alexnet, resnet, convnet or torchscript:FILE)
}
