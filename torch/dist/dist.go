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
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
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
}

// FromEnv reads the configuration torchrun (or Launch) puts in the environment. ok is false
// when WORLD_SIZE is not set: the process is not part of a distributed run.
func FromEnv() (cfg Config, ok bool, err error) {
	return fromLookup(os.LookupEnv)
}

func fromLookup(lookup func(string) (string, bool)) (Config, bool, error) {
	ws, set := lookup("WORLD_SIZE")
	if !set || ws == "" {
		return Config{}, false, nil
	}
	cfg := Config{Timeout: DefaultTimeout}
	num := func(name string, def int, need bool) (int, error) {
		v, ok := lookup(name)
		if !ok || v == "" {
			if need {
				return 0, fmt.Errorf("dist: %s is not set (WORLD_SIZE=%s is)", name, ws)
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
	if v, ok := lookup("LDTORCH_DIST_TIMEOUT"); ok && v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return cfg, true, fmt.Errorf("dist: LDTORCH_DIST_TIMEOUT=%q is not a positive duration (e.g. 30s)", v)
		}
		cfg.Timeout = d
	}
	return cfg, true, nil
}

// Group is this process's membership in a group of ranks. With one rank it needs no
// network: its collectives return at once.
type Group struct {
	cfg Config
	pg  *torch.ProcessGroup // nil for a group of one
}

// Init joins the group described by cfg and returns when every rank has joined.
func Init(cfg Config) (*Group, error) {
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
	o := torch.ProcessGroupOptions{
		Addr: cfg.Addr, Port: cfg.Port, Rank: cfg.Rank, WorldSize: cfg.WorldSize,
		Interface: cfg.Interface, Timeout: cfg.Timeout,
	}
	if cfg.AgentStore {
		o.ClientOnly = true
		o.Prefix = fmt.Sprintf("/worker/attempt_%d", cfg.Attempt)
	}
	if o.Interface == "" && isLoopback(cfg.Addr) {
		o.BindHost = cfg.Addr // all ranks on this machine: stay on loopback
	}
	pg, err := torch.NewProcessGroup(o)
	if err != nil {
		return nil, fmt.Errorf("dist: rank %d of %d could not join the group at %s:%d within %v: %w",
			cfg.Rank, cfg.WorldSize, cfg.Addr, cfg.Port, cfg.Timeout, err)
	}
	g.pg = pg
	return g, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

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
	return g.check("all-reduce", g.pg.AllReduceSum(ts...))
}

// Broadcast copies rank root's tensors into every rank's.
func (g *Group) Broadcast(root int, ts ...*torch.Tensor) error {
	if g.pg == nil {
		return nil
	}
	return g.check("broadcast", g.pg.Broadcast(root, ts...))
}

// Barrier returns when every rank has reached it.
func (g *Group) Barrier() error {
	if g.pg == nil {
		return nil
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
	g.pg.Close()
	g.pg = nil
}
