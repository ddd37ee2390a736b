// bench.go: `ldtorch bench`: time meta-steps and evaluation-model steps of a configuration
// with bench.Run and print the result as one JSON line.

package main

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/bench"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/torch"
)

func (e *env) benchCommand() *cli.Command {
	flags := append([]cli.Flag{
		&cli.IntFlag{Name: "steps", Value: 20, Usage: "timed meta-`STEPS`", EnvVars: []string{envName("steps")}, Category: catRun},
		&cli.IntFlag{Name: "warmup", Value: 3, Usage: "untimed warm-up meta-`STEPS` first", EnvVars: []string{envName("warmup")}, Category: catRun},
		&cli.IntFlag{Name: "batched-eval-steps", Usage: "also time the final evaluation (--eval-models fresh models, `STEPS` steps each, scored on the test split) with the models trained one after another and together (0: skip)",
			EnvVars: []string{envName("batched-eval-steps")}, Category: catRun},
		&cli.IntFlag{Name: "together", Value: 1, Usage: "time meta-steps of `K` LD RR runs (seeds --seed, +1, …) distilled together in this process (as sweep --together); each timed step is all K's", Category: catSystem},
		&cli.IntFlag{Name: "nproc", Value: 1, Usage: "time data-parallel meta-steps of `N` local ranks (as distill --nproc; rank 0 prints)", Category: catSystem},
		&cli.BoolFlag{Name: "op-census", Usage: "also count libtorch's operator calls per timed meta-step and evaluation step, by operator (JSON op_census; counting slows every call a little, so compare these timings only with others taken with it)",
			EnvVars: []string{envName("op-census")}, Category: catRun},
	}, runConfigFlags()...)
	return &cli.Command{
		Name:      "bench",
		Usage:     "time meta-steps and evaluation steps of a configuration (one JSON line)",
		UsageText: "ldtorch bench --dataset mnist --method ld --base 100 [--steps 20 --warmup 3] [--device cuda] [--threads N]",
		Description: "Loads the data of the configuration (same flags, variables and --config as distill), runs --warmup " +
			"untimed and --steps timed meta-steps, times evaluation-model training steps (and, with --batched-eval-steps, " +
			"the whole final evaluation with the models trained one after another and together), and prints the medians " +
			"and the environment (threads, BLAS, device, libtorch, malloc) as one JSON line on stdout.",
		Flags:  flags,
		Action: e.benchAction,
	}
}

func (e *env) benchAction(c *cli.Context) (err error) {
	if c.Args().Present() {
		return usageErrorf("unexpected argument %q (bench takes only flags)", c.Args().First())
	}
	steps, warmup, evalSteps := c.Int("steps"), c.Int("warmup"), c.Int("batched-eval-steps")
	if steps < 1 || steps > maxIntFlag {
		return usageErrorf("--steps: must be at least 1, got %d", steps)
	}
	if warmup < 0 || warmup > maxIntFlag {
		return usageErrorf("--warmup: must be 0 or more, got %d", warmup)
	}
	if evalSteps < 0 || evalSteps > maxIntFlag {
		return usageErrorf("--batched-eval-steps: must be 0 or more, got %d", evalSteps)
	}
	together := c.Int("together")
	if together < 1 || together > maxSweepTogether {
		return usageErrorf("--together: must be between 1 and %d, got %d", maxSweepTogether, together)
	}
	if c.Bool("op-census") && warmup < 1 {
		return usageErrorf("--op-census: needs --warmup 1 or more (the first meta-step also sets the run up), got --warmup %d", warmup)
	}
	cfg, src, err := e.resolveConfig(c)
	if err != nil {
		return err
	}
	if _, err := checkRuntime(cfg.Device); err != nil {
		return err
	}
	rank, err := e.rankOf(c)
	if err != nil {
		return err
	}
	if rank.launch > 1 {
		return e.launchRanks(c, cfg.Config, rank.launch, false)
	}
	if g := rank.group; g != nil {
		defer func() {
			if err != nil {
				g.Abort(err)
			}
			g.Close()
		}()
	}
	fail := func(err error) error {
		if c.Context.Err() != nil {
			return &exitError{code: exitInterrupted, msg: "interrupted"}
		}
		var fe *config.FieldError
		if errors.As(err, &fe) {
			return configError(err, src)
		}
		return distillError(err, src)
	}
	// Both benchmarks share one loaded dataset.
	ds, err := labeldistill.LoadData(cfg.Config)
	if err != nil {
		return fail(err)
	}
	res, err := bench.Run(c.Context, cfg.Config, bench.Options{Steps: steps, Warmup: warmup, OpCensus: c.Bool("op-census"), BaseSplit: rank.baseSplit, Together: together}, ds, rank.group)
	if err != nil {
		return fail(err)
	}
	var evalRes *bench.EvaluationResult
	if evalSteps > 0 {
		if evalRes, err = bench.Evaluation(c.Context, cfg.Config, evalSteps, ds); err != nil {
			return fail(err)
		}
	}
	if !rank.root() {
		return nil
	}
	b, err := json.Marshal(struct {
		*bench.Result
		*bench.EvaluationResult `json:",omitempty"`
		Malloc                  string `json:"malloc"`      // the process's allocator settings (malloc.go)
		DirectConv              string `json:"direct_conv"` // the shim's convolution kernels, "" for libtorch's
		BLASCore                string `json:"blas_core"`   // OpenBLAS's kernel set (blas.go), "" for another BLAS
	}{res, evalRes, mallocSummary(), torch.DirectConvISA(), torch.BLASCore()})
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s\n", b)
	return nil
}
