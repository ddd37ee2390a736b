// flags.go: one command-line flag per config.Config field (the json name with dashes,
// generated from the struct so no field is forgotten), their application over a config with
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

// Help categories of the config flags.
const (
	catRun       = "Run"
	catData      = "Data"
	catOptimizer = "Distillation optimisers"
	catSchedule  = "Schedule and resets"
	catEval      = "Evaluation"
	catBaselines = "Baselines"
	catSystem    = "System"
)

// configHelp is each Config field's flag help and category, keyed by json name.
var configHelp = map[string][2]string{
	"method":              {"`METHOD`: \"ld\" (second-order), \"rr\" (ridge regression) or \"dd\" (Wang et al.'s dataset distillation: images and step sizes through unrolled steps)", catRun},
	"compat":              {"authors: reproduce the authors' code where ldtorch departs from it (docs/ALGORITHM.md §9 names each such deviation); unset: ldtorch's choices", catRun},
	"model_training":      {"whether the model inside the meta-loop takes its own steps: always, never (each model keeps its initialisation until a reset replaces it) or after-reset (auto: never when images are learnt, else always)", catSchedule},
	"learn":               {"what is learnt: labels (for real base images), images (synthetic, for fixed one-hot labels) or both (auto: labels; images under --method dd)", catRun},
	"dd_steps":            {"method dd: distinct inner `STEPS`, each on its own N/STEPS images (auto: 10)", catOptimizer},
	"dd_epochs":           {"method dd: passes over the --dd-steps steps, each step with its own learnt step size (auto: 3)", catOptimizer},
	"dd_step_lr_init":     {"method dd: initial learnt step `SIZE` (auto: 0.02 greyscale, 0.001 colour)", catOptimizer},
	"dd_lr":               {"method dd: Adam learning `RATE` of the images and step sizes, halved every 40 epochs (auto: 0.01)", catOptimizer},
	"dd_backward":         {"method dd: recompute (each unrolled step rebuilt in the backward pass; memory of one step) or graph (every step's graph kept; memory grows with the steps) (auto: recompute)", catOptimizer},
	"dataset":             {"target `DATASET`: mnist, kmnist, fashion-mnist, emnist-letters, k49, cifar10, cifar100, or imagefolder:PATH (PATH/train/<class>/*.png|jpg and PATH/test/<class>/...)", catRun},
	"source":              {"`DATASET` the base examples come from (cross-dataset distillation; default: the target; imagefolder:PATH too)", catRun},
	"base_examples":       {"`N`, the number of base examples whose labels are learnt", catRun},
	"inner_batch":         {"`N_i`, base examples per inner step (auto: 10/10/25/50 for N = 10/20/50/≥100)", catRun},
	"outer_batch":         {"`N_o`, target examples per meta-step", catRun},
	"inner_lr":            {"`α`, the SGD step of the inner update (method ld)", catOptimizer},
	"model_lr":            {"Adam learning `RATE` of the model during distillation", catOptimizer},
	"model_betas":         {"Adam betas `B1,B2` of the model, the RR scale, evaluation models and the teacher", catOptimizer},
	"model_eps":           {"Adam `EPSILON` of the same optimisers as --model-betas", catOptimizer},
	"label_lr":            {"Adam learning `RATE` of the labels", catOptimizer},
	"label_betas":         {"Adam betas `B1,B2` of the labels", catOptimizer},
	"label_eps":           {"Adam `EPSILON` of the labels", catOptimizer},
	"ridge_lambda":        {"`λ` of the ridge-regression solve (method rr)", catOptimizer},
	"ridge_pseudo_step":   {"`α` of the pseudo-gradient step of the ridge weights (method rr), in (0, 1]", catOptimizer},
	"scale_lr":            {"Adam learning `RATE` of the RR logit scale (method rr)", catOptimizer},
	"scale_init":          {"initial RR logit `SCALE`, also after every model reset (method rr)", catOptimizer},
	"epochs":              {"passes over the target set (auto: 400; 800 when N > 100 or for cifar100; k49: 100, 200 when N > 100)", catSchedule},
	"reset_window":        {"`G`, window and patience of the model-reset rule (auto: 50; 200 when N > 100; 100 for cifar100 and k49)", catSchedule},
	"reset_mean_of_last":  {"T is the mean of the last `K` reset step counts", catSchedule},
	"validate_every":      {"validate the labels every `K` epochs (and after the last one)", catSchedule},
	"checkpoint_every":    {"meta-steps between checkpoints (0: at every validation, negative: never)", catSchedule},
	"history_every":       {"meta-steps between lines of the run history metrics.jsonl (auto: 1 on CPU, 10 on CUDA)", catSchedule},
	"grad_var_window":     {"meta-steps per window of the label meta-gradient variance in the history (auto: 50, negative: none)", catSchedule},
	"eval_models":         {"`M`, fresh models trained on the labels for the reported test accuracy", catEval},
	"eval_lr":             {"Adam learning `RATE` of fresh validation, test and baseline models", catEval},
	"eval_batch":          {"base examples per step of fresh models (auto: --inner-batch)", catEval},
	"eval_arch":           {"`ARCH` of the fresh test models: lenet, alexnet, resnet or convnet (default: --arch)", catEval},
	"arch":                {"network `ARCH` used during distillation: lenet, alexnet or convnet (ConvNet-3) (default: lenet for greyscale, alexnet for colour)", catRun},
	"target_set_size":     {"use only `K` target-set examples (0: all)", catData},
	"validation_size":     {"size of the validation part of the train split (auto: 10000 greyscale, 5000 colour, 23237 k49)", catData},
	"norm_mean":           {"per-channel normalisation mean `M1[,M2,M3]` (default: the dataset's; an image folder's computed from its train images)", catData},
	"norm_std":            {"per-channel normalisation std `S1[,S2,S3]` (default: the dataset's; an image folder's computed from its train images)", catData},
	"seed":                {"the run's `SEED` (initialisations, batches; also the split and base examples unless --base-seed)", catRun},
	"base_seed":           {"`SEED` of the train/validation split and the base examples alone (default: --seed)", catData},
	"base_indices":        {"distil the base examples listed in `FILE` (positions in the source's train file: .npy, an artifact's distilled.npz, or text)", catData},
	"base_selection":      {"base-example selection: balanced or unbalanced (default: balanced within a dataset, unbalanced across)", catData},
	"baselines":           {"comma-separated `LIST` of true, smooth, teacher, or none (default: all within a dataset, teacher across)", catBaselines},
	"label_smoothing":     {"`ε` of the smooth baseline", catBaselines},
	"baseline_max_steps":  {"longest training in the baselines' step search (auto: 1000; 1700 when N > 100)", catBaselines},
	"baseline_steps":      {"comma-separated `STEPS` the baselines' step search tries (default: a grid up to --baseline-max-steps)", catBaselines},
	"teacher_steps":       {"Adam steps of the teacher baseline's model on the target set", catBaselines},
	"teacher_batch":       {"target examples per teacher step", catBaselines},
	"teacher_lr":          {"Adam learning `RATE` of the teacher", catBaselines},
	"teacher_temperature": {"softmax `TEMPERATURE` of the teacher's labels", catBaselines},
	"device":              {"`DEVICE`: cpu, cuda or cuda:N", catSystem},
	"threads":             {"libtorch intra-op `THREADS` (0: libtorch's default)", catSystem},
	"allow_tf32":          {"let float32 products and convolutions on Ampere-or-later GPUs use TF32 (faster, about 3 decimal digits; off: results agree with the CPU's)", catSystem},
	"data_dir":            {"`DIR` holding the datasets, one sub-folder each (default: $LDTORCH_DATA, else ~/.cache/ldtorch/data)", catSystem},
	"out":                 {"output `DIR` for distilled.npz and report.json", catSystem},
	"emnist_transpose":    {"transpose EMNIST images to MNIST orientation", catData},
	"allow_unknown_data":  {"accept data files the registry does not know (official CIFAR binaries, EMNIST, K-49, CUB, and registered datasets laid out as folders of images); their sha256 goes into report.json. imagefolder:PATH datasets need no flag: nothing is registered for them, and their files' checksums are recorded", catData},
}

// defaultTexts overrides the default shown in help for fields whose zero value means something.
var defaultTexts = map[string]string{
	"threads":          "0",
	"target_set_size":  "0",
	"checkpoint_every": "0",
	"data_dir":         "",
	"base_seed":        "--seed",
	"base_indices":     "",
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

// cliFlag builds the urfave flag; values are taken only when set (see apply), so the flag
// itself carries no default value, only its help text.
func (f configFlag) cliFlag(def config.Config) cli.Flag {
	help, ok := configHelp[f.key]
	if !ok {
		help = [2]string{"config key " + f.key, catRun}
	}
	usage, cat := help[0], help[1]
	env := []string{envName(f.name)}
	dv := reflect.ValueOf(def).Field(f.field)
	defText, ok := defaultTexts[f.key]
	if !ok {
		defText = formatValue(dv)
	}
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

// formatValue renders a default for help: zero values are "auto"-style blanks.
func formatValue(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Slice:
		if v.Len() == 0 {
			return ""
		}
		fallthrough
	case reflect.Array:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = fmt.Sprint(v.Index(i).Interface())
		}
		return strings.Join(parts, ",")
	case reflect.String:
		return v.String()
	case reflect.Bool:
		return ""
	}
	if v.IsZero() {
		return "auto" // numbers whose zero is "auto"; the others are in defaultTexts
	}
	return fmt.Sprint(v.Interface())
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
