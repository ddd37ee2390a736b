// Command ldtorch is the command-line front end of label distillation (Bohdal et al.,
// "Flexible Dataset Distillation: Learn Labels Instead of Images"): it parses flags, calls
// the labeldistill library and prints results. main.go wires the commands together and
// turns every error into one line on stderr and an exit code:
//
//	0    success
//	1    a runtime failure (libtorch, I/O, non-finite values, internal errors)
//	2    a usage problem: bad flags or values, impossible combinations, bad config files,
//	     missing, malformed or unverified data, unusable output folders
//	130  interrupted (SIGINT, SIGTERM or SIGHUP); nothing half-written is left behind
//
// Output written to stdout is checked: a write that fails (a full disk, /dev/full, a closed
// stdout) fails the command with exit 1, so a result is never lost silently.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/torch/dist"
)

// Exit codes.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitInterrupted = 130
)

func main() {
	if err := tuneMalloc(); err != nil {
		fmt.Fprintf(os.Stderr, "ldtorch: %v\n", err)
		os.Exit(exitUsage)
	}
	if err := applyEnvironment(); err != nil {
		fmt.Fprintf(os.Stderr, "ldtorch: %v\n", err)
		os.Exit(exitUsage)
	}
	tuneBlockCache()
	quietLibtorch()
	stdout := io.Writer(os.Stdout)
	if stdoutClosed() {
		stdout = failingWriter{errors.New("stdout is closed")}
	}
	code := run(os.Args, stdout, os.Stderr)
	// Closing stdout reports a write the kernel could not complete earlier.
	if err := os.Stdout.Close(); err != nil && code == exitOK && stdout == io.Writer(os.Stdout) {
		fmt.Fprintf(os.Stderr, "ldtorch: writing to stdout: %v\n", err)
		code = exitFailure
	}
	os.Exit(code)
}

// stdoutClosed reports whether file descriptor 1 was closed when the process started (as
// with `ldtorch version >&-`). Go's runtime puts /dev/null, opened read-write, on a closed
// standard descriptor before main runs; a shell's `>/dev/null` opens it write-only, so a
// read-write /dev/null on fd 1 is taken for a closed stdout.
func stdoutClosed() bool {
	var st, null syscall.Stat_t
	if err := syscall.Fstat(1, &st); err != nil {
		return true
	}
	if err := syscall.Stat(os.DevNull, &null); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFCHR || st.Rdev != null.Rdev {
		return false
	}
	flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, 1, syscall.F_GETFL, 0)
	return errno == 0 && flags&syscall.O_ACCMODE == syscall.O_RDWR
}

// failingWriter fails every write with err.
type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

// checkedWriter remembers the first write error of w.
type checkedWriter struct {
	w   io.Writer
	err error
}

func (c *checkedWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	if err != nil {
		c.err = err
	}
	return n, err
}

// launchedRank reports whether this process is one rank of a group a launcher started
// (WORLD_SIZE above 1: ldtorch --nproc or torchrun). Such a rank takes every interrupt
// signal as the one interruption: Ctrl-C reaches it from the terminal and then again from
// its launcher, which forwards it as SIGTERM, and dying on that second signal would lose
// the checkpoint of the interruption. Killing the ranks is their launcher's escalation.
func launchedRank() bool {
	cfg, ok, err := dist.FromEnv()
	return ok && err == nil && cfg.WorldSize > 1
}

// launchedJob reports whether this process is one job of a sweep --jobs run. A job too
// takes every interrupt signal as the one interruption: when its launcher dies, the
// kernel's death signal can come more than once (once for each of the launcher's threads
// the job is handed to as they end), and its launcher kills it on a second Ctrl-C.
func launchedJob() bool {
	_, ok := os.LookupEnv(envSweepJob)
	return ok
}

// exitError is an error with its exit code; its message is printed as is.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &exitError{code: exitUsage, msg: fmt.Sprintf(format, args...)}
}

// requireFlags is a usage error naming the flags of names not given. (urfave's Required
// printed the command's whole help before its error, and exited 1.)
func requireFlags(c *cli.Context, names ...string) error {
	var missing []string
	for _, n := range names {
		if !c.IsSet(n) {
			missing = append(missing, "--"+n)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	list, verb := missing[0], "is"
	if n := len(missing); n > 1 {
		list, verb = strings.Join(missing[:n-1], ", ")+" and "+missing[n-1], "are"
	}
	return usageErrorf("%s %s required (see ldtorch %s --help)", list, verb, c.Command.FullName())
}

func failuref(format string, args ...any) error {
	return &exitError{code: exitFailure, msg: fmt.Sprintf(format, args...)}
}

// env is what the commands share: output streams, the arguments of the command being run
// and whether stderr is a terminal.
type env struct {
	stdout, stderr io.Writer
	args           []string // the leaf command's own arguments
	argv           []string // the whole command line as given (program name first)
	stderrTTY      bool
	command        string // "distill", "data fetch", ...
}

// run runs the command line and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdout, stderr)
}

// runContext is run under a parent context (the tests' time limit): cancelling it acts like
// an interrupting signal.
func runContext(parent context.Context, args []string, stdout, stderr io.Writer) (code int) {
	out := &checkedWriter{w: stdout}
	e := &env{stdout: out, stderr: stderr, argv: append([]string(nil), args...)}
	if f, ok := stderr.(*os.File); ok {
		e.stderrTTY = term.IsTerminal(int(f.Fd()))
	}
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "ldtorch: internal error: %v\n", r)
			if os.Getenv("LDTORCH_DEBUG") != "" {
				fmt.Fprintf(stderr, "%s", debug.Stack())
			}
			code = exitFailure
		}
	}()

	ctx, stopWatching := watchInterrupts(parent, !launchedRank() && !launchedJob())
	defer stopWatching()

	app := e.newApp()
	args = reorderArgs(app.Commands, args)
	e.args, e.command = leafArgs(app.Commands, args)
	err := mkldnnSettingError()
	if err == nil && computeCommands[e.command] {
		e.guardConvolutions()
	}
	if err == nil {
		err = app.RunContext(ctx, args)
	}
	if out.err != nil { // whatever else went wrong, the output is lost
		err = failuref("writing to stdout: %v", out.err)
	}
	if err == nil {
		return exitOK
	}
	code, msg := classify(err, ctx)
	msg = settingsAsFlags(app.Commands, e.command, msg)
	prefix := "ldtorch"
	if e.command != "" {
		prefix += " " + e.command
	}
	if msg != "" { // "": the message was printed already (by a rank of a --nproc run)
		fmt.Fprintf(stderr, "%s: %s\n", prefix, oneLine(msg))
	}
	return code
}

func (e *env) newApp() *cli.App {
	app := &cli.App{
		Name:  "ldtorch",
		Usage: "label distillation (learn soft labels for a few real images) on libtorch",
		Description: "Learns soft labels for N fixed base images so that a model trained from scratch on them " +
			"does well on a target dataset (Bohdal et al., Flexible Dataset Distillation). " +
			"Every flag can also be given as an environment variable LDTORCH_<FLAG> (e.g. LDTORCH_EPOCHS); " +
			"flags win over variables, variables over --config files, files over defaults. " +
			"ldtorch restarts itself once with glibc malloc settings that keep freed tensor memory " +
			"(MALLOC_ARENA_MAX=1 and larger thresholds; ≈ 2× faster meta-steps); LDTORCH_MALLOC=off keeps glibc's defaults.",
		Version:              version,
		Writer:               e.stdout,
		ErrWriter:            e.stderr,
		EnableBashCompletion: false,
		// sweep --rows and --columns split on commas themselves (a label may hold one).
		DisableSliceFlagSeparator: true,
		ExitErrHandler:            func(*cli.Context, error) {}, // run prints errors and exits
		OnUsageError:              onUsageError,
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return usageErrorf("unknown command %q (commands: distill, select-base, evaluate, export, data, version, bench, sweep, study, report, gradvar; see ldtorch --help)", c.Args().First())
			}
			return cli.ShowAppHelp(c)
		},
		Commands: []*cli.Command{
			e.distillCommand(),
			e.selectBaseCommand(),
			e.evaluateCommand(),
			e.exportCommand(),
			e.dataCommand(),
			e.versionCommand(),
			e.benchCommand(),
			e.sweepCommand(),
			e.reportCommand(),
			e.gradvarCommand(),
			e.studyCommand(),
		},
	}
	setUsageHandlers(app.Commands)
	return app
}

func setUsageHandlers(cmds []*cli.Command) {
	for _, c := range cmds {
		c.OnUsageError = onUsageError
		setUsageHandlers(c.Subcommands)
	}
}

var (
	reUndefined = regexp.MustCompile(`^flag provided but not defined: -+(.*)$`)
	reInvalid   = regexp.MustCompile(`^invalid value "(.*)" for flag -+([^:]*): (.*)$`)
	reNoArg     = regexp.MustCompile(`^flag needs an argument: -+(.*)$`)
	reEnv       = regexp.MustCompile(`^could not parse "(.*)" as (\w+) value from environment variable "([^"]*)" for flag ([^:]*): (.*)$`)
)

// onUsageError rewrites flag-parsing errors into one sentence naming the flag.
func onUsageError(c *cli.Context, err error, _ bool) error {
	msg := err.Error()
	help := "ldtorch"
	if c.Command != nil {
		if n := strings.TrimPrefix(c.Command.FullName(), "ldtorch"); strings.TrimSpace(n) != "" {
			help += " " + strings.TrimSpace(n)
		}
	}
	help += " --help"
	switch {
	case reUndefined.MatchString(msg):
		m := reUndefined.FindStringSubmatch(msg)
		return usageErrorf("unknown flag --%s (see %s)", m[1], help)
	case reInvalid.MatchString(msg):
		m := reInvalid.FindStringSubmatch(msg)
		why := "not a valid value"
		if strings.Contains(m[3], "out of range") {
			why = "out of range"
		} else if w := wantedValue(c, m[2]); w != "" {
			why = "want " + w
		}
		return usageErrorf("--%s: invalid value %q (%s)", m[2], m[1], why)
	case reNoArg.MatchString(msg):
		m := reNoArg.FindStringSubmatch(msg)
		return usageErrorf("--%s needs a value", m[1])
	case reEnv.MatchString(msg):
		m := reEnv.FindStringSubmatch(msg)
		return usageErrorf("%s=%q: not a valid %s for --%s", m[3], m[1], m[2], m[4])
	}
	return usageErrorf("%s (see %s)", msg, help)
}

// wantedValue describes the kind of value a flag of the current command takes.
func wantedValue(c *cli.Context, name string) string {
	if c.Command == nil {
		return ""
	}
	for _, f := range c.Command.Flags {
		for _, n := range f.Names() {
			if n != name {
				continue
			}
			switch f.(type) {
			case *cli.IntFlag, *cli.Int64Flag:
				return "an integer"
			case *cli.Float64Flag:
				return "a number"
			case *cli.BoolFlag:
				return "true or false"
			case *cli.DurationFlag:
				return "a wall time such as 90s, 5m or 1h30m"
			}
		}
	}
	return ""
}

// classify maps an error to an exit code and a message.
func classify(err error, ctx context.Context) (int, string) {
	var ee *exitError
	var fe *config.FieldError
	var me *data.MissingError
	var fmtErr *data.FormatError
	var ce *data.ChecksumError
	var ec cli.ExitCoder
	switch {
	case errors.As(err, &ee):
		return ee.code, ee.msg
	case errors.Is(err, context.Canceled) || ctx.Err() != nil:
		return exitInterrupted, "interrupted: " + err.Error()
	case errors.As(err, &fe):
		return exitUsage, err.Error()
	case errors.As(err, &me):
		return exitUsage, missingMessage(me)
	case errors.As(err, &fmtErr), errors.As(err, &ce):
		return exitUsage, err.Error()
	case errors.As(err, &ec):
		code := ec.ExitCode()
		if code != exitOK && code != exitFailure {
			code = exitUsage // urfave's own codes (e.g. 3 for an unknown help topic)
		}
		return code, err.Error()
	}
	return exitFailure, err.Error()
}

// settingsAsFlags words the library's setting names that the command has as flags (data
// errors name allow_unknown_data) as those flags; a command without the flag keeps the
// setting's name, so that no message names a flag its command does not have.
func settingsAsFlags(cmds []*cli.Command, path, msg string) string {
	var leaf *cli.Command
	for _, name := range strings.Fields(path) {
		if leaf = findCommand(cmds, name); leaf == nil {
			return msg
		}
		cmds = leaf.Subcommands
	}
	if leaf == nil {
		return msg
	}
	for _, key := range []string{"allow_unknown_data"} {
		flag := strings.ReplaceAll(key, "_", "-")
		if slices.ContainsFunc(leaf.Flags, func(f cli.Flag) bool { return slices.Contains(f.Names(), flag) }) {
			msg = strings.ReplaceAll(msg, key, "--"+flag)
		}
	}
	return msg
}

// missingMessage says which dataset is missing and the command that gets it.
func missingMessage(me *data.MissingError) string {
	root := filepath.Dir(me.Dir)
	// A file that is there but cannot be read (a symbolic link loop or to nothing, no
	// permission) is not missing: say what is wrong with it.
	var broken []string
	for _, m := range me.Missing {
		for _, name := range []string{m, m + ".gz"} {
			path := filepath.Join(me.Dir, name)
			if _, err := os.Lstat(path); err != nil {
				continue
			}
			if _, err := os.Stat(path); err != nil {
				broken = append(broken, unreadable(path, err))
			} else if f, err := os.Open(path); err != nil {
				broken = append(broken, unreadable(path, err))
			} else {
				f.Close()
			}
		}
	}
	if _, err := os.Stat(me.Dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		broken = append(broken, unreadable(me.Dir, err))
	}
	if len(broken) > 0 {
		return fmt.Sprintf("dataset %s in %s cannot be read: %s", me.Dataset, me.Dir, strings.Join(broken, "; "))
	}
	how := fmt.Sprintf("ldtorch data fetch %s --data-dir %s", me.Dataset, root)
	if me.Dataset != "mnist" && me.Dataset != "fashion-mnist" {
		how = fmt.Sprintf("ldtorch data fetch %s --from-shared DIR --data-dir %s (DIR a folder of copies, by default ../shared/datasets)", me.Dataset, root)
		if me.Hint != "" {
			how += ", or put there " + me.Hint
		}
	}
	return fmt.Sprintf("dataset %s not found in %s (missing %s); get it with: %s",
		me.Dataset, me.Dir, strings.Join(me.Missing, ", "), how)
}

// unreadable says why path, which exists, cannot be read: a symbolic link loop, a link
// to nothing, no permission, or the error itself.
func unreadable(path string, err error) string {
	switch {
	case errors.Is(err, syscall.ELOOP):
		return path + " is a symbolic link loop"
	case errors.Is(err, fs.ErrNotExist):
		target, _ := os.Readlink(path)
		return fmt.Sprintf("%s is a symbolic link to %s, which does not exist", path, target)
	case errors.Is(err, fs.ErrPermission):
		return path + ": permission denied"
	}
	return fmt.Sprintf("%s: %v", path, unwrapPath(err))
}

// oneLine folds a multi-line message into one line.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	lines := strings.Split(s, "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, "; ")
}

// findCommand returns the command called name (or an alias) in cmds.
func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// leafArgs returns the arguments after the command path and the path ("data fetch").
func leafArgs(cmds []*cli.Command, args []string) ([]string, string) {
	var path []string
	i := 1
	for i < len(args) {
		c := findCommand(cmds, args[i])
		if c == nil {
			break
		}
		path = append(path, c.Name)
		cmds = c.Subcommands
		i++
	}
	if i > len(args) {
		i = len(args)
	}
	return args[i:], strings.Join(path, " ")
}

// reorderArgs moves the positional arguments of a leaf command after its flags, so that
// `ldtorch data fetch mnist --from-shared DIR` works (urfave/cli v2 stops parsing flags at
// the first positional argument).
func reorderArgs(cmds []*cli.Command, args []string) []string {
	if len(args) == 0 {
		return args
	}
	out := []string{args[0]}
	var leaf *cli.Command
	i := 1
	for i < len(args) {
		c := findCommand(cmds, args[i])
		if c == nil {
			break
		}
		out = append(out, args[i])
		leaf, cmds = c, c.Subcommands
		i++
	}
	if leaf == nil || len(leaf.Subcommands) > 0 {
		return args
	}
	var flags, pos []string
	rest := args[i:]
	dashdash := false
	for j := 0; j < len(rest); j++ {
		a := rest[j]
		if a == "--" {
			pos = append(pos, rest[j+1:]...)
			dashdash = true
			break
		}
		if len(a) > 1 && a[0] == '-' {
			flags = append(flags, a)
			if !strings.Contains(a, "=") && takesValue(leaf, a) && j+1 < len(rest) {
				flags = append(flags, rest[j+1])
				j++
			}
			continue
		}
		pos = append(pos, a)
	}
	out = append(out, flags...)
	// `ldtorch study steps --help`: the command's help, not a help topic named "steps".
	if !dashdash && slices.ContainsFunc(flags, func(f string) bool { return f == "-h" || f == "--help" || f == "-help" }) {
		return out
	}
	if dashdash {
		out = append(out, "--")
	}
	return append(out, pos...)
}

// takesValue reports whether the flag named by arg ("-x", "--name") needs a value.
func takesValue(c *cli.Command, arg string) bool {
	name := strings.TrimLeft(arg, "-")
	for _, f := range c.Flags {
		for _, n := range f.Names() {
			if n == name {
				_, isBool := f.(*cli.BoolFlag)
				return !isBool
			}
		}
	}
	return false
}
