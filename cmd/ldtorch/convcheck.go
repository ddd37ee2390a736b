// convcheck.go: libtorch's oneDNN convolutions, checked before the commands that train or
// evaluate run any (torch.GuardConvolutions): where their float32 gradients disagree with
// float64 beyond rounding, oneDNN is switched off for the process, with a warning, rather
// than let a run go silently wrong. LDTORCH_MKLDNN=on or =off skips the check.

package main

import (
	"fmt"
	"os"
	"sync"

	"github.com/ldtorch/ldtorch/torch"
)

// computeCommands are the commands that run convolutions (version reports the check).
var computeCommands = map[string]bool{
	"distill": true, "select-base": true, "evaluate": true, "bench": true, "sweep": true,
	"study": true, "gradvar": true, "version": true,
}

var (
	convGuardMu   sync.Mutex
	convGuardDone = map[string]torch.ConvGuard{} // by LDTORCH_MKLDNN's value: once per process
)

// guardConvolutions runs torch.GuardConvolutions once per process (and setting), warning on
// stderr when it switched oneDNN off or could not check; runContext has refused an unknown
// LDTORCH_MKLDNN before.
func (e *env) guardConvolutions() torch.ConvGuard {
	convGuardMu.Lock()
	defer convGuardMu.Unlock()
	setting := os.Getenv(torch.MkldnnEnv)
	if g, ok := convGuardDone[setting]; ok {
		return g
	}
	if torch.CheckABI() != nil {
		return torch.ConvGuard{} // the command reports the stale shim
	}
	g, err := torch.GuardConvolutions()
	switch {
	case err != nil:
		fmt.Fprintf(e.stderr, "ldtorch: warning: could not check libtorch's oneDNN convolutions: %v\n", err)
	case g.TurnedOff && !g.After.OK():
		fmt.Fprintf(e.stderr, "ldtorch: warning: %s; float32 results on this CPU are not to be trusted\n", g.Summary())
	case g.TurnedOff:
		fmt.Fprintf(e.stderr, "ldtorch: warning: %s (%s=on keeps oneDNN)\n", g.Summary(), torch.MkldnnEnv)
	}
	convGuardDone[setting] = g
	if g.TurnedOff {
		// The processes this one starts (--nproc ranks, sweep jobs) inherit the decision
		// rather than check and warn again; later calls here still report this outcome.
		os.Setenv(torch.MkldnnEnv, "off")
		convGuardDone["off"] = g
	}
	return g
}

// mkldnnSettingError is a usage error for an LDTORCH_MKLDNN that is not check, on or off
// (every command refuses one, as it does a wrong LDTORCH_MALLOC).
func mkldnnSettingError() error {
	if _, err := torch.MkldnnSetting(); err != nil {
		return usageErrorf("%v", err)
	}
	return nil
}
