package torch

import "testing"

// TestCPUBlockCache: a freed large block is handed out again for the next tensor of the same
// size instead of a new mapping, tensors made from kept blocks hold what they are given, a
// limit of 0 gives the kept blocks back, and a negative limit is an error. (The cache stays
// installed for the rest of the test binary with a limit of 0: every block is then unmapped
// on free, as glibc does.)
func TestCPUBlockCache(t *testing.T) {
	scoped(t)
	if err := SetCPUBlockCache(-1); err == nil {
		t.Error("negative limit: no error")
	}
	ok(t, SetCPUBlockCache(1<<30))
	defer func() { ok(t, SetCPUBlockCache(0)) }()
	const n = 10 << 20 // 40 MiB of float32
	_, maps0, hits0 := CPUBlockCacheStats()
	a := Must(Full([]int64{n}, 3, WithDType(Float)))
	_, maps1, _ := CPUBlockCacheStats()
	if maps1 != maps0+1 {
		t.Fatalf("a 40 MiB tensor: %d new mappings, want 1", maps1-maps0)
	}
	a.Free()
	cached, _, _ := CPUBlockCacheStats()
	if cached < 4*n {
		t.Fatalf("after freeing it, %d bytes kept, want ≥ %d", cached, 4*n)
	}
	b := Must(Zeros([]int64{n}, WithDType(Float)))
	defer b.Free()
	_, maps2, hits2 := CPUBlockCacheStats()
	if maps2 != maps1 || hits2 != hits0+1 {
		t.Errorf("the second tensor: %d new mappings and %d hits, want 0 and 1", maps2-maps1, hits2-hits0)
	}
	if s := item(t, Must(b.Sum())); s != 0 {
		t.Errorf("zeros from a reused block sum to %g", s)
	}
	small := Must(Ones([]int64{1000}))
	defer small.Free()
	if _, maps3, hits3 := CPUBlockCacheStats(); maps3 != maps2 || hits3 != hits2 {
		t.Error("a small tensor went through the block cache")
	}
	ok(t, SetCPUBlockCache(0))
	if cached, _, _ := CPUBlockCacheStats(); cached != 0 {
		t.Errorf("limit 0: %d bytes still kept", cached)
	}
}
