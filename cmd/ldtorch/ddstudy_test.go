// Method dd's sensitivity studies and the flexibility figure through the CLI: a tiny LD RR
// and a tiny method dd artifact on MNIST, the dd studies, the refusals (a dd study of label
// artifact, flexibility without a dd artifact), and the figure reusing the studies already
// written.

package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDDStudiesCLI(t *testing.T) {
	shared := sharedDatasets(t)
	ld, dd := filepath.Join(t.TempDir(), "ld"), filepath.Join(t.TempDir(), "dd")
	for _, args := range [][]string{tinyDistill(shared, ld, "--quiet"), tinyImages(shared, dd, "dd", "--quiet")} {
		if r := ldtorch(t, nil, args...); r.code != 0 {
			t.Fatalf("%v: exit %d: %s%s", args, r.code, r.stdout, r.stderr)
		}
	}
	run := func(args ...string) result {
		t.Helper()
		r := ldtorch(t, nil, append(args, "--data-dir", shared, "--models", "1", "--threads", "1", "--quiet")...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d: %s%s", args, r.code, r.stdout, r.stderr)
		}
		return r
	}
	// Refusals, each one line naming the flag.
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"study", "lr", "--distilled", ld}, []string{"--distilled", ld, "method rr", "needs a method dd artifact"}},
		{[]string{"study", "order", "--distilled", ld}, []string{"--distilled", "needs a method dd artifact"}},
		{[]string{"study", "flexibility", "--distilled", ld}, []string{"--versus DD_DIR is required"}},
		{[]string{"study", "flexibility", "--distilled", ld, "--versus", ld}, []string{"--versus", ld, "not method dd"}},
		{[]string{"study", "flexibility", "--distilled", dd, "--versus", dd}, []string{"--distilled", dd, "is a method dd artifact"}},
		{[]string{"study", "flexibility", "--distilled", ld, "--versus", dd, "--deltas", "0"}, []string{"--deltas does not apply to study flexibility"}},
		{[]string{"study", "flexibility", "--distilled", ld, "--archs", "lenet"}, []string{"--archs does not apply to study flexibility", "run ldtorch study NAME with --archs first"}},
		{[]string{"study", "steps", "--distilled", ld, "--versus", dd}, []string{"--versus does not apply to the steps study", "flexibility"}},
		{[]string{"study", "lr", "--distilled", dd, "--steps", "3"}, []string{"--steps does not apply to the lr study"}},
	} {
		wantOneLine(t, ldtorch(t, nil, append(c.args, "--data-dir", shared, "--threads", "1", "--quiet")...), exitUsage, c.want...)
	}

	// The figure: the label studies written first (small grids) are reused, the missing dd
	// studies run and are written.
	run("study", "steps", "--distilled", ld, "--deltas", "0,5")
	run("study", "optimizer", "--distilled", ld, "--optimizers", "adam,sgd", "--lr", "0.001,0.01", "--momentum", "0.9")
	run("study", "arch", "--distilled", ld, "--archs", "lenet")
	r := run("study", "flexibility", "--distilled", ld, "--versus", dd)
	if n := strings.Count(r.stdout, "note: reused "); n != 3 {
		t.Errorf("flexibility reused %d studies, want the labels' 3:\n%s", n, r.stdout)
	}
	// dd's steps by default: ⅓ … 1 of T = 4 (2 steps × 2 epochs), and T + 5 at the mean step size.
	for _, want := range []string{"9 (5 at the mean)", "DD: mean step size", "DD: shuffled across epochs", "LD RR: sgd momentum 0.9 lr 0.01"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("flexibility: no %q in\n%s", want, r.stdout)
		}
	}
	for _, k := range []string{"steps", "lr", "order", "arch"} {
		if !strings.Contains(r.stdout, "note: ran "+k+" study of "+dd) {
			t.Errorf("flexibility did not say it ran dd's %s study:\n%s", k, r.stdout)
		}
		if _, err := os.Stat(filepath.Join(dd, "studies", k+".json")); err != nil {
			t.Errorf("dd's %s study not written: %v", k, err)
		}
	}
	b, err := os.ReadFile(filepath.Join(ld, "studies", "flexibility.png"))
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil || img.Bounds().Dx() != 21*96 || img.Bounds().Dy() != 6.5*96 { // three panels side by side at 96 dpi
		t.Errorf("flexibility.png: %v, %v", err, img.Bounds())
	}
	var f struct {
		Panels []struct {
			Name   string `json:"name"`
			Series []struct {
				Method string `json:"method"`
				Points []struct {
					Own bool `json:"own_recipe"`
				} `json:"points"`
			} `json:"series"`
		} `json:"panels"`
		Studies map[string]json.RawMessage `json:"studies"`
		Versus  map[string]json.RawMessage `json:"versus_studies"`
	}
	if b, err = os.ReadFile(filepath.Join(ld, "studies", "flexibility.json")); err != nil || json.Unmarshal(b, &f) != nil {
		t.Fatalf("flexibility.json: %v\n%s", err, b)
	}
	var names []string
	for _, p := range f.Panels {
		names = append(names, p.Name)
		if len(p.Series) < 2 || p.Series[0].Method != "LD RR" || p.Series[1].Method != "DD" {
			t.Errorf("panel %s: series %+v, want LD RR then DD", p.Name, p.Series)
		}
	}
	if strings.Join(names, ",") != "steps,optimisation,architecture" || len(f.Studies) != 3 || len(f.Versus) != 4 {
		t.Errorf("flexibility.json: panels %v, %d and %d studies", names, len(f.Studies), len(f.Versus))
	}
	// Again: every study reused.
	if r = run("study", "flexibility", "--distilled", ld, "--versus", dd); strings.Count(r.stdout, "note: reused ") != 7 {
		t.Errorf("second flexibility: want all 7 studies reused:\n%s", r.stdout)
	}
}
