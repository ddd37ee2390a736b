// flags.go: one command-line flag per config.Config field (the json name with dashes,
// generated from the struct so no field is forgotten; its help, category and default text
// are the field's config.Setting), their application over a config with
// the precedence flags > LDTORCH_* variables > --config file > defaults, and the mapping of
// configuration errors back to the flag, variable or file key that caused them.

package main

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
)

// flagNames renames the flags of a few Config fields (json name → flag name); the json name
// with dashes stays accepted as an alias.
var flagNames = map[string]string{
	"base_examples": "base",
}

// Help categories: the settings' (config.Setting.Category), which the command's own flags
// share.
const (
	catRun    = config.CategoryRun
	catData   = config.CategoryData
	catSystem = config.CategorySystem
)

// setting is the description of a Config json name (config.Describe); every key has one
// (config's TestSettings).
func setting(key string) config.Setting {
	s, _ := config.Describe(key)
	return s
}

// everyRun is a setting's help for a flag that sets it for every run of a command: " of
// every run" after the word that names its value ("`DEVICE` of every run: cpu, cuda or
// cuda:N").
func everyRun(help string) string {
	if i := strings.Index(help, "`"); i >= 0 {
		if j := strings.Index(help[i+1:], "`"); j >= 0 {
			end := i + 1 + j + 1
			return help[:end] + " of every run" + help[end:]
		}
	}
	return help + " of every run"
}

// configFlag is the flag of one Config field.
type configFlag struct {
	key     string // json name
	name    string // flag name
	aliases []string
	field   int // index in Config
	typ     reflect.Type
}

// envName is the environment variable of a flag: LDTORCH_ and the name in capitals.
func envName(flag string) string {
	return "LDTORCH_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// configFlags lists the flags of Config's fields in declaration order.
func configFlags() []configFlag {
	t := reflect.TypeOf(config.Config{})
	out := make([]configFlag, 0, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if key == "" || key == "-" {
			continue
		}
		cf := configFlag{key: key, name: strings.ReplaceAll(key, "_", "-"), field: i, typ: f.Type}
		if n, ok := flagNames[key]; ok {
			cf.aliases = []string{cf.name}
			cf.name = n
		}
		out = append(out, cf)
	}
	return out
}

// flagForKey returns "--name" for a Config json name ("" when there is none).
func flagForKey(key string) string {
	for _, f := range configFlags() {
		if f.key == key {
			return "--" + f.name
		}
	}
	return ""
}

// cliFlag builds the urfave flag from the field's setting (its help, category and default
// text); values are taken only when set (see apply), so the flag itself carries no default
// value, only its help text.
func (f configFlag) cliFlag() cli.Flag {
	s := setting(f.key)
	usage, cat, defText := s.Help, s.Category, config.DefaultText(f.key)
	env := []string{envName(f.name)}
	switch f.typ.Kind() {
	case reflect.String:
		return &cli.StringFlag{Name: f.name, Aliases: f.aliases, Usage: usage, Category: cat, EnvVars: env, DefaultText: defText}
	case reflect.Int:
		return &cli.IntFlag{Name: f.name, Aliases: f.aliases, Usage: usage, Category: cat, EnvVars: env, DefaultText: defText}
	case reflect.Int64:
		return &cli.Int64Flag{Name: f.name, Aliases: f.aliases, Usage: usage, Category: cat, EnvVars: env, DefaultText: defText}
	case reflect.Float64:
		return &cli.Float64Flag{Name: f.name, Aliases: f.aliases, Usage: usage, Category: cat, EnvVars: env, DefaultText: defText}
	case reflect.Bool:
		return &cli.BoolFlag{Name: f.name, Aliases: f.aliases, Usage: usage, Category: cat, EnvVars: env}
	case reflect.Pointer: // *int64: null means auto
		return &cli.Int64Flag{Name: f.name, Aliases: f.aliases, Usage: usage, Category: cat, EnvVars: env, DefaultText: defText}
	}
	// Lists and pairs: comma-separated text.
	return &cli.StringFlag{Name: f.name, Aliases: f.aliases, Usage: usage, Category: cat, EnvVars: env, DefaultText: defText}
}

// maxIntFlag bounds integer flags: anything larger is a typo, not a setting.
const maxIntFlag = math.MaxInt32

// countFlag checks a count given by the flag name (models, steps, processes, batches…)
// against [lo, hi] before any work starts, in the one wording every command uses
// (config.CountMessage): "--models: must be between 1 and 1000, got 5000 (why)".
func countFlag(name string, n, lo, hi int, why string) error {
	if n >= lo && (n <= hi || hi < lo) {
		return nil
	}
	return usageErrorf("--%s: %s", name, config.CountMessage(int64(n), int64(lo), int64(hi), why))
}

// apply copies the value of every config flag that is set (on the command line or through
// its environment variable) into cfg.
func applyConfigFlags(c *cli.Context, cfg *config.Config) error {
	v := reflect.ValueOf(cfg).Elem()
	for _, f := range configFlags() {
		if !c.IsSet(f.name) {
			continue
		}
		fv := v.Field(f.field)
		bad := func(format string, args ...any) error {
			return usageErrorf("--%s: %s", f.name, fmt.Sprintf(format, args...))
		}
		switch f.typ.Kind() {
		case reflect.String:
			fv.SetString(strings.TrimSpace(c.String(f.name)))
		case reflect.Int:
			n := c.Int(f.name)
			if n > maxIntFlag || n < -maxIntFlag {
				return bad("%d is out of range (at most %d in magnitude)", n, maxIntFlag)
			}
			fv.SetInt(int64(n))
		case reflect.Int64:
			fv.SetInt(c.Int64(f.name))
		case reflect.Float64:
			fv.SetFloat(c.Float64(f.name))
		case reflect.Bool:
			fv.SetBool(c.Bool(f.name))
		case reflect.Pointer: // *int64
			n := c.Int64(f.name)
			fv.Set(reflect.ValueOf(&n))
		default:
			if f.key == "base_indices" { // a file, not a list on the command line
				path := strings.TrimSpace(c.String(f.name))
				if path == "" {
					return bad("needs a file name")
				}
				// Read once (a named pipe gives its bytes once): distill records the file
				// with the run from baseFileRead.
				bf, err := data.ReadBaseFileContext(c.Context, path)
				if err != nil && c.Context.Err() != nil { // interrupted while a named pipe waited for its writer
					return err
				}
				if err != nil {
					return bad("%v", err)
				}
				if c.App.Metadata == nil {
					c.App.Metadata = map[string]any{}
				}
				c.App.Metadata[baseFileKey] = bf
				fv.Set(reflect.ValueOf(bf.Indices))
				continue
			}
			parsed, err := parseList(c.String(f.name), f.typ)
			if err != nil {
				return bad("%v", err)
			}
			fv.Set(parsed)
		}
	}
	return nil
}

// baseFileKey is where applyConfigFlags leaves the --base-indices file it read
// (cli.App.Metadata); baseFileRead takes it from there.
const baseFileKey = "base-indices file"

// baseFileRead returns the --base-indices file applyConfigFlags read, nil when none.
func baseFileRead(c *cli.Context) *data.BaseFile {
	bf, _ := c.App.Metadata[baseFileKey].(*data.BaseFile)
	return bf
}

// parseList parses comma-separated text into a []string, []int, []float64 or [2]float64.
// "auto" (and, for non-string lists, the empty text) gives nil, the config's "auto".
func parseList(text string, typ reflect.Type) (reflect.Value, error) {
	text = strings.TrimSpace(text)
	var items []string
	for _, s := range strings.Split(text, ",") {
		if s = strings.TrimSpace(s); s != "" {
			items = append(items, s)
		}
	}
	if text == "auto" {
		return reflect.Zero(typ), nil
	}
	elem := typ.Elem()
	if typ.Kind() == reflect.Array && len(items) != typ.Len() {
		return reflect.Value{}, fmt.Errorf("needs exactly %d comma-separated values, got %q", typ.Len(), text)
	}
	var out reflect.Value
	if typ.Kind() == reflect.Array {
		out = reflect.New(typ).Elem()
	} else {
		if len(items) == 0 && elem.Kind() != reflect.String {
			return reflect.Zero(typ), nil
		}
		out = reflect.MakeSlice(typ, len(items), len(items))
	}
	for i, s := range items {
		switch elem.Kind() {
		case reflect.String:
			out.Index(i).SetString(s)
		case reflect.Int:
			n, err := strconv.Atoi(s)
			if err != nil || n > maxIntFlag || n < -maxIntFlag {
				return reflect.Value{}, fmt.Errorf("%q is not an integer in range", s)
			}
			out.Index(i).SetInt(int64(n))
		case reflect.Float64:
			x, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return reflect.Value{}, fmt.Errorf("%q is not a number", s)
			}
			out.Index(i).SetFloat(x)
		default:
			return reflect.Value{}, fmt.Errorf("unsupported list type %v", typ)
		}
	}
	return out, nil
}

// valueSource says where a config value came from, for error messages.
type valueSource struct {
	args       []string        // the command's own arguments (flags and values)
	configFile string          // --config, if any
	configKeys map[string]bool // keys present in the config file
	isSet      func(name string) bool
	getenv     func(string) string
}

// onCommandLine reports whether a flag (any of its names) appears among the arguments.
func (s *valueSource) onCommandLine(names ...string) bool {
	for _, a := range s.args {
		if a == "--" {
			return false
		}
		a = strings.TrimLeft(a, "-")
		a, _, _ = strings.Cut(a, "=")
		for _, n := range names {
			if a == n {
				return true
			}
		}
	}
	return false
}

// setBy names what set a config key — "--base", "LDTORCH_BASE" or "base_examples in
// FILE" — and reports whether anything did ("--base" and false when it is the default).
func (s *valueSource) setBy(key string) (string, bool) {
	for _, f := range configFlags() {
		if f.key != key {
			continue
		}
		switch {
		case s.onCommandLine(append([]string{f.name}, f.aliases...)...):
			return "--" + f.name, true
		case s.isSet != nil && s.isSet(f.name):
			return envName(f.name), true
		case s.configKeys[key]:
			return fmt.Sprintf("%s in %s", key, s.configFile), true
		}
		return "--" + f.name, false
	}
	return key, s.configKeys[key]
}

// describe names what set a config key (setBy).
func (s *valueSource) describe(key string) string {
	what, _ := s.setBy(key)
	return what
}

// given reports whether a config key was set by a flag, a variable or the config file.
func (s *valueSource) given(key string) bool {
	_, ok := s.setBy(key)
	return ok
}

var keyInText = regexp.MustCompile(`\b[a-z]+(_[a-z0-9]+)+\b`)

// flagWords replaces the json names of Config fields inside a message by their flags
// ("exceeds base_examples 100" → "exceeds --base 100").
func flagWords(msg string) string {
	return keyInText.ReplaceAllStringFunc(msg, func(w string) string {
		if f := flagForKey(w); f != "" {
			return f
		}
		return w
	})
}

// configError turns the errors of Config.Validate / Resolved into one line naming the
// flags, variables or file keys involved.
func configError(err error, src *valueSource) error {
	var parts []string
	for _, e := range unjoin(err) {
		var fe *config.FieldError
		if errors.As(e, &fe) {
			parts = append(parts, src.describe(fe.Field)+": "+flagWords(fe.Msg))
			continue
		}
		parts = append(parts, e.Error())
	}
	return usageErrorf("%s", strings.Join(parts, "; "))
}

// unjoin flattens errors.Join trees.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, unjoin(e)...)
		}
		return out
	}
	return []error{err}
}
