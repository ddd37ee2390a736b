package main

// Hostile values on the command line (the helpers: hostile_test.go).

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestHostileValues: absurd values not covered by TestUsageErrors fail in one line before
// any work (well within the time limit); a negative seed is a valid seed.
func TestHostileValues(t *testing.T) {
	dir := t.TempDir()
	empty := t.TempDir() // no data: a value that got past validation fails differently
	out := filepath.Join(dir, "out")
	distill := func(args ...string) []string {
		return append([]string{"distill", "--data-dir", empty, "--out", out, "--quiet"}, args...)
	}
	writeConfig := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name string
		env  []string
		args []string
		code int
		want []string
	}{
		{"epochs 1e12", nil, distill("--epochs", "1000000000000"), exitUsage, []string{"--epochs", "out of range"}},
		{"epochs 1e12 by variable", []string{"LDTORCH_EPOCHS=1000000000000"}, distill(), exitUsage, []string{"--epochs", "out of range"}},
		{"eval models -1", nil, distill("--eval-models", "-1"), exitUsage, []string{"--eval-models", "-1"}},
		{"eval models 1001", nil, distill("--eval-models", "1001"), exitUsage, []string{"--eval-models", "must be between 1 and 1000, got 1001"}},
		{"label lr 1e400", nil, distill("--label-lr", "1e400"), exitUsage, []string{"--label-lr", "1e400"}},
		{"label lr -1", nil, distill("--label-lr", "-1"), exitUsage, []string{"--label-lr", "-1"}},
		{"threads 100000", nil, distill("--threads", "100000"), exitUsage, []string{"--threads", "100000"}},
		{"threads -1", nil, distill("--threads", "-1"), exitUsage, []string{"--threads", "-1"}},
		{"outer batch 0", nil, distill("--outer-batch", "0"), exitUsage, []string{"--outer-batch"}},
		{"outer batch -256", nil, distill("--outer-batch", "-256"), exitUsage, []string{"--outer-batch", "-256"}},
		{"target set size -5", nil, distill("--target-set-size", "-5"), exitUsage, []string{"--target-set-size", "-5"}},
		{"validate every 0", nil, distill("--validate-every", "0"), exitUsage, []string{"--validate-every"}},
		{"ridge pseudo step 2", nil, distill("--ridge-pseudo-step", "2"), exitUsage, []string{"--ridge-pseudo-step", "2"}},
		{"seed beyond int64", nil, distill("--seed", "99999999999999999999"), exitUsage, []string{"--seed", "out of range"}},
		{"device cuda", nil, distill("--device", "cuda"), exitUsage, []string{"--device cuda", "CUDA is not available"}},
		{"device cuda:7", nil, distill("--device", "cuda:7"), exitUsage, []string{"--device cuda:7"}},
		{"device cuda:-1", nil, distill("--device", "cuda:-1"), exitUsage, []string{"--device", "cuda:-1"}},
		{"config: unknown key in capitals", nil, distill("--config", writeConfig("caps.json", `{"EPOCHS": 3}`)), exitUsage, []string{"EPOCHS", "caps.json"}},
		{"config: duplicate key", nil, distill("--config", writeConfig("dup.json", `{"epochs": 3, "epochs": 4}`)), exitUsage, []string{"epochs", "dup.json"}},
		{"config: not an object", nil, distill("--config", writeConfig("list.json", `[1, 2]`)), exitUsage, []string{"list.json"}},
		{"config: empty", nil, distill("--config", writeConfig("empty.json", ``)), exitUsage, []string{"empty.json"}},
		{"config: fractional epochs", nil, distill("--config", writeConfig("frac.json", `{"epochs": 3.5}`)), exitUsage, []string{"epochs", "frac.json"}},
		{"config: baselines as a string", nil, distill("--config", writeConfig("str.json", `{"baselines": "true"}`)), exitUsage, []string{"baselines", "str.json"}},
		{"config: negative threads", nil, distill("--config", writeConfig("thr.json", `{"threads": -4}`)), exitUsage, []string{"threads", "thr.json"}},
		{"evaluate models -1", nil, []string{"evaluate", "--distilled", dir, "--models", "-1"}, exitUsage, []string{"--models", "-1"}},
		{"evaluate models 1e12", nil, []string{"evaluate", "--distilled", dir, "--models", "1000000000000"}, exitUsage, []string{"--models"}},
		{"evaluate batch 0", nil, []string{"evaluate", "--distilled", dir, "--batch", "0"}, exitUsage, []string{"--batch"}},
		{"evaluate lr 1e400", nil, []string{"evaluate", "--distilled", dir, "--lr", "1e400"}, exitUsage, []string{"--lr", "1e400"}},
		{"evaluate steps 1e11", nil, []string{"evaluate", "--distilled", dir, "--steps", "99999999999"}, exitUsage, []string{"--steps"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := hostileRunEnv(t, time.Minute, c.env, c.args...)
			wantOneLine(t, r, c.code, c.want...)
			noArtifact(t, out)
		})
	}

	shared := sharedDatasets(t)
	// Values that pass validation but not the data: non-zero, one line, no artifact.
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"base 1e9", []string{"--base", "1000000000"}, []string{"--base", "1000000000"}},
		{"target set larger than the data", []string{"--target-set-size", "100000000"}, []string{"--target-set-size", "100000000"}},
		{"validation split larger than the data", []string{"--validation-size", "1000000000"}, []string{"--validation-size", "1000000000"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := filepath.Join(t.TempDir(), "out")
			r := hostileRun(t, hostileLimit, tinyDistill(shared, o, append([]string{"--quiet"}, c.args...)...)...)
			want := -1 // any non-zero exit
			if c.name != "base 1e9" {
				want = exitUsage // the flag is named and the exit says usage
			}
			wantOneLine(t, r, want, c.want...)
			noArtifact(t, o)
		})
	}
	// evaluate --threads 100000 on a real artifact: refused, not 100000 threads started.
	t.Run("evaluate threads 100000", func(t *testing.T) {
		r := hostileRun(t, time.Minute, "evaluate", "--distilled", tinyRun(t), "--steps", "5", "--models", "1", "--quiet", "--threads", "100000")
		wantOneLine(t, r, exitUsage, "--threads", "100000")
	})
	// A negative seed is a seed like any other (int64; the generators take its bits).
	t.Run("seed -1 is valid", func(t *testing.T) {
		o := filepath.Join(t.TempDir(), "out")
		r := hostileRun(t, hostileLimit, tinyDistill(shared, o, "--quiet", "--seed", "-1")...)
		if r.code != 0 {
			t.Fatalf("--seed -1: exit %d: %s", r.code, r.stderr)
		}
		b, err := os.ReadFile(filepath.Join(o, "report.json"))
		if err != nil {
			t.Fatal(err)
		}
		var rep struct {
			Seed int64 `json:"seed"`
		}
		if err := json.Unmarshal(b, &rep); err != nil || rep.Seed != -1 {
			t.Errorf("report.json seed %d (%v), want -1", rep.Seed, err)
		}
	})
}
