package dist

// failure.go: naming the rank behind a failed collective. Gloo reports a dead peer as a
// closed connection (by address) and a hung one as a timeout; neither names a rank. So
// each rank that sees a collective fail, or that fails on its own (Abort), leaves a note
// under failed/<rank> in the group's c10d store, then reads the others' notes for a short
// grace period: a rank that left an "abort" note failed on its own; a rank that left no
// note at all died or hung.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"
)

const (
	failKeyPrefix = "ldtorch/failed/"
	abortNote     = "abort: "
	peerNote      = "peer: "
	// interruptNote is the abort note of a rank whose context was cancelled (a signal).
	interruptNote = abortNote + "interrupted"
)

// FailureGrace is how long a rank waits for its peers' notes after a collective failed.
var FailureGrace = 2 * time.Second

// RankError is a collective that failed because of other ranks.
type RankError struct {
	Op      string // "all-reduce", "broadcast", "barrier"
	Rank    int    // this rank
	Culprit []int  // the ranks that failed, died or hung (empty when unknown)
	Reason  string // what the culprits did
	Err     error  // the collective's own error
	// Interrupted: the culprit stopped because its context was cancelled (Abort with
	// context.Canceled), not on an error.
	Interrupted bool
}

func (e *RankError) Error() string {
	who := "another rank"
	if len(e.Culprit) == 1 {
		who = "rank " + strconv.Itoa(e.Culprit[0])
	} else if len(e.Culprit) > 1 {
		s := make([]string, len(e.Culprit))
		for i, r := range e.Culprit {
			s[i] = strconv.Itoa(r)
		}
		who = "ranks " + strings.Join(s, ", ")
	}
	return fmt.Sprintf("dist: rank %d: %s %s (%s failed: %v)", e.Rank, who, e.Reason, e.Op, e.Err)
}

func (e *RankError) Unwrap() error { return e.Err }

func failKey(rank int) string { return failKeyPrefix + strconv.Itoa(rank) }

// diagnosisSlack is how long past FailureGrace the store calls of a failure diagnosis
// may take before the store counts as unreachable. libtorch's store client waits for an
// answer without a limit of its own, so a store cut off by the network (a link down, a
// host gone without closing its connections) would hold the diagnosis forever.
var diagnosisSlack = 3 * time.Second

// check turns a failed collective into a RankError naming the culprit.
func (g *Group) check(op string, err error) error {
	if err == nil {
		return nil
	}
	e := &RankError{Op: op, Rank: g.cfg.Rank, Err: err}
	storeHost := -1 // the rank whose exit takes the store down, if any
	if !g.cfg.AgentStore {
		storeHost = 0
	}
	store := net.JoinHostPort(g.cfg.Addr, strconv.Itoa(g.cfg.Port))
	hostGone := "exited or died, or the network to it is down (it hosts the store at " + store + ", which does not answer)"
	type diagnosis struct {
		setErr    error
		notes     map[int]string
		silent    []int
		storeGone bool
	}
	done := make(chan diagnosis, 1)
	go func() {
		var d diagnosis
		if d.setErr = g.pg.StoreSet(failKey(g.cfg.Rank), []byte(peerNote+err.Error())); d.setErr == nil {
			d.notes, d.silent, d.storeGone = g.collectNotes(FailureGrace)
		}
		done <- d
	}()
	var d diagnosis
	select {
	case d = <-done:
	case <-time.After(FailureGrace + diagnosisSlack):
		g.stuck = true // the goroutine may still be inside a store call on g.pg
		e.Reason = fmt.Sprintf("stopped responding, and the store at %s did not answer within %v either (the network between the ranks may be down, or they exited or hung)",
			store, FailureGrace+diagnosisSlack)
		if storeHost >= 0 && g.cfg.Rank != storeHost {
			e.Culprit = []int{storeHost}
			e.Reason = fmt.Sprintf("exited or died, or the network to it is down (it hosts the store at %s, which did not answer within %v)",
				store, FailureGrace+diagnosisSlack)
		}
		return e
	}
	if d.setErr != nil {
		if storeHost >= 0 && g.cfg.Rank != storeHost {
			e.Culprit, e.Reason = []int{storeHost}, hostGone
		} else {
			e.Reason = "stopped responding"
		}
		return e
	}
	notes, silent, storeGone := d.notes, d.silent, d.storeGone
	var aborted []int
	for r, n := range notes {
		if strings.HasPrefix(n, abortNote) {
			aborted = append(aborted, r)
		}
	}
	sort.Ints(aborted)
	_, hostNoted := notes[storeHost]
	switch {
	case len(aborted) > 0 && notes[aborted[0]] == interruptNote:
		e.Culprit, e.Reason, e.Interrupted = aborted[:1], "was interrupted", true
	case len(aborted) > 0:
		e.Culprit = aborted
		e.Reason = "failed: " + strings.TrimPrefix(notes[aborted[0]], abortNote)
	case storeGone && storeHost >= 0 && g.cfg.Rank != storeHost && !hostNoted:
		// (a store write can succeed after its host died: TCPStore's set does not wait for
		// a reply, so the host's death may only show when the notes are read)
		e.Culprit, e.Reason = []int{storeHost}, hostGone
	case len(silent) > 0:
		e.Culprit = silent
		e.Reason = "stopped responding (exited, was killed or hung, or the network to it is down)"
	default:
		e.Reason = "reported the same failure"
	}
	return e
}

// collectNotes reads the other ranks' notes until all have one or grace passes. silent
// lists the ranks without a note.
func (g *Group) collectNotes(grace time.Duration) (notes map[int]string, silent []int, storeGone bool) {
	notes = map[int]string{}
	deadline := time.Now().Add(grace)
	for {
		silent = silent[:0]
		for r := 0; r < g.cfg.WorldSize; r++ {
			if r == g.cfg.Rank {
				continue
			}
			if _, ok := notes[r]; ok {
				continue
			}
			found, err := g.pg.StoreCheck(failKey(r))
			if err != nil {
				storeGone = true
				silent = append(silent, r)
				continue
			}
			if !found {
				silent = append(silent, r)
				continue
			}
			v, err := g.pg.StoreGet(failKey(r))
			if err != nil {
				storeGone = true
				silent = append(silent, r)
				continue
			}
			notes[r] = string(v)
		}
		if len(silent) == 0 || storeGone || time.Now().After(deadline) {
			return notes, silent, storeGone
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Abort tells the other ranks that this one failed with err, so that their collectives
// fail at once and name this rank (as interrupted when err is context.Canceled). Call it
// before exiting on an error of one's own; then Close. The store host (rank 0 without torchrun's agent store) keeps the store up until
// every other rank has read the note or the grace period passes.
func (g *Group) Abort(err error) {
	if g == nil || g.pg == nil || g.stuck || err == nil {
		return
	}
	var re *RankError
	if errors.As(err, &re) {
		return // not our own failure: the peers know already
	}
	note := abortNote + err.Error()
	if len(note) > 2000 {
		note = note[:2000] + "…"
	}
	if errors.Is(err, context.Canceled) {
		note = interruptNote
	}
	if g.pg.StoreSet(failKey(g.cfg.Rank), []byte(note)) != nil {
		return
	}
	g.pg.CloseCollectives() // peers blocked on us fail now rather than at the timeout
	if !g.cfg.AgentStore && g.cfg.Rank == 0 {
		g.collectNotes(FailureGrace)
	}
}
