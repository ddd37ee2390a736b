// In-process tests of the pure helpers: argument reordering, list parsing, flag naming.

package main

import (
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/labeldistill/config"
)

func regexpMatch(pattern, s string) bool { return regexp.MustCompile(pattern).MatchString(s) }

func TestReorderArgs(t *testing.T) {
	app := (&env{}).newApp()
	for _, c := range []struct{ in, want string }{
		{"ldtorch data fetch mnist --from-shared DIR", "ldtorch data fetch --from-shared DIR mnist"},
		{"ldtorch data fetch --from-shared=DIR mnist", "ldtorch data fetch --from-shared=DIR mnist"},
		{"ldtorch distill --base -3 --quiet x", "ldtorch distill --base -3 --quiet x"},
		{"ldtorch evaluate a --json --steps 5", "ldtorch evaluate --json --steps 5 a"},
		{"ldtorch data verify x -- -y", "ldtorch data verify -- x -y"},
		{"ldtorch data", "ldtorch data"},
		{"ldtorch bogus --x", "ldtorch bogus --x"},
	} {
		got := strings.Join(reorderArgs(app.Commands, strings.Fields(c.in)), " ")
		if got != c.want {
			t.Errorf("reorderArgs(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestParseList(t *testing.T) {
	var cfg config.Config
	for _, c := range []struct {
		typ  reflect.Type
		in   string
		want any
		err  bool
	}{
		{reflect.TypeOf(cfg.Baselines), "true, smooth", []string{"true", "smooth"}, false},
		{reflect.TypeOf(cfg.Baselines), "", []string{}, false},
		{reflect.TypeOf(cfg.Baselines), "auto", []string(nil), false},
		{reflect.TypeOf(cfg.BaselineSteps), "10,20", []int{10, 20}, false},
		{reflect.TypeOf(cfg.BaselineSteps), "10,x", nil, true},
		{reflect.TypeOf(cfg.NormMean), "0.5", []float64{0.5}, false},
		{reflect.TypeOf(cfg.NormMean), "", []float64(nil), false},
		{reflect.TypeOf(cfg.ModelBetas), "0.8,0.9", [2]float64{0.8, 0.9}, false},
		{reflect.TypeOf(cfg.ModelBetas), "0.8", nil, true},
	} {
		v, err := parseList(c.in, c.typ)
		if (err != nil) != c.err {
			t.Errorf("parseList(%q, %v): error %v", c.in, c.typ, err)
			continue
		}
		if err == nil && !reflect.DeepEqual(v.Interface(), c.want) {
			t.Errorf("parseList(%q, %v) = %#v, want %#v", c.in, c.typ, v.Interface(), c.want)
		}
	}
}

func TestConfigFlagsCoverConfig(t *testing.T) {
	flags := configFlags()
	if n := reflect.TypeOf(config.Config{}).NumField(); len(flags) != n {
		t.Errorf("%d config flags for %d Config fields", len(flags), n)
	}
	seen := map[string]bool{}
	for _, f := range flags {
		if seen[f.name] {
			t.Errorf("flag --%s twice", f.name)
		}
		seen[f.name] = true
		// Every flag must build (a new field type would panic or fall through).
		_ = f.cliFlag()
	}
	for _, want := range []string{"base", "dataset", "method", "epochs", "seed", "out", "source", "eval-models",
		"baselines", "device", "threads", "data-dir", "inner-batch", "outer-batch", "target-set-size",
		"validate-every", "reset-window", "arch", "eval-arch", "baseline-max-steps", "teacher-steps", "checkpoint-every"} {
		if !seen[want] {
			t.Errorf("no --%s flag", want)
		}
	}
	if got := flagWords("inner_batch 500 exceeds base_examples 100 of dataset"); got != "--inner-batch 500 exceeds --base 100 of dataset" {
		t.Errorf("flagWords: %q", got)
	}
}
