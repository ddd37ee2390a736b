package engine

// ddlimits_test.go: method dd's unrolled steps against memory: the check of T against the
// network's parameters and the machine's memory, and a bare std::bad_alloc of an unrolled
// step turned into a message naming dd_epochs and dd_steps.

import (
	"errors"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
)

func TestDDMemoryCheck(t *testing.T) {
	net, err := nets.New("lenet", 1, 28, 28, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer net.Close()
	// LeNet's 61,706 parameters: 494 KB a step, at least.
	if got := ddBytesPerStep(net); got != 2*4*61706 {
		t.Fatalf("ddBytesPerStep(lenet) = %d", got)
	}
	cfg := config.Default()
	cfg.Method, cfg.Arch, cfg.DDSteps, cfg.DDEpochs, cfg.DDBackward = config.MethodDD, "lenet", 10, 1000, config.DDRecompute
	const gb = 1_000_000_000
	if err := ddMemoryCheck(net, cfg, 24*gb); err != nil {
		t.Errorf("10,000 steps on 24 GB: %v", err)
	}
	err = ddMemoryCheck(net, cfg, 2*gb)
	var fe *config.FieldError
	if !errors.As(err, &fe) || fe.Field != "dd_epochs" {
		t.Fatalf("10,000 steps on 2 GB: %v, want a FieldError on dd_epochs", err)
	}
	for _, want := range []string{"dd_steps × dd_epochs = 10 × 1000 = 10000", "lenet", "494 KB a step", "4.9 GB", "2.0 GB", "lower dd_epochs or dd_steps"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v: does not say %q", err, want)
		}
	}
	if err := ddMemoryCheck(net, cfg, 0); err != nil {
		t.Errorf("unknown memory: %v", err)
	}

	bad := ddOutOfMemory(&torch.Error{Op: "grad", Msg: "std::bad_alloc"}, 1, 8000)
	if !errors.As(bad, &fe) || fe.Field != "dd_epochs" || !strings.Contains(bad.Error(), "dd_steps × dd_epochs = 1 × 8000") || !strings.Contains(bad.Error(), "std::bad_alloc") {
		t.Errorf("bad_alloc: %v", bad)
	}
	other := errors.New("unrolled step 3: shape mismatch")
	if got := ddOutOfMemory(other, 1, 8000); got != other {
		t.Errorf("another error changed: %v", got)
	}
}
