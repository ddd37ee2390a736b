package atentest_test

// interop_test.go: torch.FromATen and (*torch.Tensor).ToATen against the stand-in binding:
// shared storage both ways, freeing on both sides in both orders, autograd across the
// boundary, scopes, finalizers, concurrency, refused pointers, and a GPU tensor (skipped
// without CUDA). CI runs it under the race detector with GODEBUG=cgocheck=1 as well.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/internal/atentest"
)

func TestMain(m *testing.M) {
	if _, err := torch.RuntimeInfo(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func must[V any](tb testing.TB) func(V, error) V {
	return func(v V, err error) V {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
		return v
	}
}

func values(tb testing.TB, x *torch.Tensor) []float32 {
	tb.Helper()
	return must[[]float32](tb)(x.Float32s())
}

func wantValues(tb testing.TB, x *torch.Tensor, want ...float32) {
	tb.Helper()
	got := values(tb, x)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		tb.Fatalf("values %v, want %v", got, want)
	}
}

// Theirs → ours: the same memory, written through either side and read through the other.
func TestFromATenSharesStorage(t *testing.T) {
	theirs := must[atentest.Tensor](t)(atentest.Arange(4, false))
	defer theirs.Free()
	ours := must[*torch.Tensor](t)(torch.FromATen(theirs.Ptr()))
	defer ours.Free()
	if got := theirs.UseCount(); got != 2 {
		t.Fatalf("use count %d after FromATen, want 2 (one reference each, no copy)", got)
	}
	if ours.DType() != torch.Float || fmt.Sprint(ours.Shape()) != "[4]" || ours.Device() != torch.CPU {
		t.Fatalf("FromATen gave %v", ours)
	}
	wantValues(t, ours, 0, 1, 2, 3)
	if err := theirs.Set(1, 10); err != nil {
		t.Fatal(err)
	}
	wantValues(t, ours, 0, 10, 2, 3)
	if err := ours.MulScalar_(2); err != nil {
		t.Fatal(err)
	}
	if got := theirs.Get(3); got != 6 {
		t.Fatalf("their element 3 = %v after our in-place ×2, want 6", got)
	}
	back := atentest.Wrap(must[unsafe.Pointer](t)(ours.ToATen()))
	defer back.Free()
	if !atentest.SameData(theirs, back) {
		t.Fatal("FromATen then ToATen does not view the original memory")
	}
}

// Ours → theirs: ToATen hands a new at::Tensor on the same memory.
func TestToATenSharesStorage(t *testing.T) {
	ours := must[*torch.Tensor](t)(torch.FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3))
	defer ours.Free()
	theirs := atentest.Wrap(must[unsafe.Pointer](t)(ours.ToATen()))
	defer theirs.Free()
	if got := theirs.UseCount(); got != 2 {
		t.Fatalf("use count %d after ToATen, want 2", got)
	}
	if got := theirs.Get(5); got != 6 {
		t.Fatalf("their element 5 = %v, want 6", got)
	}
	if err := theirs.Set(0, -1); err != nil {
		t.Fatal(err)
	}
	wantValues(t, ours, -1, 2, 3, 4, 5, 6)
	if err := ours.Fill_(7); err != nil {
		t.Fatal(err)
	}
	if got := theirs.Get(4); got != 7 {
		t.Fatalf("their element 4 = %v after our fill, want 7", got)
	}
}

// Each side frees its own handle, in either order; the storage lives until the last one
// goes. A third handle (probe) watches the reference count.
func TestFreeBothSidesBothOrders(t *testing.T) {
	for _, dir := range []string{"from", "to"} {
		for _, oursFirst := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/ours-first=%v", dir, oursFirst), func(t *testing.T) {
				var ours *torch.Tensor
				var theirs atentest.Tensor
				if dir == "from" {
					theirs = must[atentest.Tensor](t)(atentest.Arange(3, false))
					ours = must[*torch.Tensor](t)(torch.FromATen(theirs.Ptr()))
				} else {
					ours = must[*torch.Tensor](t)(torch.FromFloat32([]float32{0, 1, 2}, 3))
					theirs = atentest.Wrap(must[unsafe.Pointer](t)(ours.ToATen()))
				}
				probe := atentest.Wrap(must[unsafe.Pointer](t)(ours.ToATen()))
				defer probe.Free()
				if got := probe.UseCount(); got != 3 {
					t.Fatalf("use count %d, want 3", got)
				}
				deleted := atentest.Deleted()
				if oursFirst {
					ours.Free()
					if _, err := ours.Float32s(); !errors.Is(err, torch.ErrFreed) {
						t.Fatalf("our freed tensor: %v", err)
					}
					if got := theirs.Get(2); got != 2 {
						t.Fatalf("their element 2 = %v after we freed ours", got)
					}
					theirs.Free()
				} else {
					theirs.Free()
					wantValues(t, ours, 0, 1, 2)
					ours.Free()
				}
				if got := atentest.Deleted() - deleted; got != 1 {
					t.Fatalf("the stand-in deleted %d at::Tensors, want 1", got)
				}
				if got := probe.UseCount(); got != 1 {
					t.Fatalf("use count %d after both sides freed theirs, want 1 (the probe)", got)
				}
				if got := probe.Get(1); got != 1 {
					t.Fatalf("probe element 1 = %v", got)
				}
			})
		}
	}
}

// Our Scope frees ours, never theirs; what ToATen hands out is not ours to free.
func TestScopes(t *testing.T) {
	theirs := must[atentest.Tensor](t)(atentest.Arange(2, false))
	defer theirs.Free()
	var handed unsafe.Pointer
	err := torch.WithScope(func(s *torch.Scope) error {
		ours, err := torch.FromATen(theirs.Ptr())
		if err != nil {
			return err
		}
		if theirs.UseCount() != 2 {
			return fmt.Errorf("use count %d inside the scope", theirs.UseCount())
		}
		x, err := torch.FromFloat32([]float32{5, 6}, 2)
		if err != nil {
			return err
		}
		handed, err = x.ToATen()
		_ = ours
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := theirs.UseCount(); got != 1 {
		t.Fatalf("use count %d after the scope closed, want 1 (ours freed, theirs kept)", got)
	}
	h := atentest.Wrap(handed)
	defer h.Free()
	if got := h.UseCount(); got != 1 {
		t.Fatalf("use count of the handed tensor %d after its scope closed, want 1", got)
	}
	if h.Get(0) != 5 || h.Get(1) != 6 {
		t.Fatalf("handed tensor reads %v %v", h.Get(0), h.Get(1))
	}
}

// A handed-out at::Tensor freed by the other binding's garbage collection (gotorch's way).
func TestFinalizerFreesHanded(t *testing.T) {
	ours := must[*torch.Tensor](t)(torch.FromFloat32([]float32{1, 2}, 2))
	defer ours.Free()
	deleted := atentest.Deleted()
	func() {
		h := atentest.Wrap(must[unsafe.Pointer](t)(ours.ToATen()))
		_ = h.Get(0)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for atentest.Deleted() == deleted {
		if time.Now().After(deadline) {
			t.Fatal("the stand-in's finalizer never ran")
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	wantValues(t, ours, 1, 2)
}

// Autograd across the boundary: requires-grad, gradients and graphs are shared.
func TestAutogradAcross(t *testing.T) {
	t.Run("their leaf, our backward", func(t *testing.T) {
		leaf := must[atentest.Tensor](t)(atentest.Arange(3, false))
		defer leaf.Free()
		if err := leaf.SetRequiresGrad(true); err != nil {
			t.Fatal(err)
		}
		x := must[*torch.Tensor](t)(torch.FromATen(leaf.Ptr()))
		defer x.Free()
		if !x.RequiresGrad() || !x.IsLeaf() {
			t.Fatalf("requires grad %v, leaf %v", x.RequiresGrad(), x.IsLeaf())
		}
		y := must[*torch.Tensor](t)(x.Square())
		defer y.Free()
		loss := must[*torch.Tensor](t)(y.Sum())
		defer loss.Free()
		if err := loss.Backward(); err != nil {
			t.Fatal(err)
		}
		g, ok := leaf.Grad()
		if !ok {
			t.Fatal("their leaf has no gradient after our backward")
		}
		defer g.Free()
		for i := int64(0); i < 3; i++ {
			if g.Get(i) != 2*float64(i) {
				t.Fatalf("grad[%d] = %v, want %v", i, g.Get(i), 2*i)
			}
		}
		ours := must[*torch.Tensor](t)(x.Grad())
		defer ours.Free()
		wantValues(t, ours, 0, 2, 4)
	})
	t.Run("our leaf, their op, our backward", func(t *testing.T) {
		x := must[*torch.Tensor](t)(torch.FromFloat32([]float32{1, 2}, 2))
		defer x.Free()
		if err := x.SetRequiresGrad(true); err != nil {
			t.Fatal(err)
		}
		theirs := atentest.Wrap(must[unsafe.Pointer](t)(x.ToATen()))
		defer theirs.Free()
		if !theirs.RequiresGrad() {
			t.Fatal("requires-grad not seen through ToATen")
		}
		p := must[atentest.Tensor](t)(theirs.Mul(3))
		defer p.Free()
		y := must[*torch.Tensor](t)(torch.FromATen(p.Ptr()))
		defer y.Free()
		if y.IsLeaf() || !y.RequiresGrad() {
			t.Fatal("their product should be a non-leaf that requires grad")
		}
		loss := must[*torch.Tensor](t)(y.Sum())
		defer loss.Free()
		if err := loss.Backward(); err != nil {
			t.Fatal(err)
		}
		g := must[*torch.Tensor](t)(x.Grad())
		defer g.Free()
		wantValues(t, g, 3, 3)
	})
	t.Run("our graph, their backward", func(t *testing.T) {
		x := must[*torch.Tensor](t)(torch.FromFloat32([]float32{1, -2}, 2))
		defer x.Free()
		if err := x.SetRequiresGrad(true); err != nil {
			t.Fatal(err)
		}
		y := must[*torch.Tensor](t)(x.Square())
		defer y.Free()
		theirs := atentest.Wrap(must[unsafe.Pointer](t)(y.ToATen()))
		defer theirs.Free()
		if err := theirs.BackwardSum(); err != nil {
			t.Fatal(err)
		}
		g := must[*torch.Tensor](t)(x.Grad())
		defer g.Free()
		wantValues(t, g, 2, -4)
	})
}

// Goroutines share one of their tensors through handles of their own: the reference count
// ends where it started and every read sees the values.
func TestConcurrentHandles(t *testing.T) {
	theirs := must[atentest.Tensor](t)(atentest.Arange(8, false))
	defer theirs.Free()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				x, err := torch.FromATen(theirs.Ptr())
				if err != nil {
					errs <- err
					return
				}
				p, err := x.ToATen()
				if err != nil {
					x.Free()
					errs <- err
					return
				}
				h := atentest.Wrap(p)
				v, err := x.Float32s()
				if i%2 == 0 {
					x.Free()
					h.Free()
				} else {
					h.Free()
					x.Free()
				}
				if err != nil || v[7] != 7 {
					errs <- fmt.Errorf("read %v, %v", v, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := theirs.UseCount(); got != 1 {
		t.Fatalf("use count %d after every goroutine freed its handles, want 1", got)
	}
}

// What can be refused is refused with an error, never a crash.
func TestRefused(t *testing.T) {
	_, err := torch.FromATen(nil)
	if !errors.Is(err, torch.ErrNilATen) {
		t.Fatalf("nil: %v", err)
	}
	var nilT *torch.Tensor
	if _, err := nilT.ToATen(); err == nil {
		t.Fatal("ToATen of a nil tensor succeeded")
	}
	freed := must[*torch.Tensor](t)(torch.FromFloat32([]float32{1}, 1))
	freed.Free()
	if _, err := freed.ToATen(); !errors.Is(err, torch.ErrFreed) {
		t.Fatalf("ToATen of a freed tensor: %v", err)
	}

	real := must[atentest.Tensor](t)(atentest.Arange(2, false))
	defer real.Free()
	undef := must[atentest.Tensor](t)(atentest.Undefined())
	defer undef.Free()
	sparse := must[atentest.Tensor](t)(atentest.Sparse())
	defer sparse.Free()
	cases := []struct {
		name string
		p    unsafe.Pointer
		want string
	}{
		{"misaligned", unsafe.Add(real.Ptr(), 1), "misaligned"},
		{"zeroed block", atentest.Zeroed(), "null TensorImpl"},
		// gotorch's Tensor.T is a pointer to the at::Tensor pointer: passing it instead of *T
		// is one indirection too many.
		{"pointer to the pointer", unsafe.Pointer(real.T), "no vtable in any loaded library"},
		{"other library's object", atentest.NotATensor(), "not an at::Tensor of this binding's libtorch"},
		{"undefined", undef.Ptr(), "undefined at::Tensor"},
		{"sparse", sparse.Ptr(), "only dense (strided) tensors"},
	}
	for _, c := range cases {
		x, err := torch.FromATen(c.p)
		if err == nil {
			x.Free()
			t.Errorf("%s: accepted", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q, want it to mention %q", c.name, err, c.want)
		}
		t.Logf("%s: %v", c.name, err)
	}
	if got := real.UseCount(); got != 1 {
		t.Fatalf("use count %d after refusals", got)
	}
}

// A process with two files named libc10.so* loaded is refused both ways. The second "copy"
// is the stand-in library under that name, loaded in a child process (the check goes by
// file name; a real second libc10 is not loadable beside Debian's, whose gflags flags stop
// the process at load).
func TestTwoLibc10Refused(t *testing.T) {
	if second := os.Getenv("LDTORCH_ATENTEST_SECOND_C10"); second != "" {
		theirs := must[atentest.Tensor](t)(atentest.Arange(2, false))
		defer theirs.Free()
		ours := must[*torch.Tensor](t)(torch.FromFloat32([]float32{1}, 1))
		defer ours.Free()
		if err := atentest.Dlopen(second); err != nil {
			t.Fatal(err)
		}
		_, err1 := torch.FromATen(theirs.Ptr())
		_, err2 := ours.ToATen()
		for _, err := range []error{err1, err2} {
			if err == nil || !strings.Contains(err.Error(), "two copies of libtorch are loaded") {
				t.Fatalf("with a second libc10 loaded: %v", err)
			}
			t.Log(err)
		}
		return
	}
	lib, err := os.ReadFile(loadedStandin(t))
	if err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(t.TempDir(), "libc10.so.1")
	if err := os.WriteFile(fake, lib, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestTwoLibc10Refused$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "LDTORCH_ATENTEST_SECOND_C10="+fake)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestTwoLibc10Refused") {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if testing.Verbose() {
		t.Logf("child:\n%s", out)
	}
}

// loadedStandin is the path of the stand-in library this process loaded (the one built
// against the libtorch in use, wherever the loader found it).
func loadedStandin(t *testing.T) string {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(maps), "\n") {
		if i := strings.Index(line, "/"); i >= 0 && strings.HasSuffix(line, "/libldtorch_atentest.so") {
			return line[i:]
		}
	}
	t.Fatal("libldtorch_atentest.so is not in /proc/self/maps")
	return ""
}

// RuntimeInfo names the folder libtorch was loaded from, which the other binding's must
// match.
func TestLibtorchDir(t *testing.T) {
	info := must[torch.Info](t)(torch.RuntimeInfo())
	if info.LibtorchDir == "" || !filepath.IsAbs(info.LibtorchDir) {
		t.Fatalf("LibtorchDir %q", info.LibtorchDir)
	}
	if m, _ := filepath.Glob(filepath.Join(info.LibtorchDir, "libc10*")); len(m) == 0 {
		t.Fatalf("no libc10 in LibtorchDir %s", info.LibtorchDir)
	}
	t.Logf("libtorch %s from %s", info.TorchVersion, info.LibtorchDir)
}

// A GPU tensor crosses as is, both ways (skipped without CUDA).
func TestCUDATensors(t *testing.T) {
	if !torch.CUDAIsAvailable() {
		t.Skip("CUDA not available")
	}
	theirs := must[atentest.Tensor](t)(atentest.Arange(4, true))
	defer theirs.Free()
	ours := must[*torch.Tensor](t)(torch.FromATen(theirs.Ptr()))
	defer ours.Free()
	if ours.Device() != torch.CUDA(0) {
		t.Fatalf("device %v, want cuda:0", ours.Device())
	}
	if err := ours.AddScalar_(1); err != nil {
		t.Fatal(err)
	}
	if got := theirs.Get(3); got != 4 {
		t.Fatalf("their element 3 = %v after our in-place +1 on the GPU", got)
	}
	back := atentest.Wrap(must[unsafe.Pointer](t)(ours.ToATen()))
	defer back.Free()
	if !back.IsCUDA() || !atentest.SameData(theirs, back) {
		t.Fatal("ToATen of a GPU tensor is not the same GPU memory")
	}
}
