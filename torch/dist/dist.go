// Package dist runs one program as several cooperating processes ("ranks") over PyTorch's
// c10d: a Gloo process group whose ranks meet through a c10d TCPStore, configured from the
// environment torchrun sets (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK and
// torchrun's agent store), or started locally by Launch.
//
// libtorch keeps its state per process, so ranks are processes, never goroutines. Every
// collective is bounded by the group's timeout; when one fails, Group names the rank that
// caused it (one that died or hung, or one that reported its own error through Abort), so
// no rank hangs and every message says which rank to look at.
package dist

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ldtorch/ldtorch/torch"
)

// DefaultTimeout bounds the rendezvous and each collective unless Config.Timeout says
// otherwise (LDTORCH_DIST_TIMEOUT, in Go duration syntax, in the environment).
const DefaultTimeout = 5 * time.Minute

// Config says how this process joins its group.
type Config struct {
	Addr      string // the store's host (MASTER_ADDR)
	Port      int    // the store's port (MASTER_PORT)
	Rank      int    // RANK
	WorldSize int    // WORLD_SIZE
	LocalRank int    // LOCAL_RANK (the rank on this machine)
	// AgentStore: connect to the store torchrun's agent already hosts
	// (TORCHELASTIC_USE_AGENT_STORE=True) instead of rank 0 hosting one; keys go under
	// /worker/attempt_<TORCHELASTIC_RESTART_COUNT>, so a restarted attempt starts afresh.
	AgentStore bool
	Attempt    int
	Interface  string        // GLOO_SOCKET_IFNAME, if set
	Timeout    time.Duration // rendezvous and per-collective limit
	SpinWait   time.Duration // LDTORCH_DIST_SPIN: how long a collective's caller polls before it sleeps
}

// FromEnv reads the configuration torchrun (or Launch) puts in the environment. ok is false
// when WORLD_SIZE is not set: the process is not part of a distributed run.
func FromEnv() (cfg Config, ok bool, err error) {
	return fromLookup(os.LookupEnv)
}

// MaxTimeout bounds LDTORCH_DIST_TIMEOUT: a week is longer than any queue wait a rank may
// sit through, and far from the overflow of the deadlines libtorch and Gloo compute from it.
const MaxTimeout = 7 * 24 * time.Hour

// ParseTimeout reads an LDTORCH_DIST_TIMEOUT value: a positive Go duration ("90s", "5m")
// of at most MaxTimeout. The error names the variable and the value.
func ParseTimeout(v string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(v))
	switch {
	case err != nil || d <= 0:
		return 0, fmt.Errorf("dist: LDTORCH_DIST_TIMEOUT=%q is not a positive duration (e.g. 30s or 5m)", v)
	case d > MaxTimeout:
		return 0, fmt.Errorf("dist: LDTORCH_DIST_TIMEOUT=%q is longer than the limit of 168h (a week)", v)
	}
	return d, nil
}

// TimeoutFromEnv is LDTORCH_DIST_TIMEOUT (DefaultTimeout when unset or empty), checked as
// ParseTimeout does; a launcher reads it before starting ranks.
func TimeoutFromEnv() (time.Duration, error) {
	return timeoutFrom(os.LookupEnv)
}

// CheckEnv checks LDTORCH_DIST_TIMEOUT and LDTORCH_DIST_SPIN as every rank will, for a
// launcher to refuse them before it starts ranks that would.
func CheckEnv() error {
	if _, err := TimeoutFromEnv(); err != nil {
		return err
	}
	_, err := spinWaitFrom(os.LookupEnv, 1)
	return err
}

func timeoutFrom(lookup func(string) (string, bool)) (time.Duration, error) {
	v, ok := lookup("LDTORCH_DIST_TIMEOUT")
	if !ok || v == "" {
		return DefaultTimeout, nil
	}
	return ParseTimeout(v)
}

// DefaultSpinWait is how long a rank polls for the end of a collective before it sleeps,
// when this machine has a core for each of its ranks (LOCAL_WORLD_SIZE, or WORLD_SIZE where
// that is not set, ≤ its CPUs; with more ranks than cores a polling rank would hold a core
// a working one needs, and the default is 0). LDTORCH_DIST_SPIN, in Go duration syntax,
// overrides it; 0 sleeps at once.
// A sleeping rank is woken through Gloo's threads, and a virtual machine's idle core is
// slow to wake: two MNIST LD RR ranks on 2 vCPUs waited 1.8 ms per all-reduce asleep and
// 0.3 ms polling (docs/BENCHMARKS.md). A meta-step seldom leaves a rank waiting longer
// than this; a longer wait (a peer writing a checkpoint, an uneven share of evaluation
// models) sleeps after this much CPU spent.
const DefaultSpinWait = 100 * time.Millisecond

// MaxSpinWait bounds LDTORCH_DIST_SPIN: polling longer than a second per collective only
// burns CPU.
const MaxSpinWait = time.Second

// ParseSpinWait reads an LDTORCH_DIST_SPIN value: a Go duration from 0 ("0": sleep at once)
// to MaxSpinWait. The error names the variable and the value.
func ParseSpinWait(v string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(v))
	switch {
	case err != nil || d < 0:
		return 0, fmt.Errorf("dist: LDTORCH_DIST_SPIN=%q is not a duration of 0 or more (e.g. 0, 500us or 100ms)", v)
	case d > MaxSpinWait:
		return 0, fmt.Errorf("dist: LDTORCH_DIST_SPIN=%q is longer than the limit of 1s", v)
	}
	return d, nil
}

// spinWaitFrom is LDTORCH_DIST_SPIN, or the default for localRanks ranks on this machine.
func spinWaitFrom(lookup func(string) (string, bool), localRanks int) (time.Duration, error) {
	if v, ok := lookup("LDTORCH_DIST_SPIN"); ok && v != "" {
		return ParseSpinWait(v)
	}
	if localRanks > runtime.NumCPU() {
		return 0, nil
	}
	return DefaultSpinWait, nil
}

func fromLookup(lookup func(string) (string, bool)) (Config, bool, error) {
	ws, set := lookup("WORLD_SIZE")
	if !set || ws == "" {
		// RANK without WORLD_SIZE is a half-configured rank, refused as WORLD_SIZE
		// without RANK is (running it as a lone process would compute the whole run in
		// each of several processes, all writing the same folder).
		if r, ok := lookup("RANK"); ok && r != "" {
			return Config{}, true, fmt.Errorf("dist: WORLD_SIZE is not set (RANK=%s is); set both, or neither for a single process", r)
		}
		return Config{}, false, nil
	}
	cfg := Config{Timeout: DefaultTimeout}
	num := func(name string, def int, need bool) (int, error) {
		v, ok := lookup(name)
		if !ok || v == "" {
			if need {
				return 0, fmt.Errorf("dist: %s is not set (WORLD_SIZE=%s is); set both, or neither for a single process", name, ws)
			}
			return def, nil
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return 0, fmt.Errorf("dist: %s=%q is not an integer", name, v)
		}
		return n, nil
	}
	var err error
	if cfg.WorldSize, err = num("WORLD_SIZE", 0, true); err != nil {
		return cfg, true, err
	}
	if cfg.Rank, err = num("RANK", 0, true); err != nil {
		return cfg, true, err
	}
	if cfg.LocalRank, err = num("LOCAL_RANK", cfg.Rank, false); err != nil {
		return cfg, true, err
	}
	if cfg.WorldSize < 1 {
		return cfg, true, fmt.Errorf("dist: WORLD_SIZE=%d must be at least 1", cfg.WorldSize)
	}
	if cfg.Rank < 0 || cfg.Rank >= cfg.WorldSize {
		return cfg, true, fmt.Errorf("dist: RANK=%d is outside 0..%d (WORLD_SIZE=%d)", cfg.Rank, cfg.WorldSize-1, cfg.WorldSize)
	}
	cfg.Addr, _ = lookup("MASTER_ADDR")
	if cfg.WorldSize > 1 && cfg.Addr == "" {
		return cfg, true, errors.New("dist: MASTER_ADDR is not set")
	}
	if cfg.Port, err = num("MASTER_PORT", 0, cfg.WorldSize > 1); err != nil {
		return cfg, true, err
	}
	if cfg.WorldSize > 1 && (cfg.Port < 1 || cfg.Port > 65535) {
		return cfg, true, fmt.Errorf("dist: MASTER_PORT=%d is outside 1..65535", cfg.Port)
	}
	if v, _ := lookup("TORCHELASTIC_USE_AGENT_STORE"); strings.EqualFold(v, "true") {
		cfg.AgentStore = true
		if cfg.Attempt, err = num("TORCHELASTIC_RESTART_COUNT", 0, false); err != nil {
			return cfg, true, err
		}
	}
	cfg.Interface, _ = lookup("GLOO_SOCKET_IFNAME")
	if cfg.Timeout, err = timeoutFrom(lookup); err != nil {
		return cfg, true, err
	}
	localRanks, err := num("LOCAL_WORLD_SIZE", cfg.WorldSize, false)
	if err != nil {
		return cfg, true, err
	}
	if cfg.SpinWait, err = spinWaitFrom(lookup, localRanks); err != nil {
		return cfg, true, err
	}
	return cfg, true, nil
}

// Group is this process's membership in a group of ranks. With one rank it needs no
// network: its collectives return at once.
type Group struct {
	cfg Config
	pg  *torch.ProcessGroup // nil for a group of one
	// stuck: a store call of the failure diagnosis never returned (the network to the
	// store is gone); it may still be using pg, so Close leaves pg to the process's exit.
	stuck bool
}

// JoinMargin is how long past its timeout a rank waits for libtorch to give up joining
// before Init returns on its own (libtorch bounds each phase of the rendezvous, but not the
// phases together, and not every read of a peer that accepts and never answers).
var JoinMargin = 2 * time.Second

// JoinError is a rank that could not join its group.
type JoinError struct {
	Rank, WorldSize int
	Addr            string // MASTER_ADDR:MASTER_PORT
	Timeout         time.Duration
	Problem         string // what went wrong, in words
	Err             error  // libtorch's or the network's error, if any
}

func (e *JoinError) Error() string {
	s := fmt.Sprintf("dist: rank %d of %d could not join the group at %s (LDTORCH_DIST_TIMEOUT=%v): %s",
		e.Rank, e.WorldSize, e.Addr, e.Timeout, e.Problem)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *JoinError) Unwrap() error { return e.Err }

// Init joins the group described by cfg and returns when every rank has joined.
func Init(cfg Config) (*Group, error) { return InitContext(context.Background(), cfg) }

// InitContext is Init that gives up when ctx is done (an interrupting signal), returning
// an error that wraps ctx's. Whatever answers on MASTER_ADDR:MASTER_PORT, it returns within
// cfg.Timeout plus JoinMargin: a rank other than the store's host first checks that a c10d
// store listens there (probeStore), and the rendezvous itself runs under a deadline.
func InitContext(ctx context.Context, cfg Config) (*Group, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.WorldSize < 1 || cfg.Rank < 0 || cfg.Rank >= cfg.WorldSize {
		return nil, fmt.Errorf("dist: rank %d of %d is not a valid member", cfg.Rank, cfg.WorldSize)
	}
	g := &Group{cfg: cfg}
	if cfg.WorldSize == 1 {
		return g, nil
	}
	if !torch.DistributedAvailable() {
		return nil, errors.New("dist: the shim was built without c10d/Gloo (install libgloo-dev, rebuild with cmake --build build)")
	}
	// Gloo sends with writev, which raises SIGPIPE when the peer has gone, and a SIGPIPE
	// raised in C code ends a Go program at once (os/signal), before the collective can fail
	// with an error that names the peer. Python ignores SIGPIPE from its start; a member of a
	// group does from here on (a write to a closed stdout is then an error, EPIPE).
	signal.Ignore(syscall.SIGPIPE)
	start := time.Now()
	deadline := start.Add(cfg.Timeout)
	where := net.JoinHostPort(cfg.Addr, strconv.Itoa(cfg.Port))
	fail := func(problem string, err error) error {
		return &JoinError{Rank: cfg.Rank, WorldSize: cfg.WorldSize, Addr: where, Timeout: cfg.Timeout, Problem: problem, Err: err}
	}
	o := torch.ProcessGroupOptions{
		Addr: cfg.Addr, Port: cfg.Port, Rank: cfg.Rank, WorldSize: cfg.WorldSize,
		Interface: cfg.Interface, Timeout: cfg.Timeout, SpinWait: cfg.SpinWait,
	}
	if cfg.AgentStore {
		o.ClientOnly = true
		o.Prefix = fmt.Sprintf("/worker/attempt_%d", cfg.Attempt)
	}
	if o.Interface == "" {
		o.BindHost = bindHost(cfg.Addr, cfg.Port)
	} else if _, err := net.InterfaceByName(o.Interface); err != nil {
		// Gloo would say so only after the store's rendezvous, at the timeout
		var names []string
		if ifs, err := net.Interfaces(); err == nil {
			for _, i := range ifs {
				names = append(names, i.Name)
			}
		}
		return nil, fmt.Errorf("dist: GLOO_SOCKET_IFNAME=%q is not a network interface of this machine (it has: %s)", o.Interface, strings.Join(names, ", "))
	}
	if !o.ClientOnly && cfg.Rank == 0 {
		// libtorch would log its failure to bind over several lines before throwing
		ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(cfg.Port)))
		if err != nil {
			return nil, fail(fmt.Sprintf("this rank hosts the store, but port %d is taken on this machine (by another program, or another run: choose another MASTER_PORT)", cfg.Port), err)
		}
		ln.Close()
	}
	if o.ClientOnly || cfg.Rank != 0 {
		if err := probeStore(ctx, where, deadline, linkedStoreQuery()); err != nil {
			if ctx.Err() != nil {
				return nil, &interrupted{fmt.Sprintf("dist: rank %d of %d: interrupted while waiting for the store at %s", cfg.Rank, cfg.WorldSize, where), ctx.Err()}
			}
			var pe *probeError
			if errors.As(err, &pe) {
				return nil, fail(pe.problem, pe.err)
			}
			return nil, fail("the store did not answer", err)
		}
	}
	type joined struct {
		pg  *torch.ProcessGroup
		err error
	}
	done := make(chan joined, 1)
	go func() {
		pg, err := torch.NewProcessGroup(o)
		done <- joined{pg, err}
	}()
	// abandon leaves the rendezvous to finish (or fail) on its own; the group it may
	// still make is closed then. The caller is about to give up on the group anyway.
	abandon := func() {
		go func() {
			if j := <-done; j.pg != nil {
				j.pg.Close()
			}
		}()
	}
	timer := time.NewTimer(time.Until(deadline) + JoinMargin)
	defer timer.Stop()
	select {
	case j := <-done:
		if j.err != nil {
			return nil, fail("the rendezvous failed", j.err)
		}
		g.pg = j.pg
		return g, nil
	case <-timer.C:
		abandon()
		what := "the store accepted this rank, but not every rank joined"
		if cfg.Rank == 0 && !cfg.AgentStore {
			what = "not every rank joined this rank's store"
		}
		return nil, fail(fmt.Sprintf("%s within %v (are all %d ranks started, with the same MASTER_ADDR and MASTER_PORT, and can they reach each other?)",
			what, time.Since(start).Round(time.Millisecond), cfg.WorldSize), nil)
	case <-ctx.Done():
		abandon()
		return nil, &interrupted{fmt.Sprintf("dist: rank %d of %d: interrupted while joining the group at %s", cfg.Rank, cfg.WorldSize, where), ctx.Err()}
	}
}

// interrupted is a join given up because its context ended; it matches the context's error
// under errors.Is.
type interrupted struct {
	msg string
	err error
}

func (e *interrupted) Error() string { return e.msg }
func (e *interrupted) Unwrap() error { return e.err }

// bindHost is the address Gloo listens on and tells its peers when GLOO_SOCKET_IFNAME is
// not set. Left to itself, Gloo takes the address this machine's host name resolves to, and
// falls back to loopback when that address is not usable (a container, a network namespace,
// a host name that maps to 127.0.1.1): the peers are then told to connect to 127.0.0.1 and
// the rendezvous fails. The address this machine uses to reach MASTER_ADDR is one every
// peer that reaches the store can reach too (the store's host uses MASTER_ADDR itself). ""
// (Gloo's own choice) when there is no route to MASTER_ADDR.
func bindHost(addr string, port int) string {
	if isLoopback(addr) {
		return addr // all ranks on this machine: stay on loopback
	}
	// A UDP "connection" sends nothing: it only asks the kernel for the route.
	c, err := net.Dial("udp", net.JoinHostPort(addr, strconv.Itoa(port)))
	if err != nil {
		return ""
	}
	defer c.Close()
	ua, ok := c.LocalAddr().(*net.UDPAddr)
	if !ok || ua.IP.IsUnspecified() {
		return ""
	}
	return ua.IP.String()
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// errStuck is a collective after a failure whose diagnosis found the store unreachable.
var errStuck = errors.New("dist: the group failed earlier and its store is unreachable")

// Rank is this process's rank, Size the number of ranks; rank 0 is the root, the only
// rank that writes files.
func (g *Group) Rank() int      { return g.cfg.Rank }
func (g *Group) Size() int      { return g.cfg.WorldSize }
func (g *Group) IsRoot() bool   { return g.cfg.Rank == 0 }
func (g *Group) Config() Config { return g.cfg }

// AllReduceSum sums each tensor over the ranks, in place.
func (g *Group) AllReduceSum(ts ...*torch.Tensor) error {
	if g.pg == nil {
		return nil
	}
	if g.stuck {
		return errStuck
	}
	return g.check("all-reduce", g.pg.AllReduceSum(ts...))
}

// PendingSum is an all-reduce started by StartAllReduceSum; Wait ends it.
type PendingSum struct {
	g      *Group
	p      *torch.PendingAllReduce
	waited bool
}

// StartAllReduceSum starts summing t over the ranks, in place, and returns at once: work
// that does not need the sum can run while the ranks exchange. t must be neither read nor
// written before Wait, and every rank must start the same collectives in the same order.
func (g *Group) StartAllReduceSum(t *torch.Tensor) (*PendingSum, error) {
	if g.pg == nil {
		return &PendingSum{}, nil
	}
	if g.stuck {
		return nil, errStuck
	}
	p, err := g.pg.StartAllReduceSum(t)
	if err != nil {
		return nil, g.check("all-reduce", err)
	}
	return &PendingSum{g: g, p: p}, nil
}

// Wait returns when the sum is in the tensor, or with the failure (a RankError naming the
// rank at fault, as AllReduceSum's). It may be called once.
func (s *PendingSum) Wait() error {
	if s.waited {
		return errors.New("dist: this all-reduce was already waited for")
	}
	s.waited = true
	if s.g == nil {
		return nil
	}
	return s.g.check("all-reduce", s.p.Wait())
}

// Broadcast copies rank root's tensors into every rank's.
func (g *Group) Broadcast(root int, ts ...*torch.Tensor) error {
	if g.pg == nil {
		return nil
	}
	if g.stuck {
		return errStuck
	}
	return g.check("broadcast", g.pg.Broadcast(root, ts...))
}

// Barrier returns when every rank has reached it.
func (g *Group) Barrier() error {
	if g.pg == nil {
		return nil
	}
	if g.stuck {
		return errStuck
	}
	return g.check("barrier", g.pg.Barrier())
}

// SumFloat64s sums xs over the ranks in place (float64, so counts and losses add exactly
// up to 2^53).
func (g *Group) SumFloat64s(xs []float64) error {
	return g.onFloat64s(xs, func(t *torch.Tensor) error { return g.AllReduceSum(t) })
}

// BroadcastFloat64s copies rank root's xs into every rank's xs (same length everywhere).
func (g *Group) BroadcastFloat64s(root int, xs []float64) error {
	return g.onFloat64s(xs, func(t *torch.Tensor) error { return g.Broadcast(root, t) })
}

// onFloat64s runs a collective on xs through a CPU tensor and copies the result back.
func (g *Group) onFloat64s(xs []float64, collective func(*torch.Tensor) error) error {
	if g.pg == nil || len(xs) == 0 {
		return nil
	}
	t, err := torch.FromFloat64(xs, int64(len(xs)))
	if err != nil {
		return err
	}
	defer t.Free()
	if err := collective(t); err != nil {
		return err
	}
	out, err := t.Float64s()
	if err != nil {
		return err
	}
	copy(xs, out)
	return nil
}

// Close leaves the group; safe after any error and idempotent.
func (g *Group) Close() {
	if g == nil || g.pg == nil {
		return
	}
	if !g.stuck {
		g.pg.Close()
	}
	g.pg = nil
}
