package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/labeldistill/rundir"
	"github.com/urfave/cli/v2"
)

// runconfig.go: a run's configuration from defaults, --config, LDTORCH_* variables and flags,
// and the checks of what a command line may say about it (resume conflicts, settings method
// dd ignores).

// runConfigFlags are --config and one flag per Config field (distill and bench).
func runConfigFlags() []cli.Flag {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "config", Usage: "read settings from a JSON `FILE` (keys: the config's json names, e.g. base_examples)", EnvVars: []string{envName("config")}, Category: catRun},
	}
	for _, f := range configFlags() {
		flags = append(flags, f.cliFlag())
	}
	return flags
}

// resolveConfig builds the run's configuration from defaults, --config, variables and flags.
func (e *env) resolveConfig(c *cli.Context) (config.Resolved, *valueSource, error) {
	src := &valueSource{args: e.args, isSet: c.IsSet, configKeys: map[string]bool{}}
	cfg := config.Default()
	// --resume DIR starts from the checkpoint's own settings; what is given beside it
	// (file, variables, flags) is applied over them and checked by the resume.
	resuming := c.IsSet("resume")
	var ckCfg config.Config
	if resuming {
		dir := c.String("resume")
		if dir == "" {
			return config.Resolved{}, src, usageErrorf("--resume needs a folder")
		}
		ck, _, ckptDir, err := rundir.CheckpointConfig(dir)
		if err != nil {
			var re *rundir.ResumeError
			if errors.As(err, &re) {
				return config.Resolved{}, src, usageErrorf("--resume: %s", re.Msg)
			}
			return config.Resolved{}, src, usageErrorf("--resume: %v", err)
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
			return config.Resolved{}, src, usageErrorf("%s needs a file name", what)
		}
		src.configFile = path
		loaded, keys, err := config.ReadFileKeysContext(c.Context, path)
		if err != nil {
			if c.Context.Err() != nil { // interrupted while a named pipe waited for its writer
				return config.Resolved{}, src, err
			}
			var pe *fs.PathError
			if errors.As(err, &pe) {
				if _, lerr := os.Lstat(path); lerr == nil {
					return config.Resolved{}, src, usageErrorf("%s: cannot read it: %s", what, unreadable(path, err))
				}
				return config.Resolved{}, src, usageErrorf("%s: cannot read %s: %v", what, path, pe.Err)
			}
			return config.Resolved{}, src, usageErrorf("%s: %v", what, err)
		}
		src.configKeys = keys
		// Integers are capped like flags and variables: anything larger is a typo.
		lv := reflect.ValueOf(loaded)
		for _, f := range configFlags() {
			if k := f.typ.Kind(); src.configKeys[f.key] && k == reflect.Int {
				if n := lv.Field(f.field).Int(); n > maxIntFlag || n < -maxIntFlag {
					return config.Resolved{}, src, usageErrorf("%s in %s: %d is out of range (at most %d in magnitude)", f.key, path, n, maxIntFlag)
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
		return config.Resolved{}, src, err
	}
	// Given base indices say how many base examples there are, unless N is set too.
	if cfg.BaseIndices != nil && !c.IsSet("base") && !src.configKeys["base_examples"] {
		cfg.BaseExamples = len(cfg.BaseIndices)
	}
	// Unless given, read data where `ldtorch data fetch` puts it.
	if !c.IsSet("data-dir") && !src.configKeys["data_dir"] && !resuming {
		dir, err := data.DataDir("")
		if err != nil {
			return config.Resolved{}, src, usageErrorf("--data-dir: %v", err)
		}
		cfg.DataDir = dir
	}
	resolved, err := config.Resolve(cfg)
	if err != nil && resuming {
		// A setting the checkpoint's run does not share is named as such, rather than a
		// setting the checks blame because of it (another --dataset makes the recorded
		// base_selection invalid for a cross-dataset run). (When the settings are valid,
		// the resume itself compares them, resolved.)
		if err := resumeConflicts(c.String("resume"), ckCfg, cfg); err != nil {
			return config.Resolved{}, src, err
		}
	}
	if err != nil {
		return config.Resolved{}, src, configError(err, src)
	}
	if resuming { // refused here, before the run announces itself (Distill checks again)
		if err := resumeConflicts(c.String("resume"), ckCfg, resolved.Config); err != nil {
			return config.Resolved{}, src, err
		}
	}
	if err := ddIgnoredSettings(resolved.Config, src); err != nil {
		return config.Resolved{}, src, err
	}
	return resolved, src, nil
}

// ddIgnoredSettings refuses a setting given for method dd that it would ignore
// (config.DDIgnored), naming the flag, variable or file key that gave it.
func ddIgnoredSettings(cfg config.Config, src *valueSource) error {
	if key, why := config.DDIgnored(cfg, src.given); key != "" {
		return usageErrorf("%s %s", src.describe(key), why)
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

// copyConfigKeys copies the fields of src named by keys (json names) into dst.
func copyConfigKeys(dst *config.Config, src config.Config, keys map[string]bool) {
	d, sv := reflect.ValueOf(dst).Elem(), reflect.ValueOf(src)
	for _, f := range configFlags() {
		if keys[f.key] {
			d.Field(f.field).Set(sv.Field(f.field))
		}
	}
}
