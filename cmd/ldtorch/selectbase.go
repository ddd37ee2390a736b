// selectbase.go: `ldtorch select-base --dataset D --base N --strategy S --out FILE`: choose
// the base examples of a distillation (labeldistill/selectbase) and write them where
// `distill --base-indices` reads them, with their scores in FILE.json.

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/labeldistill/selectbase"
	"github.com/ldtorch/ldtorch/torch/fileio/atomicfile"
)

func (e *env) selectBaseCommand() *cli.Command {
	def := config.Default()
	return &cli.Command{
		Name:  "select-base",
		Usage: "choose N base examples (paper, kmeans, herding, kcenter or random) for distill --base-indices",
		UsageText: "ldtorch select-base --dataset mnist --base 10 --strategy paper --out sel/mnist-paper-10.txt [--candidates 50 --repeats 3]\n" +
			"ldtorch distill --dataset mnist --base 10 --base-indices sel/mnist-paper-10.txt ...",
		Description: "Chooses N/C examples of each class from the target-set part of the dataset's train split, split with " +
			"--base-seed (default --seed) exactly as distill splits it. paper: --candidates random balanced sets (the first is the set distill " +
			"draws itself), each trained --repeats times with true labels and validated every 50 steps up to 1,000 steps (1,700 above " +
			"100 base examples); the best mean validation accuracy wins. kmeans: per class the real image nearest each k-means " +
			"centroid in pixel space. herding, kcenter: per class herding or k-centre greedy on the features of a network trained " +
			"--feature-epochs passes over the target set. random: the set distill draws itself. Writes FILE (a header line, then one " +
			"index per line, as --base-indices reads it) and FILE.json (settings and every score). paper keeps each finished " +
			"candidate in FILE.progress/: interrupted, the same command continues; --nproc spreads its candidates over ranks.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "dataset", Usage: "`DATASET` to choose from (as distill's --dataset)", Category: catRun},
			&cli.IntFlag{Name: "base", Usage: "`N` base examples (a multiple of the classes)", Category: catRun},
			&cli.StringFlag{Name: "strategy", Usage: "`STRATEGY`: " + strings.Join(selectbase.Strategies, ", "), Category: catRun},
			&cli.StringFlag{Name: "out", Usage: "index `FILE` to write (FILE.json beside it)", Category: catRun},
			&cli.Int64Flag{Name: "seed", Value: def.Seed, Usage: "`SEED`: the default of --base-seed", Category: catRun},
			&cli.Int64Flag{Name: "base-seed", Usage: "`SEED` of the train/validation split and of every choice", DefaultText: "--seed", Category: catData},
			&cli.IntFlag{Name: "validation-size", Usage: "`N` images of the train split for validation", DefaultText: "auto, as distill", Category: catData},
			&cli.IntFlag{Name: "candidates", Value: selectbase.DefaultCandidates, Usage: "paper: `K` random balanced sets", Category: catRun},
			&cli.IntFlag{Name: "repeats", Value: selectbase.DefaultRepeats, Usage: "paper: `M` trainings of each set", Category: catRun},
			&cli.IntFlag{Name: "max-steps", Usage: "paper: train each set `STEPS` steps, validating every 50", DefaultText: "auto: 1000; 1700 above 100 base examples", Category: catRun},
			&cli.IntFlag{Name: "feature-epochs", Value: selectbase.DefaultFeatureEpochs, Usage: "herding, kcenter: train the feature network `EPOCHS` passes over the target set", Category: catRun},
			&cli.BoolFlag{Name: "overwrite", Usage: "replace an existing FILE and forget the progress of an earlier selection into it", Category: catRun},
			&cli.IntFlag{Name: "nproc", Value: 1, Usage: "paper: spread the candidates over `N` processes on this machine (c10d Gloo; as distill --nproc)", Category: catSystem},
			&cli.StringFlag{Name: "arch", Usage: "network `ARCH` trained by paper, herding and kcenter (default: as distill)", Category: catRun},
		}, operationalFlags()...),
		Action: e.selectBaseAction,
	}
}

// selectFlag names the select-base flag behind a config field.
func selectFlag(field string) string {
	switch field {
	case "base_examples", "base_selection":
		return "--base"
	case "feature_epochs":
		return "--feature-epochs"
	case "baseline_max_steps":
		return "--max-steps"
	}
	return "--" + strings.ReplaceAll(field, "_", "-")
}

// selectError turns Select's errors about settings into usage errors naming the flag.
func selectError(err error) error {
	if err == nil {
		return nil
	}
	var parts []string
	usage := false
	for _, e := range unjoin(err) {
		var fe *config.FieldError
		var ue *selectbase.UsageError
		var pe *selectbase.ProgressError
		switch {
		case errors.As(e, &fe):
			parts, usage = append(parts, selectFlag(fe.Field)+": "+fe.Msg), true
		case errors.As(e, &ue):
			parts, usage = append(parts, selectFlag(ue.Field)+": "+ue.Msg), true
		case errors.As(e, &pe):
			parts, usage = append(parts, "--out: "+pe.Error()+" (or give --overwrite)"), true
		default:
			parts = append(parts, e.Error())
		}
	}
	if !usage {
		return err
	}
	return usageErrorf("%s", strings.Join(parts, "; "))
}

func (e *env) selectBaseAction(c *cli.Context) (err error) {
	if c.Args().Present() {
		return usageErrorf("unexpected argument %q (select-base takes only flags)", c.Args().First())
	}
	if err := requireFlags(c, "dataset", "base", "strategy", "out"); err != nil {
		return err
	}
	// The bounds are the library's (selectbase.Options); checked here before any data is read.
	for _, f := range []struct {
		name string
		max  int
		why  string
	}{
		{"candidates", config.MaxSelectCandidates, selectbase.WhyCandidates},
		{"repeats", config.MaxEvalModels, selectbase.WhyRepeats},
		{"feature-epochs", config.MaxEvalEpochs, selectbase.WhyFeatureEpochs},
	} {
		if err := countFlag(f.name, c.Int(f.name), 1, f.max, f.why); err != nil {
			return err
		}
	}
	if c.IsSet("max-steps") {
		if err := countFlag("max-steps", c.Int("max-steps"), 1, config.MaxTrainSteps, config.WhySteps); err != nil {
			return err
		}
	}
	if n := c.Int("base"); n < 1 || n > maxIntFlag {
		return usageErrorf("--base: must be positive, got %d", n)
	}
	out := c.String("out")
	if out == "" || strings.HasSuffix(out, "/") {
		return usageErrorf("--out: needs a file name, got %q", out)
	}
	if st, err := os.Stat(out); err == nil && st.IsDir() {
		return usageErrorf("--out: %s is a folder; name the index file to write", out)
	}
	if ext := strings.ToLower(filepath.Ext(out)); ext == ".npy" || ext == ".npz" || ext == ".json" {
		return usageErrorf("--out: select-base writes a text index file (as .txt), not %s", ext)
	}
	adjust, err := operational(c)
	if err != nil {
		return err
	}
	cfg := config.Default()
	cfg.Dataset, cfg.BaseExamples, cfg.Seed = c.String("dataset"), c.Int("base"), c.Int64("seed")
	if c.IsSet("base-seed") {
		bs := c.Int64("base-seed")
		cfg.BaseSeed = &bs
	}
	cfg.ValidationSize, cfg.Arch, cfg.BaselineMaxSteps = c.Int("validation-size"), c.String("arch"), c.Int("max-steps")
	adjust(&cfg)
	cfg.Out = filepath.Dir(out)
	opts := selectbase.Options{Strategy: c.String("strategy"), Candidates: c.Int("candidates"), Repeats: c.Int("repeats"),
		FeatureEpochs: c.Int("feature-epochs")}
	plan, err := selectbase.Plan(cfg, opts, nil)
	if err != nil {
		return selectError(err)
	}
	if c.Int("nproc") > 1 && opts.Strategy != selectbase.Paper {
		return usageErrorf("--nproc: only the paper strategy spreads its candidates over processes, not %s", opts.Strategy)
	}
	// A setting the strategy does not use is refused, not ignored: the plan's settings are
	// the ones it uses.
	for _, f := range []struct {
		flag string
		used bool
	}{
		{"candidates", plan.Settings.Candidates != 0},
		{"repeats", plan.Settings.Repeats != 0},
		{"max-steps", plan.Settings.MaxSteps != 0},
		{"feature-epochs", plan.Settings.FeatureEpochs != 0},
		{"arch", plan.Settings.Arch != ""},
	} {
		if c.IsSet(f.flag) && !f.used {
			return usageErrorf("--%s: the %s strategy does not use it (its settings: %s)", f.flag, opts.Strategy, settingsText(plan.Settings))
		}
	}
	rank, err := e.rankOf(c)
	if err != nil {
		return err
	}
	if rank.launch > 1 {
		return e.launchRanks(c, cfg, rank.launch, true)
	}
	if rank.group != nil {
		defer func() {
			if err != nil {
				rank.group.Abort(err)
			}
			rank.group.Close()
		}()
		opts.Group = rank.group
	}
	progressDir := out + ".progress"
	if opts.Strategy == selectbase.Paper {
		opts.ProgressDir = progressDir
	}
	if !rank.root() {
		_, err := selectbase.Select(c.Context, cfg, opts)
		if err != nil && c.Context.Err() != nil {
			return &exitError{code: exitInterrupted, msg: fmt.Sprintf("rank %d of %d: interrupted", rank.group.Rank(), rank.group.Size())}
		}
		return selectError(err)
	}
	if _, err := checkRuntime(cfg.Device); err != nil {
		return err
	}
	if err := checkWritable(cfg.Out); err != nil {
		return err
	}
	// One selection into out at a time, whatever the strategy: its lock is in
	// FILE.progress, taken before anything at out or in that folder is read, replaced or
	// removed (a second run with --overwrite must not wipe the candidates of a running one).
	_, perr := os.Lstat(progressDir)
	ownProgress := errors.Is(perr, fs.ErrNotExist) // made by this run: removed when it ends
	if err := checkWritable(progressDir); err != nil {
		return err
	}
	unlock, err := lockOut("--out", progressDir)
	if err != nil {
		if ownProgress {
			os.RemoveAll(progressDir)
		}
		return err
	}
	keepProgress := false // the paper strategy's finished candidates, kept for the next run
	defer func() {
		if ownProgress && !keepProgress {
			os.RemoveAll(progressDir)
		}
		unlock()
	}()
	if _, statErr := os.Lstat(out); statErr == nil && !c.Bool("overwrite") {
		prev, rerr := selectbase.ReadSelection(out)
		if rerr == nil {
			if again, _ := selectbase.Plan(cfg, opts, prev.DataSHA256); again != nil && prev.Same(again) {
				fmt.Fprintf(e.stderr, "ldtorch select-base: %s already holds this selection; nothing to do\n", out)
				return printSelection(e.stdout, prev, out)
			}
			return usageErrorf("--out: %s holds another selection (%s, %d base examples of %s, base seed %d); choose another --out or give --overwrite",
				out, prev.Strategy, prev.BaseExamples, prev.Dataset, prev.BaseSeed)
		}
		return usageErrorf("--out: %s already exists and is not a selection that select-base wrote (%v); choose another --out or give --overwrite", out, rerr)
	}
	if c.Bool("overwrite") {
		if err := clearProgress(progressDir); err != nil {
			return failuref("--overwrite: %v", err)
		}
		ownProgress = true
	}
	quiet := c.Bool("quiet")
	if !quiet {
		fmt.Fprintf(e.stderr, "selecting %d base examples of %s with %s (base seed %d; %s)\n", cfg.BaseExamples, cfg.Dataset,
			opts.Strategy, plan.BaseSeed, settingsText(plan.Settings))
	}
	last := time.Now()
	opts.Progress = func(p selectbase.Progress) {
		warn := strings.HasPrefix(p.Message, "warning")
		if quiet && !warn {
			return
		}
		if p.Phase == "candidate" || warn || time.Since(last) >= plainEvery || (p.Total > 0 && p.Done == p.Total) {
			last = time.Now()
			line := p.Message
			if p.Total > 0 {
				line = fmt.Sprintf("[%d/%d] %s", p.Done, p.Total, p.Message)
			}
			fmt.Fprintln(e.stderr, line)
		}
	}
	keepProgress = opts.ProgressDir != ""
	sel, err := selectbase.Select(c.Context, cfg, opts)
	if err != nil {
		if c.Context.Err() != nil || errors.Is(err, context.Canceled) {
			msg := "interrupted; nothing was written to " + out
			if opts.ProgressDir != "" {
				msg += fmt.Sprintf("; the finished candidates are kept in %s: continue with the same command", progressDir)
			}
			return &exitError{code: exitInterrupted, msg: msg}
		}
		var me *data.MissingError
		if errors.As(err, &me) {
			return err
		}
		return selectError(err)
	}
	if err := sel.Write(out); err != nil {
		return failuref("%v", err)
	}
	keepProgress, ownProgress = false, true // every score is in the JSON record now
	return printSelection(e.stdout, sel, out)
}

// clearProgress removes everything in the progress folder dir but its lock file.
func clearProgress(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, en := range entries {
		if en.Name() == atomicfile.LockFile {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, en.Name())); err != nil {
			return err
		}
	}
	return nil
}

// settingsText is a strategy's settings in words.
func settingsText(s selectbase.Settings) string {
	switch {
	case s.Candidates > 0:
		return fmt.Sprintf("%d candidates × %d trainings of %s, Adam %g, batch %d, validated every %d steps up to %d",
			s.Candidates, s.Repeats, s.Arch, s.LR, s.Batch, s.ValidateEvery, s.MaxSteps)
	case s.FeatureEpochs > 0:
		return fmt.Sprintf("features of a %s trained %d epochs (Adam %g, batch %d)", s.Arch, s.FeatureEpochs, s.LR, s.FeatureBatch)
	case s.Space != "":
		return "in " + s.Space
	}
	return "a balanced random draw"
}

// printSelection prints what was chosen and how to distil it.
func printSelection(w io.Writer, sel *selectbase.Selection, out string) error {
	fmt.Fprintf(w, "%s: %d base examples of %s chosen by %s (base seed %d) in %s\n", out, sel.BaseExamples, sel.Dataset,
		sel.Strategy, sel.BaseSeed, elapsedSeconds(sel.WallSeconds))
	if p := sel.Paper; p != nil {
		ch := p.Candidates[p.Chosen]
		fmt.Fprintf(w, "candidate %d of %d wins: best mean validation accuracy %.2f%% after %d steps (%d repeats); the set distill draws itself (candidate 0): %.2f%%\n",
			p.Chosen, len(p.Candidates), ch.Best, ch.BestStep, len(ch.Accuracies), p.Candidates[0].Best)
	}
	if sel.FeatureNetAcc > 0 {
		fmt.Fprintf(w, "feature network: %d steps, validation accuracy %.2f%%\n", sel.Settings.FeatureSteps, sel.FeatureNetAcc)
	}
	fmt.Fprintf(w, "scores and settings: %s\n", selectbase.SidecarPath(out))
	_, err := fmt.Fprintf(w, "distil them with: ldtorch distill --dataset %s --base %d --base-seed %d --base-indices %s ...\n",
		sel.Dataset, sel.BaseExamples, sel.BaseSeed, out)
	return err
}
