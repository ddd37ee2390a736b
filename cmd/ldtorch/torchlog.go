package main

import (
	"os"

	"github.com/ldtorch/ldtorch/torch"
)

// quietLibtorch keeps libtorch's own C++ warnings off stderr, where ldtorch writes its
// messages (c10d's in libtorch 2.x name, for instance, each peer whose host name cannot be
// looked up): ldtorch explains the failures it meets itself. TORCH_CPP_LOG_LEVEL, PyTorch's
// own setting, is honoured when set.
func quietLibtorch() {
	// A shim of another ABI is reported by the command that runs (torch.CheckABI).
	if err := torch.CheckABI(); err != nil {
		return
	}
	if _, ok := os.LookupEnv("TORCH_CPP_LOG_LEVEL"); ok {
		_ = torch.SetLogLevelFromEnv()
		return
	}
	_ = torch.SetLogLevel(torch.LogError)
}
