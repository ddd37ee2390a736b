package train_test

import (
	"context"
	"fmt"
	"log"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
)

// Fresh models trained on fixed images and soft labels and scored on a test split, as the
// final test of a distillation trains them: here two LeNets with the RR head, 30 steps each,
// on 20 images whose class is their brightness.
func ExampleTrainer_Test() {
	accs, err := torch.Guard("example", func() ([]float64, error) {
		s := torch.NewScope()
		defer s.Close()
		const n = 20
		images := make([]float32, n*28*28)
		table := make([]float32, n*2)
		for i := range n {
			for p := range 28 * 28 {
				images[i*28*28+p] = float32(i%2)*2 - 1 // class 1 bright, class 0 dark
			}
			table[i*2+i%2] = 0.9
			table[i*2+1-i%2] = 0.1
		}
		var c torch.Chain
		x := c.T(torch.FromFloat32(images, n, 1, 28, 28))
		y := c.T(torch.FromFloat32(table, n, 2))
		labels := c.T(torch.FromInt64([]int64{0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1}, n))
		if c.Err() != nil {
			return nil, c.Err()
		}
		net, err := nets.New(config.ArchLeNet, 1, 28, 28, 2)
		if err != nil {
			return nil, err
		}
		cfg := config.Default()
		tr := &train.Trainer{Net: net, RR: true, Cfg: cfg, Images: x, Labels: y, Batch: 10, Opt: train.AdamSpec(1e-3), Device: torch.CPU}
		return tr.Test(context.Background(), 30, 2, 1234, "example", x, labels)
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(accs), "models:", accs)
	// Output:
	// 2 models: [100 100]
}
