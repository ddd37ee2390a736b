package artifact_test

import (
	"fmt"
	"log"
	"os"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/labeldistill/config"
)

// An artifact written and read back: distilled.npz (NumPy), distilled.pt (PyTorch) and
// report.json, checked on reading.
func ExampleWrite() {
	cfg := config.Default()
	cfg.BaseExamples, cfg.BaseSelection = 2, config.SelectUnbalanced
	cfg, err := cfg.Resolved()
	if err != nil {
		log.Fatal(err)
	}
	res := &labeldistill.Result{Record: labeldistill.Record{Config: cfg, T: 50, MetaSteps: 98},
		Classes: 10, BaseShape: [4]int64{2, 1, 28, 28}, BaseImages: make([]float32, 2*28*28),
		BaseIndices: []int64{3, 8}, BaseClasses: []int64{0, 1}, Labels: make([]float32, 20)}
	res.Labels[0], res.Labels[1], res.Labels[10+1], res.Labels[10+7] = 0.75, 0.25, 0.5, 0.5
	dir, err := os.MkdirTemp("", "ldtorch-example-")
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
	fmt.Println(art.Shape, art.Classes, art.Labels[:2], art.Labels[10:18], art.BaseIndices, art.HasTorchFile)
	fmt.Println(art.Report.Method, "T", art.Report.T)
	// Output:
	// [2 1 28 28] 10 [0.75 0.25] [0 0.5 0 0 0 0 0 0.5] [3 8] true
	// ld T 50
}
