package engine

// main_test.go: TestMain (the ABI handshake with the shim: a stale build folder fails here,
// at once, with the shim's message) and small helpers shared by the numerical tests:
// unwrapping (value, error) pairs, scopes, Go-side float64 matrices, and a cache of the
// real-MNIST datasets built by testdata_test.go.

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/devicetest"
	"github.com/ldtorch/ldtorch/torch/dist"
)

func TestMain(m *testing.M) {
	info, err := torch.RuntimeInfo()
	if err != nil {
		fmt.Fprintln(os.Stderr, "labeldistill tests:", err)
		os.Exit(1)
	}
	flag.Parse()
	devicetest.GuardConvolutions("labeldistill", testing.Verbose())
	if testing.Verbose() {
		fmt.Printf("libtorch %s, %s, threads %d\n", info.TorchVersion, info.Build, info.Threads)
	}
	os.Exit(m.Run())
}

// tNeed unwraps (v, err), stopping the test on err.
func tNeed[V any](tb testing.TB) func(V, error) V {
	return func(v V, err error) V {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
		return v
	}
}

// tT is tNeed for tensors.
func tT(tb testing.TB) func(*torch.Tensor, error) *torch.Tensor { return tNeed[*torch.Tensor](tb) }

func tOK(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// tJoinRank joins the data-parallel group described by the environment (a child process
// that dist.Launch started as one rank of a test); the test's cleanup closes it.
func tJoinRank(tb testing.TB) *dist.Group {
	tb.Helper()
	cfg, ok, err := dist.FromEnv()
	if err != nil || !ok {
		tb.Fatalf("rank environment: %v (set: %v)", err, ok)
	}
	g, err := dist.Init(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(g.Close)
	return g
}

// tScope opens a Scope that the test's cleanup closes.
func tScope(tb testing.TB) *torch.Scope {
	s := torch.NewScope()
	tb.Cleanup(s.Close)
	return s
}

// tVals copies a tensor out as float64.
func tVals(tb testing.TB, t *torch.Tensor) []float64 {
	tb.Helper()
	return tNeed[[]float64](tb)(t.Float64s())
}

func tRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x6a09e667f3bcc909)) }

// oneThread pins libtorch to one intra-op thread for the test (reproducibility) and
// restores the previous setting afterwards.
func oneThread(tb testing.TB) {
	prev := torch.NumThreads()
	tOK(tb, torch.SetNumThreads(1))
	tb.Cleanup(func() { _ = torch.SetNumThreads(prev) })
}

var (
	mnistMu    sync.Mutex
	mnistCache = map[[4]int]*Data{}
)

// ---- float64 dense matrices in Go, independent of libtorch ----------------------------------

// mat is a row-major r×c float64 matrix.
type mat struct {
	r, c int
	v    []float64
}

func newMat(r, c int) mat             { return mat{r, c, make([]float64, r*c)} }
func (m mat) at(i, j int) float64     { return m.v[i*m.c+j] }
func (m mat) set(i, j int, x float64) { m.v[i*m.c+j] = x }
func (m mat) tensor(tb testing.TB) *torch.Tensor {
	tb.Helper()
	return tT(tb)(torch.FromFloat64(m.v, int64(m.r), int64(m.c)))
}

func (m mat) t() mat {
	o := newMat(m.c, m.r)
	for i := 0; i < m.r; i++ {
		for j := 0; j < m.c; j++ {
			o.set(j, i, m.at(i, j))
		}
	}
	return o
}

func (m mat) mul(o mat) mat {
	if m.c != o.r {
		panic("mat: shape mismatch")
	}
	p := newMat(m.r, o.c)
	for i := 0; i < m.r; i++ {
		for k := 0; k < m.c; k++ {
			a := m.at(i, k)
			for j := 0; j < o.c; j++ {
				p.v[i*p.c+j] += a * o.at(k, j)
			}
		}
	}
	return p
}

// plusDiag returns m + λI (m square).
func (m mat) plusDiag(lambda float64) mat {
	o := mat{m.r, m.c, append([]float64(nil), m.v...)}
	for i := 0; i < m.r; i++ {
		o.v[i*m.c+i] += lambda
	}
	return o
}

// inv is Gauss–Jordan elimination with partial pivoting.
func (m mat) inv() mat {
	n := m.r
	a := mat{n, n, append([]float64(nil), m.v...)}
	b := newMat(n, n)
	for i := 0; i < n; i++ {
		b.set(i, i, 1)
	}
	for col := 0; col < n; col++ {
		p := col
		for i := col + 1; i < n; i++ {
			if math.Abs(a.at(i, col)) > math.Abs(a.at(p, col)) {
				p = i
			}
		}
		for j := 0; j < n; j++ {
			a.v[col*n+j], a.v[p*n+j] = a.v[p*n+j], a.v[col*n+j]
			b.v[col*n+j], b.v[p*n+j] = b.v[p*n+j], b.v[col*n+j]
		}
		d := a.at(col, col)
		for j := 0; j < n; j++ {
			a.v[col*n+j] /= d
			b.v[col*n+j] /= d
		}
		for i := 0; i < n; i++ {
			if i == col {
				continue
			}
			f := a.at(i, col)
			if f == 0 {
				continue
			}
			for j := 0; j < n; j++ {
				a.v[i*n+j] -= f * a.at(col, j)
				b.v[i*n+j] -= f * b.at(col, j)
			}
		}
	}
	return b
}

// ridgeDual is Zᵀ (Z Zᵀ + λI)⁻¹ Y with an explicit inverse; ridgePrimal is the primal
// form (ZᵀZ + λI)⁻¹ Zᵀ Y. They agree by the Woodbury identity.
func ridgeDual(z, y mat, lambda float64) mat {
	return z.t().mul(z.mul(z.t()).plusDiag(lambda).inv()).mul(y)
}

func ridgePrimal(z, y mat, lambda float64) mat {
	return z.t().mul(z).plusDiag(lambda).inv().mul(z.t().mul(y))
}

// maxAbsDiff returns max |a − b| and max |b|.
func maxAbsDiff(a, b []float64) (diff, scale float64) {
	if len(a) != len(b) {
		return math.Inf(1), 0
	}
	for i := range a {
		diff = max(diff, math.Abs(a[i]-b[i]))
		scale = max(scale, math.Abs(b[i]))
	}
	return diff, scale
}

// testDevice is where the device-parametrised tests run (devicetest.Device).
func testDevice(tb testing.TB) torch.Device { return devicetest.Device(tb) }
