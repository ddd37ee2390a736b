// environment.go: the process settings the command takes from the environment, read once at
// start and passed to the library, which reads no environment itself:
//
//	LDTORCH_MKLDNN         check (the default), on or off: the check of libtorch's oneDNN
//	                       convolutions (torch.SetMkldnnSetting; convcheck.go runs it)
//	LDTORCH_CUDA_GRAPHS    on (the default; also 1, true, yes), off (0, false, no) or all, in
//	                       any case: where steps are recorded as CUDA graphs (torch.SetCUDAGraphs)
//	LDTORCH_DIRECT_CONV    off (or 0): libtorch's conv2d instead of the shim's direct 5×5
//	                       kernels; avx2: the AVX2 kernels on an AVX-512 CPU; any other value,
//	                       or an ISA the CPU lacks, keeps the best kernels (torch.SetDirectConv)
//	LDTORCH_CPP_BACKTRACE  set and not empty: libtorch captures its C++ backtraces again
//	                       (torch.SetCPPBacktraces; off otherwise, as they cost milliseconds)
//	LDTORCH_DEBUG          set and not empty: internal errors carry the goroutine's stack
//	                       (torch.SetPanicStacks)
//
// A bad LDTORCH_MKLDNN or LDTORCH_CUDA_GRAPHS is a usage error naming the variable.

package main

import (
	"fmt"
	"os"

	"github.com/ldtorch/ldtorch/torch"
)

// applyEnvironment reads the variables above and makes the settings they ask for. It
// returns an error for a value the command refuses; settings that call into the shim are
// skipped when the shim is stale (the command reports that itself).
func applyEnvironment() error {
	if v := os.Getenv(torch.MkldnnEnv); torch.SetMkldnnSetting(v) != nil {
		return fmt.Errorf("%s=%q: want check (the default), on or off", torch.MkldnnEnv, v)
	}
	if v := os.Getenv(torch.CUDAGraphsVariable); torch.SetCUDAGraphs(v) != nil {
		return fmt.Errorf("%s=%q: want on, off or all", torch.CUDAGraphsVariable, v)
	}
	torch.SetPanicStacks(os.Getenv("LDTORCH_DEBUG") != "")
	if torch.CheckABI() != nil {
		return nil
	}
	switch os.Getenv("LDTORCH_DIRECT_CONV") {
	case "off", "0":
		if err := torch.SetDirectConv("off"); err != nil {
			return err
		}
	case "avx2":
		_ = torch.SetDirectConv("avx2") // a CPU without AVX2 has no direct kernels to choose
	}
	if os.Getenv("LDTORCH_CPP_BACKTRACE") != "" {
		if err := torch.SetCPPBacktraces(true); err != nil {
			return err
		}
	}
	return nil
}
