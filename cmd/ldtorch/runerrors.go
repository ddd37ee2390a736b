package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/artifact"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/rundir"
	"github.com/urfave/cli/v2"
)

// runerrors.go: what a failed or interrupted distillation tells the user: the flag behind
// a problem, how to continue a run, an earlier run in the folder.

// earlierRunError is the usage error of a fresh run into a folder holding an earlier run.
func earlierRunError(e *rundir.EarlierRunError) error {
	held := []string{}
	if e.Artifact {
		held = append(held, "an artifact ("+artifact.DistilledFile+", "+artifact.ReportFile+")")
	}
	if e.Checkpoints > 0 {
		held = append(held, fmt.Sprintf("%d checkpoint(s)", e.Checkpoints))
	}
	how := fmt.Sprintf("continue or extend it with --resume %s (more --epochs to extend)", e.Dir)
	if e.Checkpoints == 0 {
		how = "no checkpoints to continue from"
	}
	return usageErrorf("--out: %s already holds an earlier run: %s; %s, start over with --overwrite (the old artifact stays until the new one is written), or choose another --out",
		e.Dir, strings.Join(held, " and "), how)
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
	if de.Field == "" { // no setting at fault: the artifact's learnt step sizes
		return de.Error()
	}
	return fmt.Sprintf("%s: all %d evaluation model(s) diverged (non-finite parameters after %d training steps): --%s %g is too large; try a smaller one",
		de.Purpose, de.Models, de.Steps, strings.ReplaceAll(de.Field, "_", "-"), de.LR)
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
