package main

import (
	"strings"
	"testing"
)

func TestCoreTypeFor(t *testing.T) {
	set := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, f := range strings.Fields(s) {
			m[f] = true
		}
		return m
	}
	for _, c := range []struct{ flags, want string }{
		{"sse3 avx avx2 fma avx512f avx512cd avx512bw avx512dq avx512vl avx512_bf16", "SkylakeX"},
		{"sse3 avx avx2 fma avx512f avx512cd avx512bw avx512dq", "Haswell"}, // no AVX-512VL: not SkylakeX's set
		{"sse3 avx avx2 fma", "Haswell"},
		{"sse3 avx avx2", ""}, // AVX2 without FMA
		{"sse3", ""},
		{"", ""},
	} {
		if got := coreTypeFor(set(c.flags)); got != c.want {
			t.Errorf("coreTypeFor(%q) = %q, want %q", c.flags, got, c.want)
		}
	}
}

// The flags of this machine's first CPU come back (Linux: /proc/cpuinfo has them).
func TestCPUFlags(t *testing.T) {
	f := cpuFlags()
	if len(f) == 0 {
		t.Skip("no flags in /proc/cpuinfo")
	}
	if !f["fpu"] && !f["sse2"] {
		t.Errorf("flags without fpu or sse2: %v", f)
	}
}
