// malloc.go: glibc's allocator settings for the ldtorch process.
//
// A meta-step allocates and frees activation tensors of 3–20 MB. With glibc's defaults every
// OS thread that calls into libtorch gets a malloc arena of its own whose freed memory goes
// back to the kernel, so each step faults the same memory in again: ≈ 40 % of an LD
// meta-step's CPU time was page faults (docs/benchmarks/allocator.md#one-malloc-arena-for-all-threads). glibc reads these
// settings from the environment at process start only (mallopt at run time cannot rebind the
// threads that already have arenas; measured, it changed nothing), so the CLI re-executes
// itself once with them set, before anything else runs. The library never does this: a Go
// service that links labeldistill sets the same variables itself if it wants them.

package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"

	"github.com/ldtorch/ldtorch/torch"
)

// mallocEnv selects the allocator settings: "on" (the default) or "off" (glibc's defaults).
// The re-executed process sees "tuned".
const mallocEnv = "LDTORCH_MALLOC"

// mallocSettings are the variables set by the re-exec: one arena for all threads, blocks up
// to 32 MiB from the heap instead of mmap, and freed memory kept (up to 1 GiB) rather than
// returned to the kernel. A variable already in the environment is left as the user set it.
var mallocSettings = []struct{ name, value string }{
	{"MALLOC_ARENA_MAX", "1"},
	{"MALLOC_MMAP_THRESHOLD_", "33554432"},
	{"MALLOC_TRIM_THRESHOLD_", "1073741824"},
	{"MALLOC_TOP_PAD_", "268435456"},
}

// tuneMalloc re-executes the program with mallocSettings unless they are switched off or
// already applied. It returns only when no re-exec happens: with a usage error for a bad
// LDTORCH_MALLOC value, nil otherwise (also when the exec itself fails: the run then goes on
// with glibc's defaults, which changes speed, never results).
func tuneMalloc() error {
	switch v := os.Getenv(mallocEnv); v {
	case "off", "tuned":
		return nil
	case "", "on":
	default:
		return usageErrorf("%s=%q: want on or off", mallocEnv, v)
	}
	env := os.Environ()
	for _, s := range mallocSettings {
		if _, set := os.LookupEnv(s.name); !set {
			env = append(env, s.name+"="+s.value)
		}
	}
	if ct := blasCoreType(); ct != "" {
		env = append(env, blasCoreEnv+"="+ct)
	}
	env = append(env, mallocEnv+"=tuned")
	// /proc/self/exe is this very binary, even if its file was replaced since it started.
	_ = syscall.Exec("/proc/self/exe", os.Args, env)
	return nil
}

// blockCacheBytes is how much freed memory of large CPU tensors the tuned process keeps for
// reuse (torch.SetCPUBlockCache): a quarter of the physical memory. glibc maps every block
// above 32 MiB afresh and unmaps it on free, whatever MALLOC_MMAP_THRESHOLD_ says, so without
// this AlexCifarNet's activations (67–268 MB for 1024 images) fault in again at every step
// (docs/benchmarks/allocator.md#large-blocks-kept-for-reuse).
func blockCacheBytes() int64 {
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		return 1 << 30
	}
	return int64(si.Totalram) * int64(si.Unit) / 4
}

// tuneBlockCache installs the block cache in the tuned process (not with LDTORCH_MALLOC=off).
func tuneBlockCache() {
	if os.Getenv(mallocEnv) != "tuned" {
		return
	}
	// A shim of another ABI is reported by the command that runs (torch.CheckABI); a
	// failure leaves libtorch's allocator in place: speed changes, never results.
	if err := torch.CheckABI(); err != nil {
		return
	}
	_ = torch.SetCPUBlockCache(blockCacheBytes())
}

// mallocSummary describes the allocator settings in effect, for `ldtorch version` and bench.
func mallocSummary() string {
	var set []string
	for _, s := range mallocSettings {
		if v, ok := os.LookupEnv(s.name); ok {
			set = append(set, s.name+"="+v)
		}
	}
	state := "glibc defaults"
	if os.Getenv(mallocEnv) == "tuned" {
		state = "tuned by ldtorch"
	}
	if os.Getenv(mallocEnv) == "tuned" {
		set = append(set, fmt.Sprintf("CPU block cache %d MiB", blockCacheBytes()>>20))
	}
	if len(set) == 0 {
		return state
	}
	return fmt.Sprintf("%s (%s)", state, strings.Join(set, " "))
}
