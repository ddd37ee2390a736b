// Package devicetest gives device-parametrised tests the device they run on, from the
// environment: LDTORCH_TEST_DEVICE=cuda (or cuda:N) puts them on a GPU and skips them where
// CUDA is not available; cpu or unset runs them on the CPU, so that CI exercises them too.
// On a GPU it turns TF32 off, as ldtorch runs (config.Config.AllowTF32): libtorch lets
// cuDNN's convolutions use it otherwise, and tests that compare a GPU's results with the
// CPU's assume float32.
package devicetest

import (
	"fmt"
	"os"
	"testing"

	"github.com/ldtorch/ldtorch/torch"
)

// Variable names the device.
const Variable = "LDTORCH_TEST_DEVICE"

// Device is the device named by LDTORCH_TEST_DEVICE (the CPU when unset). It stops the test
// on a name torch.ParseDevice does not take, and skips it on a GPU that is not there.
func Device(tb testing.TB) torch.Device {
	tb.Helper()
	name := os.Getenv(Variable)
	if name == "" {
		return torch.CPU
	}
	d, err := torch.ParseDevice(name)
	if err != nil {
		tb.Fatalf("%s: %v", Variable, err)
	}
	if d.IsCUDA() && (!torch.CUDAIsAvailable() || d.Index >= torch.CUDADeviceCount()) {
		tb.Skipf("%s=%s: CUDA is not available (%d devices)", Variable, name, torch.CUDADeviceCount())
	}
	if d.IsCUDA() {
		if err := torch.SetAllowTF32(false); err != nil {
			tb.Fatalf("SetAllowTF32(false): %v", err)
		}
	}
	return d
}

// GuardConvolutions is torch.GuardConvolutions for a test binary's TestMain, as the
// command runs it, with the command's LDTORCH_MKLDNN (torch.SetMkldnnSetting): a wrong
// value or a failed check ends the binary (exit 1); oneDNN switched off, or any outcome
// under go test -v, is said on stderr. It returns the outcome.
func GuardConvolutions(pkg string, verbose bool) torch.ConvGuard {
	if v := os.Getenv(torch.MkldnnEnv); torch.SetMkldnnSetting(v) != nil {
		fmt.Fprintf(os.Stderr, "%s tests: %s=%q: want check (the default), on or off\n", pkg, torch.MkldnnEnv, v)
		os.Exit(1)
	}
	g, err := torch.GuardConvolutions()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s tests: %v\n", pkg, err)
		os.Exit(1)
	}
	if verbose || g.TurnedOff {
		fmt.Fprintf(os.Stderr, "%s tests: %s\n", pkg, g.Summary())
	}
	return g
}
