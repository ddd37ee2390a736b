// distill.go: `ldtorch distill`: resolve the configuration (flags > LDTORCH_* variables >
// --config file > defaults), check the output folder, run labeldistill.Distill with progress
// on stderr, write the artifact and print a summary of the distilled labels against the
// baselines.

package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/labeldistill/rundir"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/torch/dist"
	"github.com/ldtorch/ldtorch/torch/fileio/atomicfile"
)

func (e *env) distillCommand() *cli.Command {
	flags := append([]cli.Flag{
		&cli.BoolFlag{Name: "dry-run", Usage: "print the resolved configuration as JSON and exit", Category: catRun},
		&cli.BoolFlag{Name: "report", Usage: "after the run, draw its figures and write OUT/report.html (as ldtorch report OUT)", Category: catRun},
		&cli.StringFlag{Name: "resume", Usage: "continue the run checkpointed in `DIR` (an earlier --out, or its checkpoints folder) with its own settings; " +
			"flags given beside it must agree, except more --epochs (extends the run, also a finished one), --threads, --device, --data-dir, --out, --checkpoint-every and --quiet", Category: catRun},
		&cli.BoolFlag{Name: "overwrite", Usage: "start a fresh run in an --out that holds an earlier run: its artifact stays until the new one is written, its checkpoints are removed, and what was made from its artifact (report.html, figures/, studies/, evaluations/, gradvar.json) once the new one replaces it", Category: catRun},
		&cli.StringFlag{Name: "save-models", Usage: "keep the final test's trained models in `DIR` as model-K.pt (PyTorch state dicts of docs/ARTIFACT.md's modules) with models.json", Category: catRun},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print no progress", EnvVars: []string{envName("quiet")}, Category: catSystem},
		&cli.IntFlag{Name: "nproc", Value: 1, Usage: "run as `N` data-parallel processes on this machine (c10d Gloo over 127.0.0.1; each rank gets OMP_NUM_THREADS=1 unless set). " +
			"Under torchrun --no_python (or with MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE set) this process is one rank and --nproc may be left out. " +
			"The ranks agree with one process to float rounding, which method dd's unrolled steps enlarge over the meta-steps (docs/RELIABILITY.md, Data-parallel runs)", Category: catSystem},
	}, runConfigFlags()...)
	return &cli.Command{
		Name:  "distill",
		Usage: "learn labels for N base examples and evaluate them against baselines",
		UsageText: "ldtorch distill --dataset mnist --method ld --base 100 --epochs 400 --out DIR [flags]\n" +
			"ldtorch distill --config run.json --out DIR",
		Description: "Distils labels (docs/ALGORITHM.md), validates them every --validate-every epochs keeping the best, " +
			"trains --eval-models fresh models on them for the test accuracy, runs the --baselines, and writes " +
			"DIR/distilled.npz, DIR/distilled.pt (the same arrays for PyTorch's torch.load) and DIR/report.json. " +
			"Flag values win over LDTORCH_<FLAG> variables, which win over " +
			"--config, which wins over the defaults; 0 / empty values documented as auto are derived from the " +
			"dataset and N.",
		Flags:  flags,
		Action: e.distillAction,
	}
}

func (e *env) distillAction(c *cli.Context) (err error) {
	if c.Args().Present() {
		return usageErrorf("unexpected argument %q (distill takes only flags; see ldtorch distill --help)", c.Args().First())
	}
	cfg, src, err := e.resolveConfig(c)
	if err != nil {
		return err
	}
	if c.Bool("dry-run") {
		b, err := cfg.MarshalIndent()
		if err != nil {
			return err
		}
		_, err = e.stdout.Write(b)
		return err
	}
	// Data-parallel: a launcher starts the ranks; a rank other than 0 computes and writes
	// nothing; rank 0 goes on as a lone run would, with its group.
	rank, err := e.rankOf(c)
	if err != nil {
		return err
	}
	if rank.launch > 1 {
		return e.launchRanks(c, cfg.Config, rank.launch, true)
	}
	if !rank.root() {
		return e.distillRank(c, cfg, rank)
	}
	if rank.group != nil {
		defer func() {
			if err != nil {
				rank.group.Abort(err) // the other ranks stop now, naming rank 0 and why
			}
			rank.group.Close()
		}()
	}
	info, err := checkRuntime(cfg.Device)
	if err != nil {
		return err
	}
	if err := checkWritable(cfg.Out); err != nil {
		return err
	}
	// One run per folder: the lock is held until this process ends (the kernel drops it
	// when the process dies, so a killed run leaves no stale lock).
	unlock, err := lockOut("--out", cfg.Out)
	if err != nil {
		return err
	}
	defer unlock()
	resuming, overwrite := c.IsSet("resume"), c.Bool("overwrite")
	if resuming && overwrite {
		return usageErrorf("--overwrite starts a fresh run and --resume continues one: give one of them")
	}
	out, err := rundir.OpenOut(cfg.Out, resuming, overwrite, artifact.DistilledFile, artifact.ReportFile)
	var earlier *rundir.EarlierRunError
	if errors.As(err, &earlier) {
		return earlierRunError(earlier)
	}
	saveModels, err := saveModelsFlag(c)
	if err != nil {
		return err
	}
	if overwrite && cfg.CheckpointEvery >= 0 {
		out.RemoveEarlierCheckpoints() // the new run's checkpoints must not mix with them
	}
	pr := newProgress(e.stderr, e.stderrTTY, c.Bool("quiet"))
	source := ""
	if cfg.IsCrossDataset() {
		source = ", base examples from " + cfg.Source
	}
	pr.note("distilling %s%s: method %s, N=%d, epochs %d, seed %d, %s, libtorch %s; data from %s",
		cfg.Dataset, source, cfg.Method, cfg.BaseExamples, cfg.Epochs, cfg.Seed, cfg.Device, info.TorchVersion, cfg.DataDir)

	oldArtifact := ""
	if out.Replacing {
		pr.note("%s already holds an artifact: it will be replaced when this run succeeds", cfg.Out)
		oldArtifact = artifactSum(cfg.Out)
	}
	ctx := c.Context
	opts := []labeldistill.RunOption{labeldistill.WithProgress(func(p labeldistill.Progress) {
		if p.Phase != "checkpoint" || strings.HasPrefix(p.Message, "warning") { // routine checkpoints stay quiet
			pr.update(p)
		}
	})}
	if cfg.CheckpointEvery >= 0 {
		opts = append(opts, labeldistill.WithCheckpointDir(out.CheckpointDir()))
	}
	opts = append(opts, labeldistill.WithHistory(out.HistoryPath()))
	if resuming {
		opts = append(opts, labeldistill.WithResume(c.String("resume")))
	}
	if saveModels != "" {
		opts = append(opts, labeldistill.WithSaveModels(saveModels))
	}
	if bf := baseFileRead(c); bf != nil { // the file is recorded with the run (report.json base_origin)
		opts = append(opts, labeldistill.WithBaseFile(bf))
	}
	if rank.group != nil {
		pr.note("rank 0 of %d (c10d Gloo, store %s:%d)", rank.group.Size(), rank.cfg.Addr, rank.cfg.Port)
		opts = append(opts, rank.runOptions()...)
	}
	started := time.Now()
	res, err := labeldistill.DistillResolved(ctx, cfg, opts...)
	pr.done()
	if err == nil && ctx.Err() != nil {
		err = ctx.Err() // the signal came after the last check: still no artifact
	}
	if err != nil {
		out.Failed()
		var peer *dist.RankError
		if ctx.Err() != nil || errors.Is(err, context.Canceled) || (errors.As(err, &peer) && peer.Interrupted) {
			msg := fmt.Sprintf("interrupted after %d meta-steps; no artifact was written to %s", pr.step, cfg.Out)
			if peer != nil && peer.Interrupted && ctx.Err() == nil { // a rank was interrupted alone
				msg = fmt.Sprintf("rank %d was interrupted after %d meta-steps; no artifact was written to %s", peer.Culprit[0], pr.step, cfg.Out)
			}
			if out.Checkpoints() > 0 {
				world := 1
				if rank.group != nil {
					world = rank.group.Size()
				}
				if p := out.PhasesSince(started); p != "" {
					msg += fmt.Sprintf("; what it finished of the final test and the baselines (each test model as it was scored) is kept in %s", p)
				}
				msg += "; continue with: " + resumeCommand(c, cfg.Out, world)
			}
			return &exitError{code: exitInterrupted, msg: msg}
		}
		var re *rundir.ResumeError
		if errors.As(err, &re) {
			return usageErrorf("--resume: %s", re.Msg)
		}
		var de *labeldistill.DivergedError
		if errors.As(err, &de) {
			return failuref("%s", divergedMessage(de))
		}
		var nf *labeldistill.NonFiniteError
		if errors.As(err, &nf) && nf.Setting != "" { // named as the user gave it: flag, variable or file key
			name, file, inFile := strings.Cut(src.describe(nf.Setting), " in ")
			value := fmt.Sprintf("%g", nf.SettingValue)
			if inFile {
				value += " (in " + file + ")"
			}
			return failuref("%s", strings.Replace(err.Error(), nf.Setting+" "+fmt.Sprintf("%g", nf.SettingValue), name+" "+value, 1))
		}
		return distillError(err, src)
	}
	if err := artifact.Write(cfg.Out, res); err != nil {
		msg := err.Error()
		if out.Checkpoints() > 0 {
			world := 1
			if rank.group != nil {
				world = rank.group.Size()
			}
			var ae *atomicfile.Error
			if !errors.As(err, &ae) || ae.Step != "rename" { // written in full before any rename
				msg += "; no file of the artifact was replaced"
			}
			msg += fmt.Sprintf("; the run's last checkpoint and its finished final test and baselines are kept in %s: once the cause is mended (space freed), continue with: %s", filepath.Join(cfg.Out, "checkpoints"), resumeCommand(c, cfg.Out, world))
		}
		return failuref("%s", msg)
	}
	if overwrite && cfg.CheckpointEvery < 0 {
		out.RemoveEarlierCheckpoints() // they belong to the run the new artifact replaced
	}
	stale := removeStale(cfg.Out, oldArtifact)
	printSummary(e.stdout, res, cfg.Out)
	if len(stale) > 0 {
		fmt.Fprintf(e.stdout, "removed what was made from the artifact this run replaced: %s\n", strings.Join(stale, ", "))
	}
	if saveModels != "" {
		fmt.Fprintf(e.stdout, "final test models saved in %s (model-K.pt, %s)\n", saveModels, train.ManifestFile)
	}
	if c.Bool("report") {
		return writeReport(ctx, e.stdout, cfg.Out, "", fmt.Sprintf("the artifact is written to %s; ", cfg.Out))
	}
	return nil
}

// saveModelsFlag is --save-models DIR, checked (train.NewModelSaver: created, writable, not
// holding saved models) before the run starts; "" when not given.
func saveModelsFlag(c *cli.Context) (string, error) {
	dir := c.String("save-models")
	if !c.IsSet("save-models") {
		return "", nil
	}
	if dir == "" {
		return "", usageErrorf("--save-models needs a folder")
	}
	if _, err := train.NewModelSaver(dir); err != nil {
		return "", usageErrorf("--save-models %s: %v", dir, err)
	}
	return dir, nil
}
