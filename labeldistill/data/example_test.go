package data_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/ldtorch/ldtorch/labeldistill/data"
)

// The facts a configuration's defaults come from, for a registered dataset.
func ExampleLookupFacts() {
	for _, name := range []string{"mnist", "cifar10", "emnist"} {
		f, ok := data.LookupFacts(name)
		fmt.Printf("%s %v %s: %d classes, colour %v, validation %d, mean %.4f\n", name, ok, f.Name, f.Classes, f.Colour, f.ValidationSize, f.NormMean)
	}
	// Output:
	// mnist true mnist: 10 classes, colour false, validation 10000, mean [0.1307]
	// cifar10 true cifar10: 10 classes, colour true, validation 5000, mean [0.4914 0.4824 0.4467]
	// emnist true emnist-letters: 26 classes, colour false, validation 10000, mean [0.1307]
}

// A base-index file as select-base writes it, read back by a run (distill --base-indices).
func ExampleFormatBaseFile() {
	b, err := data.FormatBaseFile(data.BaseFileHeader{Strategy: "kmeans", Dataset: "mnist", BaseExamples: 3, BaseSeed: 1234, ValidationSize: 10000},
		[]string{"three examples"}, []int64{17, 4, 250}, []int64{0, 1, 2})
	if err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "ldtorch-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "base.txt")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		log.Fatal(err)
	}
	f, err := data.ReadBaseFile(path)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(f.Indices, f.Header.Strategy, f.Header.Dataset)
	// Output:
	// [17 4 250] kmeans mnist
}
