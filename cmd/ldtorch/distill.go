// distill.go: `ldtorch distill`: resolve the configuration (flags > LDTORCH_* variables >
// --config file > defaults), check the output folder, run labeldistill.Distill with progress
// on stderr, write the artifact and print a summary of the distilled labels against the
// baselines.

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/labeldistill/checkpoint"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/atomicfile"
	"github.com/ldtorch/ldtorch/torch/dist"
)

// runConfigFlags are --config and one flag per Config field (distill and bench).
func runConfigFlags() []cli.Flag {
	def := config.Default()
	flags := []cli.Flag{
		&cli.StringFlag{Name: "config", Usage: "read settings from a JSON `FILE` (keys: the config's json names, e.g. base_examples)", EnvVars: []string{envName("config")}, Category: catRun},
	}
	for _, f := range configFlags() {
		flags = append(flags, f.cliFlag(def))
	}
	return flags
}

func (e *env) distillCommand() *cli.Command {
	flags := append([]cli.Flag{
		&cli.BoolFlag{Name: "dry-run", Usage: "print the resolved configuration as JSON and exit", Category: catRun},
		&cli.BoolFlag{Name: "report", Usage: "after the run, draw its figures and write OUT/report.html (as ldtorch report OUT)", Category: catRun},
		&cli.StringFlag{Name: "resume", Usage: "continue the run checkpointed in `DIR` (an earlier --out, or its checkpoints folder) with its own settings; " +
			"flags given beside it must agree, except more --epochs (extends the run, also a finished one), --threads, --device, --data-dir, --out, --checkpoint-every and --quiet", Category: catRun},
		&cli.BoolFlag{Name: "overwrite", Usage: "start a fresh run in an --out that holds an earlier run: its artifact stays until the new one is written, its checkpoints are removed", Category: catRun},
		&cli.StringFlag{Name: "save-models", Usage: "keep the final test's trained models in `DIR` as model-K.pt (PyTorch state dicts of docs/ARTIFACT.md's modules) with models.json", Category: catRun},
		&cli.BoolFlag{Name: "quiet", Aliases: []string{"q"}, Usage: "print no progress", EnvVars: []string{envName("quiet")}, Category: catSystem},
		&cli.IntFlag{Name: "nproc", Value: 1, Usage: "run as `N` data-parallel processes on this machine (c10d Gloo over 127.0.0.1; each rank gets OMP_NUM_THREADS=1 unless set). " +
			"Under torchrun --no_python (or with MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE set) this process is one rank and --nproc may be left out", Category: catSystem},
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

// resolveConfig builds the run's configuration from defaults, --config, variables and flags.
func (e *env) resolveConfig(c *cli.Context) (config.Config, *valueSource, error) {
	src := &valueSource{args: e.args, isSet: c.IsSet, configKeys: map[string]bool{}}
	cfg := config.Default()
	// --resume DIR starts from the checkpoint's own settings; what is given beside it
	// (file, variables, flags) is applied over them and checked by the resume.
	resuming := c.IsSet("resume")
	var ckCfg config.Config
	if resuming {
		dir := c.String("resume")
		if dir == "" {
			return cfg, src, usageErrorf("--resume needs a folder")
		}
		ck, _, ckptDir, err := labeldistill.CheckpointConfig(dir)
		if err != nil {
			var re *labeldistill.ResumeError
			if errors.As(err, &re) {
				return cfg, src, usageErrorf("--resume: %s", re.Msg)
			}
			return cfg, src, usageErrorf("--resume: %v", err)
		}
		cfg, ckCfg = ck, ck
		cfg.Out = filepath.Clean(dir) // the resumed run's output folder
		if filepath.Clean(ckptDir) == filepath.Clean(dir) && filepath.Base(ckptDir) == "checkpoints" {
			cfg.Out = filepath.Dir(ckptDir)
		}
	}
	if path := c.String("config"); c.IsSet("config") {
		// Name what gave the file: the flag, or LDTORCH_CONFIG.
		what := "--config"
		if !src.onCommandLine("config") {
			what = envName("config") + "=" + path
		}
		if path == "" {
			return cfg, src, usageErrorf("%s needs a file name", what)
		}
		src.configFile = path
		loaded, keys, err := config.ReadFileKeysContext(c.Context, path)
		if err != nil {
			if c.Context.Err() != nil { // interrupted while a named pipe waited for its writer
				return cfg, src, err
			}
			var pe *fs.PathError
			if errors.As(err, &pe) {
				if _, lerr := os.Lstat(path); lerr == nil {
					return cfg, src, usageErrorf("%s: cannot read it: %s", what, unreadable(path, err))
				}
				return cfg, src, usageErrorf("%s: cannot read %s: %v", what, path, pe.Err)
			}
			return cfg, src, usageErrorf("%s: %v", what, err)
		}
		src.configKeys = keys
		// Integers are capped like flags and variables: anything larger is a typo.
		lv := reflect.ValueOf(loaded)
		for _, f := range configFlags() {
			if k := f.typ.Kind(); src.configKeys[f.key] && k == reflect.Int {
				if n := lv.Field(f.field).Int(); n > maxIntFlag || n < -maxIntFlag {
					return cfg, src, usageErrorf("%s in %s: %d is out of range (at most %d in magnitude)", f.key, path, n, maxIntFlag)
				}
			}
		}
		if resuming {
			copyConfigKeys(&cfg, loaded, src.configKeys)
		} else {
			cfg = loaded
		}
	}
	if err := applyConfigFlags(c, &cfg); err != nil {
		return cfg, src, err
	}
	// Given base indices say how many base examples there are, unless N is set too.
	if cfg.BaseIndices != nil && !c.IsSet("base") && !src.configKeys["base_examples"] {
		cfg.BaseExamples = len(cfg.BaseIndices)
	}
	// Unless given, read data where `ldtorch data fetch` puts it.
	if !c.IsSet("data-dir") && !src.configKeys["data_dir"] && !resuming {
		dir, err := data.DataDir("")
		if err != nil {
			return cfg, src, usageErrorf("--data-dir: %v", err)
		}
		cfg.DataDir = dir
	}
	resolved, err := cfg.Resolved()
	if err != nil && resuming {
		// A setting the checkpoint's run does not share is named as such, rather than a
		// setting the checks blame because of it (another --dataset makes the recorded
		// base_selection invalid for a cross-dataset run). (When the settings are valid,
		// the resume itself compares them, resolved.)
		if err := resumeConflicts(c.String("resume"), ckCfg, cfg); err != nil {
			return cfg, src, err
		}
	}
	if err != nil {
		return cfg, src, configError(err, src)
	}
	if resuming { // refused here, before the run announces itself (Distill checks again)
		if err := resumeConflicts(c.String("resume"), ckCfg, resolved); err != nil {
			return cfg, src, err
		}
	}
	if err := ddIgnoredSettings(resolved, src); err != nil {
		return cfg, src, err
	}
	return resolved, src, nil
}

// ddIgnoredSettings refuses a setting given for method dd that it would ignore: dd has no
// online model, labels, ridge head or resets (docs/ALGORITHM.md §12), and its own models
// train with the learnt step sizes on N/dd_steps images per step, so the recipe's batch and
// rate are only the baselines' (inner_batch is their batch unless eval_batch is given).
func ddIgnoredSettings(cfg config.Config, src *valueSource) error {
	if cfg.Method != config.MethodDD {
		return nil
	}
	for _, key := range []string{"inner_lr", "model_lr", "model_betas", "model_eps", "label_lr", "label_betas", "label_eps",
		"ridge_lambda", "ridge_pseudo_step", "scale_lr", "scale_init", "reset_window", "reset_mean_of_last"} {
		if src.given(key) {
			return usageErrorf("%s does not apply to method dd: it has no online model, labels, ridge head or resets (it learns images and step sizes; docs/ALGORITHM.md §12)", src.describe(key))
		}
	}
	none := len(cfg.Baselines) == 0
	for _, s := range []struct {
		key, when string
		unused    bool
	}{
		{"eval_lr", "without baselines (--baselines none)", none},
		{"eval_batch", "without baselines (--baselines none)", none},
		{"inner_batch", "without baselines (--baselines none)", none},
		{"inner_batch", "beside --eval-batch, the baselines' batch", src.given("eval_batch")},
	} {
		if s.unused && src.given(s.key) {
			return usageErrorf("%s does not apply to method dd %s: its models train with the learnt step sizes on N/dd_steps images per step, and only the baselines take a batch and a learning rate", src.describe(s.key), s.when)
		}
	}
	return nil
}

// resumeConflicts is the usage error naming the settings of now that the checkpointed run
// in dir does not share (config.ResumeConflicts), nil when there are none.
func resumeConflicts(dir string, checkpointed, now config.Config) error {
	conflicts := config.ResumeConflicts(checkpointed, now)
	if len(conflicts) == 0 {
		return nil
	}
	var lines []string
	for _, d := range config.DiffDetails(checkpointed, now) {
		name, _, _ := strings.Cut(d, ":")
		if slices.Contains(conflicts, name) {
			lines = append(lines, d)
		}
	}
	return usageErrorf("--resume: the run in %s has other settings (checkpoint -> now): %s; a resume continues the same run (start a new one with another --out)",
		dir, strings.Join(lines, "; "))
}

// checkWritable creates dir if needed and proves it writable (atomicfile.EnsureWritableDir).
func checkWritable(dir string) error {
	if fi, err := os.Lstat(dir); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		if _, err := os.Stat(dir); err != nil {
			return usageErrorf("--out: %s", unreadable(dir, err))
		}
	}
	err := atomicfile.EnsureWritableDir(dir)
	if err == nil {
		return nil
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return usageErrorf("--out: output folder %s is not writable: %v", dir, err)
}

// checkRuntime verifies the libtorch runtime (the shim's ABI) and the device.
func checkRuntime(device string) (torch.Info, error) {
	info, err := torch.RuntimeInfo()
	if err != nil {
		return info, failuref("%v", err)
	}
	dev, err := torch.ParseDevice(device)
	if err != nil {
		return info, usageErrorf("--device: %v", err)
	}
	if dev.IsCUDA() {
		switch {
		case !info.CUDA:
			return info, usageErrorf("--device %s: CUDA is not available (libtorch %s, %s)", device, info.TorchVersion, info.Build)
		case dev.Index >= info.CUDADevices:
			return info, usageErrorf("--device %s: only %d CUDA device(s) present", device, info.CUDADevices)
		}
	}
	return info, nil
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
		return e.launchRanks(c, cfg, rank.launch, true)
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
	ckptDir := filepath.Join(cfg.Out, "checkpoints")
	oldCkpts, _ := checkpoint.Files(ckptDir) // none when the folder is absent
	replacing := fileExists(filepath.Join(cfg.Out, artifact.DistilledFile)) || fileExists(filepath.Join(cfg.Out, artifact.ReportFile))
	// A fresh run must not mix with an earlier run in the same folder: keeping the newest
	// three checkpoints would delete its own, --resume would find the other run's, and the
	// artifact would be replaced without being asked to.
	if !resuming && !overwrite && (replacing || len(oldCkpts) > 0) {
		held := []string{}
		if replacing {
			held = append(held, "an artifact ("+artifact.DistilledFile+", "+artifact.ReportFile+")")
		}
		if len(oldCkpts) > 0 {
			held = append(held, fmt.Sprintf("%d checkpoint(s)", len(oldCkpts)))
		}
		how := fmt.Sprintf("continue or extend it with --resume %s (more --epochs to extend)", cfg.Out)
		if len(oldCkpts) == 0 {
			how = "no checkpoints to continue from"
		}
		return usageErrorf("--out: %s already holds an earlier run: %s; %s, start over with --overwrite (the old artifact stays until the new one is written), or choose another --out",
			cfg.Out, strings.Join(held, " and "), how)
	}
	removeOldCkpts := func() {
		for _, p := range oldCkpts {
			os.Remove(p)
		}
		os.Remove(filepath.Join(ckptDir, labeldistill.PhasesFile)) // the old run's finished phases
	}
	saveModels, err := saveModelsFlag(c)
	if err != nil {
		return err
	}
	if overwrite && cfg.CheckpointEvery >= 0 {
		removeOldCkpts() // the new run's checkpoints must not mix with them
	}
	pr := newProgress(e.stderr, e.stderrTTY, c.Bool("quiet"))
	source := ""
	if cfg.IsCrossDataset() {
		source = ", base examples from " + cfg.Source
	}
	pr.note("distilling %s%s: method %s, N=%d, epochs %d, seed %d, %s, libtorch %s; data from %s",
		cfg.Dataset, source, cfg.Method, cfg.BaseExamples, cfg.Epochs, cfg.Seed, cfg.Device, info.TorchVersion, cfg.DataDir)

	if replacing {
		pr.note("%s already holds an artifact: it will be replaced when this run succeeds", cfg.Out)
	}
	ctx := c.Context
	opts := []labeldistill.RunOption{labeldistill.WithProgress(func(p labeldistill.Progress) {
		if p.Phase != "checkpoint" || strings.HasPrefix(p.Message, "warning") { // routine checkpoints stay quiet
			pr.update(p)
		}
	})}
	if cfg.CheckpointEvery >= 0 {
		opts = append(opts, labeldistill.WithCheckpointDir(ckptDir))
	}
	opts = append(opts, labeldistill.WithHistory(filepath.Join(cfg.Out, labeldistill.HistoryFile)))
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
	res, err := labeldistill.Distill(ctx, cfg, opts...)
	pr.done()
	if err == nil && ctx.Err() != nil {
		err = ctx.Err() // the signal came after the last check: still no artifact
	}
	if err != nil {
		os.Remove(ckptDir) // only when empty: a run that failed early leaves no empty folder
		var peer *dist.RankError
		if ctx.Err() != nil || errors.Is(err, context.Canceled) || (errors.As(err, &peer) && peer.Interrupted) {
			msg := fmt.Sprintf("interrupted after %d meta-steps; no artifact was written to %s", pr.step, cfg.Out)
			if peer != nil && peer.Interrupted && ctx.Err() == nil { // a rank was interrupted alone
				msg = fmt.Sprintf("rank %d was interrupted after %d meta-steps; no artifact was written to %s", peer.Culprit[0], pr.step, cfg.Out)
			}
			if m, _ := checkpoint.Files(ckptDir); len(m) > 0 {
				world := 1
				if rank.group != nil {
					world = rank.group.Size()
				}
				if st, err := os.Stat(filepath.Join(ckptDir, labeldistill.PhasesFile)); err == nil && st.ModTime().After(started) {
					msg += fmt.Sprintf("; what it finished of the final test and the baselines (each test model as it was scored) is kept in %s", filepath.Join(ckptDir, labeldistill.PhasesFile))
				}
				msg += "; continue with: " + resumeCommand(c, cfg.Out, world)
			}
			return &exitError{code: exitInterrupted, msg: msg}
		}
		var re *labeldistill.ResumeError
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
		return failuref("%v", err)
	}
	if overwrite && cfg.CheckpointEvery < 0 {
		removeOldCkpts() // they belong to the run the new artifact replaced
	}
	printSummary(e.stdout, res, cfg.Out)
	if saveModels != "" {
		fmt.Fprintf(e.stdout, "final test models saved in %s (model-K.pt, %s)\n", saveModels, train.ManifestFile)
	}
	if c.Bool("report") {
		return writeReport(e.stdout, cfg.Out, "")
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

// resumeCommand is the command line that continues the run checkpointed in out: the
// settings come from the checkpoint; what says where and how it runs is repeated when it
// was given (--data-dir, --threads, --device), and a data-parallel run needs its --nproc.
func resumeCommand(c *cli.Context, out string, world int) string {
	parts := []string{"ldtorch distill --resume", shellQuote(out)}
	if world > 1 {
		parts = append(parts, fmt.Sprintf("--nproc %d", world))
	}
	for _, f := range []string{"data-dir", "threads", "device"} {
		if c.IsSet(f) {
			parts = append(parts, "--"+f, shellQuote(fmt.Sprint(c.Value(f))))
		}
	}
	return strings.Join(parts, " ")
}

// shellQuote quotes s for a POSIX shell when it holds anything but safe characters.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=,+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// commandLine is argv as a command to type again (program name as "ldtorch").
func commandLine(argv []string) string {
	parts := []string{"ldtorch"}
	for _, a := range argv[1:] {
		parts = append(parts, shellQuote(a))
	}
	return strings.Join(parts, " ")
}

// divergedMessage names the flag of a DivergedError's setting.
func divergedMessage(de *labeldistill.DivergedError) string {
	return fmt.Sprintf("%s: all %d evaluation model(s) diverged (non-finite parameters after %d training steps): --%s %g is too large; try a smaller one",
		de.Purpose, de.Models, de.Steps, strings.ReplaceAll(de.Field, "_", "-"), de.LR)
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// copyConfigKeys copies the fields of src named by keys (json names) into dst.
func copyConfigKeys(dst *config.Config, src config.Config, keys map[string]bool) {
	d, sv := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src)
	for _, f := range configFlags() {
		if keys[f.key] {
			d.Field(f.field).Set(sv.Field(f.field))
		}
	}
}

// lockFile is the lock of an output folder, held by the run writing into it.
const lockFile = atomicfile.LockFile

// lockOut takes the lock of the folder dir, given by flag ("": an argument), (atomicfile.LockDir) and returns the
// function that releases it. A folder locked by another process is a usage error naming
// the folder and that process.
func lockOut(flag, dir string) (func(), error) {
	unlock, err := atomicfile.LockDir(dir)
	prefix := ""
	if flag != "" {
		prefix = flag + ": "
	}
	var le *atomicfile.LockedError
	switch {
	case errors.As(err, &le):
		how := "wait for it to end"
		if flag == "--out" {
			how += ", or choose another --out"
		}
		return nil, usageErrorf("%s%s is in use by another run (%s holds %s); %s", prefix, dir, le.Holder(), le.Path, how)
	case err != nil:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, usageErrorf("%scannot create the lock file %s: %v", prefix, pe.Path, pe.Err)
		}
		return nil, failuref("%s%v", prefix, err)
	}
	return unlock, nil
}

// unwrapPath returns the cause of a *fs.PathError (the path is named by the caller).
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// distillError classifies an error of Distill: problems with a setting (*FieldError) are
// usage errors naming the flag, variable or file key.
func distillError(err error, src *valueSource) error {
	var fe *config.FieldError
	if errors.As(err, &fe) {
		return configError(err, src)
	}
	return err
}

// baselineName is how the summary names a baseline key of Result.Baselines.
func baselineName(key string) string {
	base, rr := strings.CutSuffix(key, "_rr")
	name := map[string]string{
		config.BaselineTrue:    "true labels",
		config.BaselineSmooth:  "smoothed labels",
		config.BaselineTeacher: "teacher labels",
	}[base]
	if name == "" {
		name = base
	}
	if rr {
		name += " (RR)"
	}
	return name
}

// baselineKeys lists the result's baselines in the config's order, then any others.
func baselineKeys(res *labeldistill.Result) []string {
	var keys []string
	seen := map[string]bool{}
	for _, b := range res.Config.Baselines {
		for _, k := range []string{b, b + "_rr"} {
			if _, ok := res.Baselines[k]; ok && !seen[k] {
				keys = append(keys, k)
				seen[k] = true
			}
		}
	}
	for k := range res.Baselines {
		if !seen[k] {
			keys = append(keys, k)
		}
	}
	return keys
}

// printSummary prints the run's outcome: distilled labels vs baselines.
func printSummary(w io.Writer, res *labeldistill.Result, out string) {
	cfg := res.Config
	from := ""
	if cfg.IsCrossDataset() {
		from = ", base examples from " + cfg.Source
	}
	fmt.Fprintf(w, "%s on %s%s: %d base examples, seed %d, %s, %s, %s\n",
		cfg.MethodName(), cfg.Dataset, from, cfg.BaseExamples, cfg.Seed, plural(cfg.Epochs, "epoch"),
		plural(res.MetaSteps, "meta-step"), plural(len(res.Resets), "model reset"))
	fmt.Fprintf(w, "best validation %.2f%% after epoch %d; fresh %s models train T = %d steps\n\n",
		res.BestValidation.Accuracy, res.BestValidation.Epoch, cfg.EvalArch, res.T)

	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	column := "labels"
	if cfg.LearnsImages() {
		column = "data" // learnt images, or real ones with baseline labels
	}
	fmt.Fprintf(tw, "%s\ttest accuracy (mean ± std)\tmodels\tsteps\n", column)
	fmt.Fprintf(tw, "distilled (%s)\t%6.2f%% ± %.2f\t%d\t%d\n", cfg.MethodName(), res.TestMean, res.TestStd, len(res.TestAccuracies), res.T)
	keys := baselineKeys(res)
	for _, k := range keys {
		b := res.Baselines[k]
		fmt.Fprintf(tw, "%s\t%6.2f%% ± %.2f\t%d\t%d\n", baselineName(k), b.Mean, b.Std, len(b.Accuracies), b.Steps)
	}
	tw.Flush()
	if res.TestDiverged > 0 {
		fmt.Fprintf(w, "warning: %d of %d distilled-label test models diverged (non-finite parameters; --eval-lr %g) and are left out of the accuracy above\n",
			res.TestDiverged, cfg.EvalModels, cfg.EvalLR)
	}
	for _, k := range keys {
		if d := res.Baselines[k].Diverged; d > 0 {
			fmt.Fprintf(w, "warning: %d of %d %s test models diverged and are left out of its accuracy\n", d, cfg.EvalModels, baselineName(k))
		}
	}
	fmt.Fprintln(w)
	for _, k := range keys {
		b := res.Baselines[k]
		fmt.Fprintf(w, "%s vs %s: %+.2f points\n", cfg.MethodName(), baselineName(k), res.TestMean-b.Mean)
	}
	fmt.Fprintf(w, "std is the population std over the models; wall time %s (meta-steps %s, %.3f s per meta-step)\n",
		elapsedSeconds(res.WallSeconds), elapsedSeconds(res.DistillSeconds), res.SecondsPerStep)
	if captured, replayed, failed := train.CUDAGraphStatus(); failed != nil {
		fmt.Fprintf(w, "CUDA graphs: a capture failed; every step from then on was taken without them (%v)\n", failed)
	} else if captured > 0 {
		fmt.Fprintf(w, "CUDA graphs: %d recorded (one per training of fresh models, and the meta-step's with LDTORCH_CUDA_GRAPHS=all), %s replayed\n",
			captured, plural(int(replayed), "step"))
	}
	fmt.Fprintf(w, "artifact %s (%s, %s, %s, history %s)\n", out, artifact.DistilledFile, artifact.TorchFile, artifact.ReportFile, labeldistill.HistoryFile)
}

func elapsedSeconds(s float64) string {
	return elapsed(time.Duration(s * float64(time.Second)))
}

// plural formats "1 epoch", "2 epochs".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
