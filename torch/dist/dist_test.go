package dist

// Ranks are processes: libtorch's state (threads, allocator, Gloo's device) is per process,
// so these tests start the test binary itself once per rank through Launch, with
// LDTORCH_DIST_TEST_WORKER naming what the rank does (TestMain runs it instead of the
// tests). Everything stays on 127.0.0.1.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ldtorch/ldtorch/torch"
)

const workerVar = "LDTORCH_DIST_TEST_WORKER"

func TestMain(m *testing.M) {
	if w := os.Getenv(workerVar); w != "" {
		os.Exit(runWorker(w))
	}
	if _, err := torch.RuntimeInfo(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// runWorker is one rank of a scenario; its exit status and stderr are the result.
func runWorker(scenario string) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "worker: "+format+"\n", a...)
		return 2
	}
	cfg, ok, err := FromEnv()
	if err != nil || !ok {
		return fail("environment: ok=%v err=%v", ok, err)
	}
	if scenario == "join" { // join and leave; signals end the wait
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		g, err := InitContext(ctx, cfg)
		if err != nil {
			fmt.Fprintf(os.Stderr, "join: %v\n", err)
			if errors.Is(err, context.Canceled) {
				return 130
			}
			return 5
		}
		g.Close()
		return 0
	}
	g, err := Init(cfg)
	if err != nil {
		return fail("init: %v", err)
	}
	defer g.Close()
	r, n := g.Rank(), g.Size()
	switch scenario {
	case "collectives":
		if !signal.Ignored(syscall.SIGPIPE) {
			return fail("SIGPIPE is not ignored in a member of a group")
		}
		// all-reduce: rank r contributes (r+1)*[1 2 3]
		x := torch.Must(torch.FromFloat32([]float32{float32(r + 1), float32(2 * (r + 1)), float32(3 * (r + 1))}, 3))
		if err := g.AllReduceSum(x); err != nil {
			return fail("all-reduce: %v", err)
		}
		s := float32(n * (n + 1) / 2)
		if got := torch.Must(x.Float32s()); got[0] != s || got[1] != 2*s || got[2] != 3*s {
			return fail("all-reduce gave %v, want %v·[1 2 3]", got, s)
		}
		// broadcast from the last rank
		y := torch.Must(torch.FromFloat64([]float64{float64(r), -float64(r)}, 2))
		if err := g.Broadcast(n-1, y); err != nil {
			return fail("broadcast: %v", err)
		}
		if got := torch.Must(y.Float64s()); got[0] != float64(n-1) || got[1] != -float64(n-1) {
			return fail("broadcast gave %v, want rank %d's", got, n-1)
		}
		xs := []float64{1, float64(r)}
		if err := g.SumFloat64s(xs); err != nil {
			return fail("sum: %v", err)
		}
		if xs[0] != float64(n) || xs[1] != float64(n*(n-1)/2) {
			return fail("SumFloat64s gave %v", xs)
		}
		if err := g.Barrier(); err != nil {
			return fail("barrier: %v", err)
		}
		// two all-reduces started, a blocking one between them, both waited for after:
		// each sum lands in its own tensor
		a := torch.Must(torch.FromFloat32([]float32{float32(r + 1), 1}, 2))
		b := torch.Must(torch.FromFloat64([]float64{float64(10 * (r + 1))}, 1))
		pa, err := g.StartAllReduceSum(a)
		if err != nil {
			return fail("start: %v", err)
		}
		between := []float64{float64(r)}
		if err := g.SumFloat64s(between); err != nil {
			return fail("sum between started ones: %v", err)
		}
		pb, err := g.StartAllReduceSum(b)
		if err != nil {
			return fail("start: %v", err)
		}
		if err := pb.Wait(); err != nil {
			return fail("wait: %v", err)
		}
		if err := pa.Wait(); err != nil {
			return fail("wait: %v", err)
		}
		if got := torch.Must(a.Float32s()); got[0] != s || got[1] != float32(n) {
			return fail("started all-reduce gave %v, want [%v %v]", got, s, n)
		}
		if got := torch.Must(b.Float64s()); got[0] != 10*float64(s) || between[0] != float64(n*(n-1)/2) {
			return fail("started all-reduce gave %v (want %v), the one between %v", got, 10*s, between)
		}
		if err := pa.Wait(); err == nil || !strings.Contains(err.Error(), "already waited") {
			return fail("a second Wait: %v", err)
		}
		return 0
	case "late-peer":
		// rank 1 reaches the all-reduce 1.5 s after rank 0, which prints the CPU time it
		// spent waiting
		x := torch.Must(torch.Zeros([]int64{8}, torch.WithDType(torch.Double)))
		if r == 1 {
			time.Sleep(1500 * time.Millisecond)
		}
		before := cpuTime()
		if err := g.AllReduceSum(x); err != nil {
			return fail("all-reduce: %v", err)
		}
		if r == 0 {
			fmt.Printf("cpu %d ns\n", (cpuTime() - before).Nanoseconds())
		}
		return 0
	case "latency":
		// back-to-back all-reduces of one meta-step's buffer (N×C = 100×10 label gradients
		// plus loss and error, float64); rank 0 prints the median
		x := torch.Must(torch.Zeros([]int64{1002}, torch.WithDType(torch.Double)))
		var times []time.Duration
		for i := 0; i < 230; i++ {
			t0 := time.Now()
			if err := g.AllReduceSum(x); err != nil {
				return fail("all-reduce %d: %v", i, err)
			}
			if i >= 30 {
				times = append(times, time.Since(t0))
			}
		}
		slices.Sort(times)
		if r == 0 {
			fmt.Printf("median %d ns p90 %d ns\n", times[len(times)/2].Nanoseconds(), times[len(times)*9/10].Nanoseconds())
		}
		return 0
	case "killed", "hung", "abort", "interrupted", "root-killed":
		if err := g.Barrier(); err != nil {
			return fail("first barrier: %v", err)
		}
		culprit := 1
		if scenario == "root-killed" {
			culprit = 0
		}
		if r == culprit {
			switch scenario {
			case "killed", "root-killed":
				p, _ := os.FindProcess(os.Getpid())
				_ = p.Kill() // SIGKILL: no chance to say anything
			case "hung":
				time.Sleep(time.Hour)
			case "abort":
				g.Abort(errors.New("disk full"))
				return 3
			case "interrupted":
				g.Abort(fmt.Errorf("meta-step 7: %w", context.Canceled))
				return 130
			}
		}
		x := torch.Must(torch.FromFloat32([]float32{1}, 1))
		err := g.AllReduceSum(x)
		var re *RankError
		if !errors.As(err, &re) {
			return fail("all-reduce after rank 1 left: want a RankError, got %v", err)
		}
		fmt.Fprintf(os.Stderr, "rank %d: %v\n", r, err)
		if len(re.Culprit) != 1 || re.Culprit[0] != culprit {
			return fail("the error names ranks %v, want [%d]", re.Culprit, culprit)
		}
		if re.Interrupted != (scenario == "interrupted") {
			return fail("Interrupted is %v in %v", re.Interrupted, err)
		}
		return 4 // the expected failure
	}
	return fail("unknown scenario %q", scenario)
}

func launch(t *testing.T, scenario string, n int, timeout time.Duration, extraEnv ...string) (error, string, time.Duration) {
	t.Helper()
	if !torch.DistributedAvailable() {
		t.Fatal("the shim was built without c10d/Gloo (libgloo-dev missing at build time?)")
	}
	var out lockedBuffer
	env := append(os.Environ(), workerVar+"="+scenario, "OMP_NUM_THREADS=1")
	env = append(env, extraEnv...)
	start := time.Now()
	err := Launch(context.Background(), LaunchOptions{
		N: n, Path: os.Args[0], Env: env, Stdout: &out, Stderr: &out, Timeout: timeout,
	})
	return err, out.String(), time.Since(start)
}

// lockedBuffer collects the output of several processes (exec copies each one's output
// on its own goroutine).
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Both ways of waiting for a collective: polling first (the default) and sleeping at once.
func TestCollectivesTwoRanks(t *testing.T) {
	for _, spin := range []string{"", "0"} {
		if err, out, _ := launch(t, "collectives", 2, 30*time.Second, "LDTORCH_DIST_SPIN="+spin); err != nil {
			t.Fatalf("LDTORCH_DIST_SPIN=%q: %v\n%s", spin, err, out)
		}
	}
}

func TestCollectivesThreeRanks(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	if err, out, _ := launch(t, "collectives", 3, 30*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// The all-reduce of one meta-step's buffer between two processes: its latency (logged),
// polling first (the default) and sleeping at once.
func TestAllReduceLatency(t *testing.T) {
	for _, spin := range []string{"", "0"} {
		err, out, _ := launch(t, "latency", 2, 30*time.Second, "LDTORCH_DIST_SPIN="+spin)
		if err != nil {
			t.Fatalf("LDTORCH_DIST_SPIN=%q: %v\n%s", spin, err, out)
		}
		var med, p90 int64
		if _, err := fmt.Sscanf(strings.TrimSpace(out), "median %d ns p90 %d ns", &med, &p90); err != nil {
			t.Fatalf("cannot read %q: %v", out, err)
		}
		t.Logf("LDTORCH_DIST_SPIN=%q: 1002 float64 all-reduce between 2 local processes: median %.3f ms, p90 %.3f ms (200 calls)",
			spin, float64(med)/1e6, float64(p90)/1e6)
		if med > int64(100*time.Millisecond) {
			t.Errorf("median all-reduce %.1f ms: something is wrong (expected well under a millisecond on an idle machine)", float64(med)/1e6)
		}
	}
}

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// A killed rank: the survivor's all-reduce fails (connection closed) and names rank 1.
func TestKilledRankFailsOthers(t *testing.T) {
	err, out, took := launch(t, "killed", 2, 20*time.Second)
	checkFailure(t, err, out, took, 15*time.Second, "was killed by signal killed")
}

// Rank 0, which hosts the store, killed: the survivor names it from the store's absence.
func TestKilledStoreHostFailsOthers(t *testing.T) {
	err, out, took := launch(t, "root-killed", 2, 20*time.Second)
	var re *RankExit
	if !errors.As(err, &re) || re.Rank != 0 {
		t.Fatalf("Launch: want rank 0's exit first, got %v\n%s", err, out)
	}
	if strings.Contains(out, "worker:") || !strings.Contains(out, "rank 1: dist: rank 1: rank 0 exited or died") {
		t.Errorf("rank 1 did not name rank 0:\n%s", out)
	}
	if took > 15*time.Second {
		t.Errorf("took %v", took)
	}
	t.Logf("%v after %v; %s", err, took.Round(time.Millisecond), strings.TrimSpace(out))
}

// A rank that fails on its own tells the others why.
func TestAbortNamesRankAndReason(t *testing.T) {
	err, out, took := launch(t, "abort", 2, 20*time.Second)
	checkFailure(t, err, out, took, 15*time.Second, "") // rank 0 may exit first: rank 1 leaves after Close
	if !strings.Contains(out, "rank 1 failed: disk full") {
		t.Errorf("the survivor's message does not carry rank 1's reason:\n%s", out)
	}
}

// A rank that stops on its cancelled context is named as interrupted, not as failed.
func TestAbortInterrupted(t *testing.T) {
	err, out, took := launch(t, "interrupted", 2, 20*time.Second)
	checkFailure(t, err, out, took, 15*time.Second, "")
	if !strings.Contains(out, "rank 1 was interrupted") {
		t.Errorf("the survivor's message does not say rank 1 was interrupted:\n%s", out)
	}
}

func checkFailure(t *testing.T, err error, out string, took, limit time.Duration, firstExit string) {
	t.Helper()
	var re *RankExit
	if !errors.As(err, &re) {
		t.Fatalf("Launch: want a RankExit, got %v\n%s", err, out)
	}
	if firstExit != "" && (re.Rank != 1 || !strings.Contains(re.Error(), firstExit)) {
		t.Errorf("first failure: %v, want rank 1 %s", re, firstExit)
	}
	if strings.Contains(out, "worker:") {
		t.Errorf("a rank did not fail as expected:\n%s", out)
	}
	if !strings.Contains(out, "rank 0: dist: rank 0: rank 1 ") {
		t.Errorf("rank 0 did not name rank 1:\n%s", out)
	}
	if took > limit {
		t.Errorf("took %v, want under %v", took, limit)
	}
	t.Logf("%v after %v; rank 0 said: %s", err, took.Round(time.Millisecond), strings.TrimSpace(out))
}

// A rank whose peers never come fails within the timeout instead of waiting forever.
func TestInitTimesOut(t *testing.T) {
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = Init(Config{Addr: "127.0.0.1", Port: port, Rank: 0, WorldSize: 2, Timeout: 2 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "could not join") {
		t.Fatalf("want a join error, got %v", err)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("took %v for a 2 s timeout", took)
	}
	t.Log(err)
}

func TestFromEnv(t *testing.T) {
	env := func(kv ...string) func(string) (string, bool) {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	if _, ok, err := fromLookup(env()); ok || err != nil {
		t.Errorf("no WORLD_SIZE: ok=%v err=%v", ok, err)
	}
	if _, ok, err := fromLookup(env("RANK", "", "MASTER_ADDR", "x")); ok || err != nil {
		t.Errorf("RANK empty, no WORLD_SIZE: ok=%v err=%v", ok, err)
	}
	if cfg, _, err := fromLookup(env("WORLD_SIZE", "1", "RANK", "0", "LDTORCH_DIST_TIMEOUT", " 168h ")); err != nil || cfg.Timeout != MaxTimeout {
		t.Errorf("LDTORCH_DIST_TIMEOUT at the limit: %v, %v", cfg.Timeout, err)
	}
	for v, want := range map[string]time.Duration{"": DefaultSpinWait, "0": 0, " 1s ": MaxSpinWait, "250us": 250 * time.Microsecond} {
		if cfg, _, err := fromLookup(env("WORLD_SIZE", "1", "RANK", "0", "LDTORCH_DIST_SPIN", v)); err != nil || cfg.SpinWait != want {
			t.Errorf("LDTORCH_DIST_SPIN=%q: %v, %v; want %v", v, cfg.SpinWait, err, want)
		}
	}
	// more ranks on this machine than cores: sleep at once unless told otherwise
	over := strconv.Itoa(runtime.NumCPU() + 1)
	for _, c := range []struct {
		kv   []string
		want time.Duration
	}{
		{[]string{"WORLD_SIZE", over, "RANK", "0", "MASTER_ADDR", "x", "MASTER_PORT", "1"}, 0},
		{[]string{"WORLD_SIZE", over, "RANK", "0", "LOCAL_WORLD_SIZE", "1", "MASTER_ADDR", "x", "MASTER_PORT", "1"}, DefaultSpinWait},
		{[]string{"WORLD_SIZE", "1", "RANK", "0", "LOCAL_WORLD_SIZE", over}, 0},
		{[]string{"WORLD_SIZE", "1", "RANK", "0", "LOCAL_WORLD_SIZE", over, "LDTORCH_DIST_SPIN", "5ms"}, 5 * time.Millisecond},
	} {
		if cfg, _, err := fromLookup(env(c.kv...)); err != nil || cfg.SpinWait != c.want {
			t.Errorf("%v: spin %v, %v; want %v", c.kv, cfg.SpinWait, err, c.want)
		}
	}
	cfg, ok, err := fromLookup(env("WORLD_SIZE", "4", "RANK", "2", "LOCAL_RANK", "0", "MASTER_ADDR", "10.0.0.1",
		"MASTER_PORT", "29500", "TORCHELASTIC_USE_AGENT_STORE", "True", "TORCHELASTIC_RESTART_COUNT", "1",
		"LDTORCH_DIST_TIMEOUT", "90s", "LDTORCH_DIST_SPIN", "500us"))
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	want := Config{Addr: "10.0.0.1", Port: 29500, Rank: 2, WorldSize: 4, LocalRank: 0, AgentStore: true, Attempt: 1,
		Timeout: 90 * time.Second, SpinWait: 500 * time.Microsecond}
	if cfg != want {
		t.Errorf("got %+v, want %+v", cfg, want)
	}
	for _, bad := range []struct {
		kv   []string
		want string
	}{
		{[]string{"WORLD_SIZE", "2", "MASTER_ADDR", "x", "MASTER_PORT", "1"}, "RANK is not set"},
		{[]string{"RANK", "1", "MASTER_ADDR", "x", "MASTER_PORT", "1"}, "WORLD_SIZE is not set (RANK=1 is)"},
		{[]string{"WORLD_SIZE", "1", "RANK", "0", "LDTORCH_DIST_TIMEOUT", "abc"}, `LDTORCH_DIST_TIMEOUT="abc" is not a positive duration`},
		{[]string{"WORLD_SIZE", "1", "RANK", "0", "LDTORCH_DIST_TIMEOUT", "-1"}, `LDTORCH_DIST_TIMEOUT="-1"`},
		{[]string{"WORLD_SIZE", "1", "RANK", "0", "LDTORCH_DIST_TIMEOUT", "0"}, `LDTORCH_DIST_TIMEOUT="0"`},
		{[]string{"WORLD_SIZE", "1", "RANK", "0", "LDTORCH_DIST_TIMEOUT", "-5s"}, `LDTORCH_DIST_TIMEOUT="-5s"`},
		{[]string{"WORLD_SIZE", "1", "RANK", "0", "LDTORCH_DIST_TIMEOUT", "1e99"}, `LDTORCH_DIST_TIMEOUT="1e99"`},
		{[]string{"WORLD_SIZE", "1", "RANK", "0", "LDTORCH_DIST_TIMEOUT", "1e99s"}, `LDTORCH_DIST_TIMEOUT="1e99s"`},
		{[]string{"WORLD_SIZE", "1", "RANK", "0", "LDTORCH_DIST_TIMEOUT", "200h"}, "longer than the limit of 168h"},
		{[]string{"WORLD_SIZE", "2", "RANK", "2", "MASTER_ADDR", "x", "MASTER_PORT", "1"}, "RANK=2 is outside 0..1"},
		{[]string{"WORLD_SIZE", "two", "RANK", "0"}, `WORLD_SIZE="two"`},
		{[]string{"WORLD_SIZE", "2", "RANK", "0", "MASTER_PORT", "1"}, "MASTER_ADDR is not set"},
		{[]string{"WORLD_SIZE", "2", "RANK", "0", "MASTER_ADDR", "x", "MASTER_PORT", "70000"}, "MASTER_PORT=70000"},
		{[]string{"WORLD_SIZE", "1", "RANK", "0", "LDTORCH_DIST_TIMEOUT", "soon"}, "LDTORCH_DIST_TIMEOUT"},
		{[]string{"WORLD_SIZE", "1", "RANK", "0", "LDTORCH_DIST_SPIN", "-1ms"}, `LDTORCH_DIST_SPIN="-1ms" is not a duration of 0 or more`},
		{[]string{"WORLD_SIZE", "1", "RANK", "0", "LDTORCH_DIST_SPIN", "2"}, `LDTORCH_DIST_SPIN="2"`},
		{[]string{"WORLD_SIZE", "1", "RANK", "0", "LDTORCH_DIST_SPIN", "fast"}, `LDTORCH_DIST_SPIN="fast"`},
		{[]string{"WORLD_SIZE", "1", "RANK", "0", "LDTORCH_DIST_SPIN", "2s"}, "longer than the limit of 1s"},
		{[]string{"WORLD_SIZE", "1", "RANK", "0", "LOCAL_WORLD_SIZE", "many"}, `LOCAL_WORLD_SIZE="many" is not an integer`},
	} {
		if _, _, err := fromLookup(env(bad.kv...)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%v: got %v, want an error with %q", bad.kv, err, bad.want)
		}
	}
}

// Under torchrun the agent hosts the store and every rank is a client, with its keys under
// /worker/attempt_<restart count>. Here this test process plays the agent: it hosts a
// TCPStore (as rank 0 of a group of one) and starts two ranks with torchrun's variables.
func TestAgentStore(t *testing.T) {
	if !torch.DistributedAvailable() {
		t.Fatal("no c10d/Gloo in this shim")
	}
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	agent, err := torch.NewProcessGroup(torch.ProcessGroupOptions{Addr: "127.0.0.1", Port: port, Rank: 0, WorldSize: 1,
		BindHost: "127.0.0.1", Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	var out lockedBuffer
	cmds := make([]*exec.Cmd, 2)
	for r := range cmds {
		c := exec.Command(os.Args[0])
		c.Env = append(withoutDistVars(os.Environ()), workerVar+"=collectives", "OMP_NUM_THREADS=1",
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+strconv.Itoa(port), "WORLD_SIZE=2", "RANK="+strconv.Itoa(r),
			"LOCAL_RANK="+strconv.Itoa(r), "TORCHELASTIC_USE_AGENT_STORE=True", "TORCHELASTIC_RESTART_COUNT=3",
			"LDTORCH_DIST_TIMEOUT=30s")
		c.Stdout, c.Stderr = &out, &out
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[r] = c
	}
	for r, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	if t.Failed() {
		t.Fatalf("output:\n%s", out.String())
	}
	// The ranks met under the attempt's prefix in the agent's store: Gloo's rendezvous keys
	// <prefix>/<device>/<rank>.
	for _, k := range []string{"/worker/attempt_3/0/0", "/worker/attempt_3/0/1"} {
		if ok, err := agent.StoreCheck(k); err != nil || !ok {
			t.Errorf("no key %s in the agent's store (found %v, %v)", k, ok, err)
		}
	}
}

// Misuse of a closed group returns errors, never crashes.
func TestClosedGroup(t *testing.T) {
	if !torch.DistributedAvailable() {
		t.Fatal("no c10d/Gloo in this shim")
	}
	var pg *torch.ProcessGroup
	if err := pg.Barrier(); err == nil {
		t.Error("Barrier on a nil group: no error")
	}
	if _, err := pg.StartAllReduceSum(torch.Must(torch.Zeros([]int64{2}))); err == nil {
		t.Error("StartAllReduceSum on a nil group: no error")
	}
	var pending *torch.PendingAllReduce
	if err := pending.Wait(); err == nil || !strings.Contains(err.Error(), "no all-reduce to wait for") {
		t.Errorf("Wait with nothing started: %v", err)
	}
	pg.Close()
	if _, err := torch.NewProcessGroup(torch.ProcessGroupOptions{Addr: "127.0.0.1", Port: 1, Rank: 3, WorldSize: 2, Timeout: time.Second}); err == nil || !strings.Contains(err.Error(), "rank 3 is outside") {
		t.Errorf("bad rank: %v", err)
	}
}
