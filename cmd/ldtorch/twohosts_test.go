//go:build long

// Two ranks on two "machines": each in a network namespace of its own, joined by a veth
// pair, with MASTER_ADDR on rank 0's veth address, so that nothing goes over loopback (as
// between two hosts). Skipped where namespaces cannot be made (not root, no ip command, no
// namespace support).

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/torch/dist"
)

// vethHosts is two network namespaces joined by a veth pair: hosts[i] has address addrs[i]
// on link links[i].
type vethHosts struct {
	ip    string // the ip command
	hosts [2]string
	links [2]string
	addrs [2]string
}

// newVethHosts makes the two namespaces or skips the test; they are removed at its end.
func newVethHosts(t *testing.T) *vethHosts {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		t.Skip("no ip command (iproute2)")
	}
	tag := strconv.Itoa(os.Getpid())
	v := &vethHosts{ip: ip,
		hosts: [2]string{"ldt" + tag + "a", "ldt" + tag + "b"},
		links: [2]string{"ldt" + tag + "a", "ldt" + tag + "b"},
		addrs: [2]string{"10.213.0.1", "10.213.0.2"}}
	run := func(args ...string) error {
		if out, err := exec.Command(ip, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
		return nil
	}
	if err := run("netns", "add", v.hosts[0]); err != nil {
		t.Skipf("cannot make a network namespace: %v", err)
	}
	t.Cleanup(func() { run("netns", "del", v.hosts[0]) })
	if err := run("netns", "add", v.hosts[1]); err != nil {
		t.Skipf("cannot make a network namespace: %v", err)
	}
	t.Cleanup(func() { run("netns", "del", v.hosts[1]) }) // takes the veth pair with it
	if err := run("link", "add", v.links[0], "type", "veth", "peer", "name", v.links[1]); err != nil {
		t.Skipf("cannot make a veth pair: %v", err)
	}
	for i := range 2 {
		for _, args := range [][]string{
			{"link", "set", v.links[i], "netns", v.hosts[i]},
			{"-n", v.hosts[i], "addr", "add", v.addrs[i] + "/24", "dev", v.links[i]},
			{"-n", v.hosts[i], "link", "set", v.links[i], "up"},
			{"-n", v.hosts[i], "link", "set", "lo", "up"},
		} {
			if err := run(args...); err != nil {
				t.Fatal(err)
			}
		}
	}
	return v
}

// setLink brings host i's end of the pair up or down.
func (v *vethHosts) setLink(t *testing.T, i int, state string) {
	t.Helper()
	if out, err := exec.Command(v.ip, "-n", v.hosts[i], "link", "set", v.links[i], state).CombinedOutput(); err != nil {
		t.Fatalf("ip link set %s %s: %v: %s", v.links[i], state, err, out)
	}
}

// vethRank is one rank of a run of ldtorch in its namespace.
type vethRank struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	done   chan error
	ended  time.Time
}

// startRanks starts rank i in host i, with MASTER_ADDR on host 0's address.
func (v *vethHosts) startRanks(t *testing.T, timeout time.Duration, args []string) [2]*vethRank {
	t.Helper()
	var ranks [2]*vethRank
	for i := range 2 {
		cmd := binaryCommand(t, []string{"OMP_NUM_THREADS=1", "MASTER_ADDR=" + v.addrs[0], "MASTER_PORT=29500",
			"WORLD_SIZE=2", "RANK=" + strconv.Itoa(i), "LOCAL_RANK=0", "LDTORCH_DIST_TIMEOUT=" + timeout.String()}, args...)
		cmd.Args = append([]string{v.ip, "netns", "exec", v.hosts[i], cmd.Path}, cmd.Args[1:]...)
		cmd.Path = v.ip
		r := &vethRank{cmd: cmd, done: make(chan error, 1)}
		cmd.Stderr = &r.stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { err := cmd.Wait(); r.ended = time.Now(); r.done <- err }()
		ranks[i] = r
	}
	t.Cleanup(func() {
		for _, r := range ranks {
			r.cmd.Process.Kill()
		}
	})
	return ranks
}

// wait waits for both ranks, at most limit, and returns their exit codes.
func (v *vethHosts) wait(t *testing.T, ranks [2]*vethRank, limit time.Duration) [2]int {
	t.Helper()
	var codes [2]int
	deadline := time.After(limit)
	for i, r := range ranks {
		select {
		case err := <-r.done:
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				codes[i] = ee.ExitCode()
			} else if err != nil {
				t.Fatalf("rank %d: %v", i, err)
			}
		case <-deadline:
			t.Fatalf("rank %d still running after %v\nrank 0: %s\nrank 1: %s", i, limit, &ranks[0].stderr, &ranks[1].stderr)
		}
	}
	return codes
}

// vethArgs is parallelArgs (16 meta-steps: a link cut after the first checkpoint, at step
// 2, lands mid-run) with one evaluation model and no baselines.
func vethArgs(shared, out string, extra ...string) []string {
	args := parallelArgs(shared, out, extra...)
	for i, a := range args {
		switch a {
		case "--eval-models":
			args[i+1] = "1"
		case "--baselines":
			args[i+1] = "none"
		}
	}
	return args
}

func TestTwoHostsOverVeth(t *testing.T) {
	shared := sharedDatasets(t)
	v := newVethHosts(t)
	dir := t.TempDir()
	start := time.Now()
	phase := func(what string) {
		t.Logf("%s: %v", what, time.Since(start).Round(time.Millisecond))
		start = time.Now()
	}
	one, two, cut := filepath.Join(dir, "one"), filepath.Join(dir, "two"), filepath.Join(dir, "cut")

	// The two-host run.
	ranks := v.startRanks(t, 30*time.Second, vethArgs(shared, two))
	if codes := v.wait(t, ranks, 3*time.Minute); codes != [2]int{} {
		t.Fatalf("two hosts: exit %v\nrank 0: %s\nrank 1: %s", codes, &ranks[0].stderr, &ranks[1].stderr)
	}
	b := readRun(t, two)
	phase("two hosts")

	// One process, beside the next part (which mostly waits for timeouts).
	oneDone := make(chan result, 1)
	go func() { oneDone <- runBinary(t, 3*time.Minute, nil, vethArgs(shared, one)...) }()

	// The link cut after the first checkpoint: both ranks end, each naming the other.
	const timeout = 4 * time.Second
	ranks = v.startRanks(t, timeout, vethArgs(shared, cut))
	ckpts := filepath.Join(cut, "checkpoints", "ckpt-*.npz")
	for start := time.Now(); ; time.Sleep(5 * time.Millisecond) {
		if m, _ := filepath.Glob(ckpts); len(m) > 0 {
			break
		}
		if time.Since(start) > 2*time.Minute {
			t.Fatalf("no checkpoint after 2 minutes\nrank 0: %s\nrank 1: %s", &ranks[0].stderr, &ranks[1].stderr)
		}
	}
	v.setLink(t, 0, "down")
	cutAt := time.Now()
	// a collective times out (timeout), the failure notes are sought (dist.FailureGrace);
	// a rank cut off from the store gives up on it a few seconds later
	limit := timeout + dist.FailureGrace + 15*time.Second
	codes := v.wait(t, ranks, limit)
	for i, want := range []string{"rank 1 stopped responding", "rank 0 exited or died, or the network to it is down (it hosts the store at " + v.addrs[0] + ":29500"} {
		msg := strings.TrimSpace(ranks[i].stderr.String())
		if codes[i] == 0 || !strings.Contains(msg, want) || strings.Count(msg, "\n") != 0 {
			t.Errorf("rank %d after the link cut: exit %d, want non-zero and one line with %q:\n%s", i, codes[i], want, msg)
		}
		t.Logf("rank %d ended %v after the cut: %s", i, ranks[i].ended.Sub(cutAt).Round(time.Millisecond), msg)
	}
	if _, err := os.Stat(filepath.Join(cut, artifact.DistilledFile)); err == nil {
		t.Fatal("the cut run wrote an artifact")
	}

	phase("link cut")
	if r := <-oneDone; r.code != 0 {
		t.Fatalf("one process: exit %d\n%s", r.code, r.stderr)
	}
	a := readRun(t, one)
	if d := maxAbsDiff(a.Labels, b.Labels); len(a.Labels) == 0 || len(a.Labels) != len(b.Labels) || d > labelTolerance {
		t.Errorf("labels of two hosts differ from one process's by %.3g (%d and %d values), tolerance %g", d, len(b.Labels), len(a.Labels), labelTolerance)
	}
	if ra, rb := a.Report, b.Report; ra.MetaSteps != rb.MetaSteps || ra.T != rb.T || !reflect.DeepEqual(ra.Resets, rb.Resets) {
		t.Errorf("meta-steps %d/%d, T %d/%d, resets %v/%v (one process / two hosts)", ra.MetaSteps, rb.MetaSteps, ra.T, rb.T, ra.Resets, rb.Resets)
	}
	phase("one process")

	// With the link back, --resume on both hosts ends where the uninterrupted run did.
	v.setLink(t, 0, "up")
	ranks = v.startRanks(t, 30*time.Second, vethArgs(shared, cut, "--resume", cut))
	if codes := v.wait(t, ranks, 3*time.Minute); codes != [2]int{} {
		t.Fatalf("resumed: exit %v\nrank 0: %s\nrank 1: %s", codes, &ranks[0].stderr, &ranks[1].stderr)
	}
	phase("resume")
	c := readRun(t, cut)
	if !reflect.DeepEqual(b.Labels, c.Labels) {
		t.Errorf("resumed labels differ from the uninterrupted two-host run's by up to %.3g", maxAbsDiff(b.Labels, c.Labels))
	}
	if !reflect.DeepEqual(b.Report.TestAccuracies, c.Report.TestAccuracies) || b.Report.T != c.Report.T {
		t.Errorf("resumed: test accuracies %v, T %d; uninterrupted: %v, T %d", c.Report.TestAccuracies, c.Report.T, b.Report.TestAccuracies, b.Report.T)
	}
}
