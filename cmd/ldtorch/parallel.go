// parallel.go: `ldtorch distill` as several data-parallel processes: --nproc N starts N
// local ranks of this same command line; a process started by torchrun (or with the
// environment variables it sets) is one rank. Rank 0 does everything a lone run does;
// the other ranks compute and write nothing.

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/engine"
	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/dist"
)

// rankInfo is this process's role: a launcher of `launch` ranks, a rank of a group, or a
// lone run (neither).
type rankInfo struct {
	launch int
	cfg    dist.Config
	group  *dist.Group // joined by rankOf for a rank; nil for a lone run
	// baseSplit: engine.BaseSplitVariable, how the ranks share each base batch
	baseSplit labeldistill.BaseSplit
}

// runOptions are the library options of a rank of a data-parallel run (none for a lone run).
func (r rankInfo) runOptions() []labeldistill.RunOption {
	if r.group == nil {
		return nil
	}
	return []labeldistill.RunOption{labeldistill.WithGroup(r.group), labeldistill.WithBaseSplit(r.baseSplit)}
}

func (r rankInfo) root() bool { return r.group == nil || r.group.IsRoot() }

// rankOf reads --nproc and the distributed environment and, for a rank, joins its group.
func (e *env) rankOf(c *cli.Context) (rankInfo, error) {
	n := c.Int("nproc")
	split, err := engine.ParseBaseSplit(os.Getenv(engine.BaseSplitVariable))
	if err != nil {
		return rankInfo{}, usageErrorf("%s: %v", engine.BaseSplitVariable, err)
	}
	cfg, isRank, err := dist.FromEnv()
	if err != nil {
		return rankInfo{}, usageErrorf("%v", err)
	}
	if !isRank {
		// Ranks started here share this machine's CPUs and memory.
		if err := countFlag("nproc", n, 1, config.MaxProcs(), config.WhyProcs); err != nil {
			return rankInfo{}, err
		}
		if n > 1 {
			if err := dist.CheckEnv(); err != nil { // the ranks would refuse it
				return rankInfo{}, usageErrorf("%v", err)
			}
			return rankInfo{launch: n}, nil
		}
		return rankInfo{}, nil
	}
	if c.IsSet("nproc") && n != cfg.WorldSize {
		if n < 1 {
			return rankInfo{}, countFlag("nproc", n, 1, cfg.WorldSize, "")
		}
		return rankInfo{}, usageErrorf("--nproc %d but WORLD_SIZE=%d in the environment", n, cfg.WorldSize)
	}
	if cfg.WorldSize == 1 {
		return rankInfo{}, nil
	}
	if err := torch.CheckABI(); err != nil {
		return rankInfo{}, failuref("%v", err)
	}
	g, err := dist.InitContext(c.Context, cfg)
	if err != nil {
		if c.Context.Err() != nil {
			return rankInfo{}, &exitError{code: exitInterrupted, msg: err.Error()}
		}
		return rankInfo{}, failuref("%v", err)
	}
	return rankInfo{cfg: cfg, group: g, baseSplit: split}, nil
}

// launchRanks checks what a run needs once, then starts n ranks of this command line and
// waits for them. The error names the first rank that failed.
func (e *env) launchRanks(c *cli.Context, cfg config.Config, n int, writes bool) error {
	if writes {
		if err := checkWritable(cfg.Out); err != nil {
			return err
		}
	}
	if _, err := checkRuntime(cfg.Device); err != nil {
		return err
	}
	if !torch.DistributedAvailable() {
		return failuref("--nproc %d: this build has no c10d/Gloo (install libgloo-dev and rebuild the shim: cmake -S . -B build && cmake --build build)", n)
	}
	exe, err := os.Executable()
	if err != nil {
		return failuref("--nproc: cannot find this program: %v", err)
	}
	env := os.Environ()
	if _, set := os.LookupEnv("OMP_NUM_THREADS"); !set {
		env = append(env, "OMP_NUM_THREADS=1") // as torchrun: ranks share the cores
	}
	if !c.Bool("quiet") {
		fmt.Fprintf(e.stderr, "ldtorch: starting %d ranks on 127.0.0.1 (c10d Gloo); rank 0 reports\n", n)
	}
	// Rank 0 writes to this process's stderr (a terminal stays one); the others' output is
	// held, so that a failure every rank meets (a resume with another --nproc, a bad
	// setting) is shown once, by rank 0.
	held := make([]*tailBuffer, n)
	ends := make([]error, n)
	kill, stopWatching := secondInterrupt(c.Context)
	defer stopWatching()
	err = dist.Launch(c.Context, dist.LaunchOptions{N: n, Path: exe, Args: e.argv[1:], Env: env, Stdout: e.stdout, Stderr: e.stderr, Kill: kill,
		RankStderr: func(r int) io.Writer {
			if r == 0 {
				return e.stderr
			}
			held[r] = &tailBuffer{limit: 64 << 10}
			return held[r]
		},
		Exited: func(r int, err error) { ends[r] = err },
	})
	rank0Spoke := exitedWithStatus(ends[0]) // a failed rank 0 printed why, for the group
	shown := false
	for r := 1; r < n; r++ {
		if out := held[r].String(); out != "" {
			body, last := splitFinalMessage(out)
			if last != "" && rank0Spoke {
				last = "" // its failure is rank 0's, or rank 0's message names it
			}
			if body+last != "" {
				fmt.Fprint(e.stderr, body+last)
				shown = shown || (last != "" && ends[r] != nil)
			}
		}
	}
	if err == nil {
		return nil
	}
	select {
	case <-kill:
		return &exitError{code: exitInterrupted, msg: "interrupted twice: the ranks were killed (what they wrote before is kept)"}
	default:
	}
	if c.Context.Err() != nil || errors.Is(err, context.Canceled) {
		if rank0Spoke {
			return &exitError{code: exitInterrupted} // rank 0 said where it stopped
		}
		return &exitError{code: exitInterrupted, msg: "interrupted: " + err.Error()}
	}
	var re *dist.RankExit
	if errors.As(err, &re) {
		switch {
		case !exitedWithStatus(re.Err):
			return failuref("%v", err) // killed by a signal: it could not say anything
		case rank0Spoke:
			return &exitError{code: exitCode(ends[0])} // rank 0's message stands for the group
		case shown || re.Rank == 0:
			return &exitError{code: exitCode(re.Err)}
		}
		return &exitError{code: exitCode(re.Err), msg: err.Error() + " without a message"}
	}
	return failuref("%v", err)
}

// exitedWithStatus reports whether a rank ended by exiting with a non-zero status (having
// printed its own message), rather than succeeding or being killed by a signal.
func exitedWithStatus(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && ee.ExitCode() > 0
}

// exitCode is a failed rank's exit status (exitFailure when it has none).
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() > 0 {
		return ee.ExitCode()
	}
	return exitFailure
}

// splitFinalMessage splits a rank's output into what came before its final message (the
// last line, when it is one of ldtorch's "ldtorch COMMAND: …" lines) and that message.
func splitFinalMessage(out string) (body, last string) {
	trimmed := strings.TrimSuffix(out, "\n")
	i := strings.LastIndexByte(trimmed, '\n') + 1
	if strings.HasPrefix(trimmed[i:], "ldtorch ") {
		return out[:i], out[i:]
	}
	return out, ""
}

// tailBuffer keeps the last limit bytes written to it; safe for concurrent use.
type tailBuffer struct {
	mu    sync.Mutex
	limit int
	b     []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.limit {
		t.b = append(t.b[:0], t.b[len(t.b)-t.limit:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// distillRank is a rank other than 0: the same Distill, with no progress and no output.
func (e *env) distillRank(c *cli.Context, cfg config.Resolved, rank rankInfo) error {
	g := rank.group
	defer g.Close()
	opts := rank.runOptions()
	if c.IsSet("resume") {
		if c.String("resume") == "" {
			return usageErrorf("--resume needs a folder")
		}
		opts = append(opts, labeldistill.WithResume(c.String("resume")))
	}
	saveModels, err := saveModelsFlag(c)
	if err != nil {
		return err
	}
	if saveModels != "" {
		opts = append(opts, labeldistill.WithSaveModels(saveModels))
	}
	_, err = labeldistill.DistillResolved(c.Context, cfg, opts...)
	if err != nil {
		g.Abort(err)
		if c.Context.Err() != nil {
			return &exitError{code: exitInterrupted, msg: fmt.Sprintf("rank %d of %d: interrupted", g.Rank(), g.Size())}
		}
		return failuref("rank %d of %d: %v", g.Rank(), g.Size(), err)
	}
	return nil
}
