package nets

// main_test.go: TestMain (the ABI handshake with the shim, failing fast on a stale build)
// and the small helpers the package's tests share.

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/devicetest"
)

func TestMain(m *testing.M) {
	info, err := torch.RuntimeInfo()
	if err != nil {
		fmt.Fprintln(os.Stderr, "nets tests:", err)
		os.Exit(1)
	}
	flag.Parse()
	devicetest.GuardConvolutions("nets", testing.Verbose())
	if testing.Verbose() {
		fmt.Printf("libtorch %s, %s, threads %d\n", info.TorchVersion, info.Build, info.Threads)
	}
	os.Exit(m.Run())
}

// need unwraps (v, err), stopping the test on err.
func need[V any](tb testing.TB) func(V, error) V {
	return func(v V, err error) V {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
		return v
	}
}

func ok(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// scoped opens a Scope that the test's cleanup closes.
func scoped(tb testing.TB) *torch.Scope {
	s := torch.NewScope()
	tb.Cleanup(s.Close)
	return s
}

func newRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x2545f4914f6cdd1d)) }

// randn64 returns a float64 tensor of N(0, 1) samples drawn in Go.
func randn64(tb testing.TB, rng *rand.Rand, shape ...int64) *torch.Tensor {
	tb.Helper()
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	v := make([]float64, n)
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	return need[*torch.Tensor](tb)(torch.FromFloat64(v, shape...))
}

// values copies a tensor out as float64.
func values(tb testing.TB, t *torch.Tensor) []float64 {
	tb.Helper()
	return need[[]float64](tb)(t.Float64s())
}

// testDevice is where the device-parametrised tests run (devicetest.Device).
func testDevice(tb testing.TB) torch.Device { return devicetest.Device(tb) }
