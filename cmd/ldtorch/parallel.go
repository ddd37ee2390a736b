// parallel.go: `ldtorch distill` as several data-parallel processes: --nproc N starts N
// local ranks of this same command line; a process started by torchrun (or with the
// environment variables it sets) is one rank. Rank 0 does everything a lone run does;
// the other ranks compute and write nothing.

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/urfave/cli/v2"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/dist"
)

// rankInfo is this process's role: a launcher of `launch` ranks, a rank of a group, or a
// lone run (neither).
type rankInfo struct {
	launch int
	cfg    dist.Config
	group  *dist.Group // joined by rankOf for a rank; nil for a lone run
}

func (r rankInfo) root() bool { return r.group == nil || r.group.IsRoot() }

// rankOf reads --nproc and the distributed environment and, for a rank, joins its group.
func (e *env) rankOf(c *cli.Context) (rankInfo, error) {
	n := c.Int("nproc")
	if n < 1 {
		return rankInfo{}, usageErrorf("--nproc: must be at least 1, got %d", n)
	}
	cfg, isRank, err := dist.FromEnv()
	if err != nil {
		return rankInfo{}, usageErrorf("%v", err)
	}
	if !isRank {
		if n > 1 {
			return rankInfo{launch: n}, nil
		}
		return rankInfo{}, nil
	}
	if c.IsSet("nproc") && n != cfg.WorldSize {
		return rankInfo{}, usageErrorf("--nproc %d but WORLD_SIZE=%d in the environment", n, cfg.WorldSize)
	}
	if cfg.WorldSize == 1 {
		return rankInfo{}, nil
	}
	if _, err := torch.RuntimeInfo(); err != nil {
		return rankInfo{}, failuref("%v", err)
	}
	g, err := dist.Init(cfg)
	if err != nil {
		return rankInfo{}, failuref("%v", err)
	}
	return rankInfo{cfg: cfg, group: g}, nil
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
	err = dist.Launch(c.Context, dist.LaunchOptions{N: n, Path: exe, Args: e.argv[1:], Env: env, Stdout: e.stdout, Stderr: e.stderr})
	if err == nil {
		return nil
	}
	if c.Context.Err() != nil || errors.Is(err, context.Canceled) {
		return &exitError{code: exitInterrupted, msg: "interrupted: " + err.Error()}
	}
	var re *dist.RankExit
	if errors.As(err, &re) {
		// the rank printed its own message; exit as it did (2 for a usage error)
		code := exitFailure
		var ee *exec.ExitError
		if errors.As(re.Err, &ee) && ee.ExitCode() > 0 {
			code = ee.ExitCode()
		}
		return &exitError{code: code, msg: err.Error() + " (its message is above)"}
	}
	return failuref("%v", err)
}

// distillRank is a rank other than 0: the same Distill, with no progress and no output.
func (e *env) distillRank(c *cli.Context, cfg config.Config, rank rankInfo) error {
	g := rank.group
	defer g.Close()
	opts := []labeldistill.RunOption{labeldistill.WithGroup(g)}
	if c.IsSet("resume") {
		if c.String("resume") == "" {
			return usageErrorf("--resume needs a folder")
		}
		opts = append(opts, labeldistill.WithResume(c.String("resume")))
	}
	_, err := labeldistill.Distill(c.Context, cfg, opts...)
	if err != nil {
		g.Abort(err)
		if c.Context.Err() != nil {
			return &exitError{code: exitInterrupted, msg: fmt.Sprintf("rank %d of %d: interrupted", g.Rank(), g.Size())}
		}
		return failuref("rank %d of %d: %v", g.Rank(), g.Size(), err)
	}
	return nil
}
