package torch

// dist.go: a c10d process group (Gloo) and its collectives. The environment handling, the
// launcher and failure diagnosis live in torch/dist; this file is only the binding.

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"time"
	"unsafe"
)

// DistributedAvailable reports whether the shim was built with c10d's Gloo backend.
func DistributedAvailable() bool { return C.ldt_dist_available() != 0 }

// ProcessGroupOptions says how one rank joins a group.
type ProcessGroupOptions struct {
	Addr       string // the TCPStore's host (MASTER_ADDR)
	Port       int    // its port (MASTER_PORT)
	Rank       int
	WorldSize  int
	ClientOnly bool          // connect to an existing store (torchrun's agent) instead of rank 0 hosting it
	Prefix     string        // key namespace in the store ("" for none)
	Interface  string        // network interface for Gloo (e.g. "eth0"), or ""
	BindHost   string        // else the address Gloo binds to (e.g. "127.0.0.1"), or "" for this host's address
	Timeout    time.Duration // bounds the rendezvous and every collective
	// SpinWait: how long a collective's caller polls for its end (yielding its core between
	// polls) before it sleeps; 0 sleeps at once. Polling saves the wake-up through Gloo's
	// threads when every core runs a rank, and costs up to that much CPU per collective.
	SpinWait time.Duration
}

// ProcessGroup is a joined Gloo group. Its methods are collectives: every rank must call
// the same ones in the same order. It is not safe for concurrent use.
type ProcessGroup struct {
	h          C.ldt_process_group
	rank, size int
}

// NewProcessGroup joins the group; it returns when every rank has joined, or an error
// when the rendezvous fails or times out.
func NewProcessGroup(o ProcessGroupOptions) (*ProcessGroup, error) {
	const op = "dist_init"
	if o.Timeout <= 0 {
		return nil, errorf(op, fmt.Sprintf("timeout must be positive, got %v", o.Timeout))
	}
	addr := C.CString(o.Addr)
	defer C.free(unsafe.Pointer(addr))
	var prefix, iface, bind *C.char
	if o.Prefix != "" {
		prefix = C.CString(o.Prefix)
		defer C.free(unsafe.Pointer(prefix))
	}
	if o.Interface != "" {
		iface = C.CString(o.Interface)
		defer C.free(unsafe.Pointer(iface))
	}
	if o.BindHost != "" {
		bind = C.CString(o.BindHost)
		defer C.free(unsafe.Pointer(bind))
	}
	client := C.int(0)
	if o.ClientOnly {
		client = 1
	}
	if o.SpinWait < 0 {
		return nil, errorf(op, fmt.Sprintf("spin time must not be negative, got %v", o.SpinWait))
	}
	var h C.ldt_process_group
	ms := o.Timeout.Milliseconds()
	if ms < 1 {
		ms = 1
	}
	if err := cerr(op, C.ldt_dist_init(&h, addr, C.int(o.Port), C.int(o.Rank), C.int(o.WorldSize), client, prefix, iface, bind, C.int64_t(ms), C.int64_t(o.SpinWait.Microseconds()))); err != nil {
		return nil, err
	}
	return &ProcessGroup{h: h, rank: o.Rank, size: o.WorldSize}, nil
}

// Rank is this process's rank; Size the number of ranks.
func (pg *ProcessGroup) Rank() int { return pg.rank }
func (pg *ProcessGroup) Size() int { return pg.size }

func (pg *ProcessGroup) live(op string) error {
	if pg == nil || pg.h == nil {
		return errorf(op, "process group is closed")
	}
	return nil
}

// AllReduceSum replaces each tensor by its sum over all ranks, in place (one collective per
// tensor, in order). Tensors must be contiguous CPU tensors of the same shape on every rank.
func (pg *ProcessGroup) AllReduceSum(ts ...*Tensor) error {
	const op = "dist_all_reduce_sum"
	if err := pg.live(op); err != nil {
		return err
	}
	if len(ts) == 0 {
		return nil
	}
	hs, err := handles(op, ts)
	if err != nil {
		return err
	}
	return cerr(op, C.ldt_dist_all_reduce_sum(pg.h, &hs[0], C.int(len(hs))))
}

// PendingAllReduce is an all-reduce started by StartAllReduceSum and not yet waited for.
type PendingAllReduce struct {
	pg *ProcessGroup
	h  C.ldt_work
}

// StartAllReduceSum starts summing t over all ranks, in place, and returns at once, so the
// caller can work on while the ranks exchange; Wait returns when the sum is in t. t must be
// neither read nor written until then. Collectives run in the order they are started, on
// every rank; a started one must be waited for before the group is closed.
func (pg *ProcessGroup) StartAllReduceSum(t *Tensor) (*PendingAllReduce, error) {
	const op = "dist_all_reduce_sum_start"
	if err := pg.live(op); err != nil {
		return nil, err
	}
	h, err := t.handle(op)
	if err != nil {
		return nil, err
	}
	var w C.ldt_work
	if err := cerr(op, C.ldt_dist_all_reduce_sum_start(pg.h, h, &w)); err != nil {
		return nil, err
	}
	return &PendingAllReduce{pg: pg, h: w}, nil
}

// Wait returns when the all-reduce has ended, with its error if it failed (a rank gone, the
// group's timeout). It may be called once.
func (p *PendingAllReduce) Wait() error {
	const op = "dist_work_wait"
	if p == nil || p.h == nil {
		return errorf(op, "no all-reduce to wait for (none started, or already waited for)")
	}
	h := p.h
	p.h = nil
	return cerr(op, C.ldt_dist_work_wait(p.pg.h, h))
}

// Broadcast copies each tensor of rank root into the same tensor of every other rank.
func (pg *ProcessGroup) Broadcast(root int, ts ...*Tensor) error {
	const op = "dist_broadcast"
	if err := pg.live(op); err != nil {
		return err
	}
	if len(ts) == 0 {
		return nil
	}
	hs, err := handles(op, ts)
	if err != nil {
		return err
	}
	return cerr(op, C.ldt_dist_broadcast(pg.h, &hs[0], C.int(len(hs)), C.int(root)))
}

// Barrier returns when every rank has reached it.
func (pg *ProcessGroup) Barrier() error {
	const op = "dist_barrier"
	if err := pg.live(op); err != nil {
		return err
	}
	return cerr(op, C.ldt_dist_barrier(pg.h))
}

// StoreSet writes a small value under key in the group's store.
func (pg *ProcessGroup) StoreSet(key string, value []byte) error {
	const op = "dist_store_set"
	if err := pg.live(op); err != nil {
		return err
	}
	k := C.CString(key)
	defer C.free(unsafe.Pointer(k))
	var p *C.uint8_t
	if len(value) > 0 {
		p = (*C.uint8_t)(C.CBytes(value))
		defer C.free(unsafe.Pointer(p))
	}
	return cerr(op, C.ldt_dist_store_set(pg.h, k, p, C.int64_t(len(value))))
}

// StoreCheck reports whether key exists in the store, without waiting.
func (pg *ProcessGroup) StoreCheck(key string) (bool, error) {
	const op = "dist_store_check"
	if err := pg.live(op); err != nil {
		return false, err
	}
	k := C.CString(key)
	defer C.free(unsafe.Pointer(k))
	var found C.int
	if err := cerr(op, C.ldt_dist_store_check(pg.h, k, &found)); err != nil {
		return false, err
	}
	return found != 0, nil
}

// StoreGet reads the value under key, waiting for it up to the group's timeout.
func (pg *ProcessGroup) StoreGet(key string) ([]byte, error) {
	const op = "dist_store_get"
	if err := pg.live(op); err != nil {
		return nil, err
	}
	k := C.CString(key)
	defer C.free(unsafe.Pointer(k))
	buf := make([]byte, 4096)
	for {
		var n C.int64_t
		if err := cerr(op, C.ldt_dist_store_get(pg.h, k, (*C.uint8_t)(unsafe.Pointer(&buf[0])), C.int64_t(len(buf)), &n)); err != nil {
			return nil, err
		}
		if int(n) <= len(buf) {
			return buf[:n], nil
		}
		buf = make([]byte, n)
	}
}

// CloseCollectives closes the Gloo group but keeps the store: the peers' collectives fail
// at once while store notes can still be exchanged. Later collectives return errors.
func (pg *ProcessGroup) CloseCollectives() {
	if pg == nil || pg.h == nil {
		return
	}
	C.ldt_dist_close_collectives(pg.h)
}

// Close leaves the group and frees it. It is idempotent, never fails and is safe after any
// error (a collective that is still running ends by completing, failing or timing out).
func (pg *ProcessGroup) Close() {
	if pg == nil || pg.h == nil {
		return
	}
	C.ldt_dist_destroy(pg.h)
	pg.h = nil
}
