package main

import (
	"os"
	"strings"

	"github.com/ldtorch/ldtorch/torch"
)

// blasCoreEnv is OpenBLAS's setting of its kernel set, read once at process start.
const blasCoreEnv = "OPENBLAS_CORETYPE"

// blasCoreType is the OPENBLAS_CORETYPE the re-executed process gets (malloc.go), or "" to
// leave OpenBLAS's own choice. An OpenBLAS older than the CPU takes it for the generic
// Prescott core: Debian 12's 0.3.21 does so on Intel family 6 model 207 (5th-generation
// Xeon), whose SSE3 kernels made LD meta-steps 1.17× as long as the AVX-512 ones
// (docs/benchmarks/openblas.md#naming-the-openblas-kernel-set). On such a CPU the kernels of the newest core it can
// run are named instead: SkylakeX with AVX-512, Haswell with AVX2 and FMA. A value the user
// set is left alone.
func blasCoreType() string {
	if _, set := os.LookupEnv(blasCoreEnv); set {
		return ""
	}
	if torch.CheckABI() != nil || torch.BLASCore() != "Prescott" {
		return ""
	}
	return coreTypeFor(cpuFlags())
}

// coreTypeFor picks OpenBLAS's kernel set for a CPU with these /proc/cpuinfo flags.
func coreTypeFor(flags map[string]bool) string {
	all := func(names ...string) bool {
		for _, n := range names {
			if !flags[n] {
				return false
			}
		}
		return true
	}
	switch {
	case all("avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"):
		return "SkylakeX"
	case all("avx2", "fma"):
		return "Haswell"
	}
	return ""
}

// cpuFlags reads the first processor's flags from /proc/cpuinfo (none where it is absent).
func cpuFlags() map[string]bool {
	flags := map[string]bool{}
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return flags
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "flags" {
			for _, f := range strings.Fields(v) {
				flags[f] = true
			}
			break
		}
	}
	return flags
}

// blasCoreNote says where OPENBLAS_CORETYPE came from, for `ldtorch version`.
func blasCoreNote() string {
	v, set := os.LookupEnv(blasCoreEnv)
	if !set {
		return ""
	}
	return " (" + blasCoreEnv + "=" + v + ")"
}
