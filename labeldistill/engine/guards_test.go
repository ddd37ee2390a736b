package engine

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/internal/testkit"
	"github.com/ldtorch/ldtorch/torch"
)

// guards_test.go: the meta-loop's guard on the learnt values and the checkpoint writer name
// what is not finite.

// TestNonFiniteGuards: the meta-loop's guard on the learnt values and the checkpoint writer
// name what is not finite.
func TestNonFiniteGuards(t *testing.T) {
	cfg := testkit.SmallConfig(config.MethodLD)
	labels, err := newLabels(4, 3, cfg, torch.CPU)
	if err != nil {
		t.Fatal(err)
	}
	defer labels.close()
	labelSum := func() float64 {
		s := torch.NewScope()
		defer s.Close()
		sum, err := labels.Y.Sum()
		if err != nil {
			t.Fatal(err)
		}
		v, err := sum.Item()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	l := &Loop{learnt: []learnable{labels}}
	reading := func() []float64 { return []float64{readLoss: 1, readWrong: 0, readInfo: 0, readSums: labelSum()} }
	if _, err := l.checkReading(reading(), 10); err != nil {
		t.Fatal(err)
	}
	if err := torch.NoGrad(func() error { return labels.Y.Fill_(math.NaN()) }); err != nil {
		t.Fatal(err)
	}
	var nf *NonFiniteError
	if _, err := l.checkReading(reading(), 10); !errors.As(err, &nf) || !strings.HasPrefix(nf.Quantity, "labels") {
		t.Fatalf("NaN labels: %v", err)
	}
	if _, err := tensorArray("labels", labels.Y, 7); !errors.As(err, &nf) || nf.Step != 7 || !strings.Contains(nf.Quantity, "labels") {
		t.Fatalf("checkpointing NaN labels: %v", err)
	}
}
