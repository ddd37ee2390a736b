package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A sweep of one tiny cell, then a study of that cell's artifact, through the CLI.
func TestSweepAndStudyCLI(t *testing.T) {
	shared, _ := filepath.Abs(sharedDatasets(t))
	dir := t.TempDir()
	grid := filepath.Join(dir, "grid.json")
	os.WriteFile(grid, []byte(`{"title": "cli", "config": {"dataset": "mnist", "method": "rr", "epochs": 1, "eval_models": 2,
	  "baselines": ["true"], "baseline_steps": [5, 10], "baseline_max_steps": 10, "target_set_size": 2048, "validation_size": 1000},
	  "rows": [{"label": "LD RR", "set": {}}], "columns": {"key": "base_examples", "values": [10]}}`), 0o644)
	out := filepath.Join(dir, "sweep")
	r := ldtorch(t, nil, "sweep", "--grid", grid, "--out", out, "--data-dir", shared, "--threads", "1", "-q")
	if r.code != 0 || !strings.Contains(r.stdout, "| LD RR |") || !strings.Contains(r.stdout, "| Baseline RR |") {
		t.Fatalf("sweep: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = ldtorch(t, nil, "sweep", "--grid", grid, "--out", out, "--list")
	if r.code != 0 || !strings.Contains(r.stdout, "done     cells/ld-rr__10") {
		t.Errorf("sweep --list: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// --list shows the cells --rows and --columns select, of a grid larger than what ran
	wide := filepath.Join(dir, "wide.json")
	os.WriteFile(wide, []byte(`{"title": "wide", "config": {"dataset": "mnist"},
	  "rows": [{"label": "LD", "set": {"method": "ld"}}, {"label": "LD RR", "set": {"method": "rr"}}],
	  "columns": {"key": "base_examples", "values": [10, 20]}}`), 0o644)
	r = ldtorch(t, nil, "sweep", "--grid", wide, "--out", out+"-wide", "--rows", "LD RR", "--columns", "20", "--list")
	if r.code != 0 || r.stdout != "new      cells/ld-rr__20\n" {
		t.Errorf("sweep --list --rows 'LD RR' --columns 20: exit %d, want one cell\n%s%s", r.code, r.stdout, r.stderr)
	}
	cell := filepath.Join(out, "cells", "ld-rr__10")
	r = ldtorch(t, nil, "study", "steps", "--distilled", cell, "--steps", "3,8", "--models", "2", "--threads", "1", "--data-dir", shared, "-q")
	if r.code != 0 || !strings.Contains(r.stdout, "steps study of "+cell+" (LD RR through lenet on mnist, 10 base examples") {
		t.Fatalf("study: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var st struct {
		LearntThrough string `json:"learnt_through"`
		Settings      []struct {
			Steps      int       `json:"steps"`
			Accuracies []float64 `json:"test_accuracies"`
		} `json:"settings"`
	}
	b, err := os.ReadFile(filepath.Join(cell, "studies", "steps.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &st); err != nil || len(st.Settings) != 2 || st.Settings[1].Steps != 8 || len(st.Settings[1].Accuracies) != 2 || st.LearntThrough != "lenet" {
		t.Errorf("steps.json: %v %s", err, b)
	}
	if png, err := os.ReadFile(filepath.Join(cell, "studies", "steps.png")); err != nil || !strings.HasPrefix(string(png), "\x89PNG") {
		t.Errorf("steps.png: %v", err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"study", "speed", "--distilled", cell}, `unknown study "speed"`},
		{[]string{"study", "steps"}, "--distilled DIR is required"},
		{[]string{"study", "optimizer", "--distilled", cell, "--lr", "0.1,x"}, `--lr: "x"`},
		{[]string{"study", "steps", "--distilled", cell, "--steps", "0"}, "--steps: must be between 1 and 1000000, got 0"},
		{[]string{"study", "arch", "--distilled", cell, "--archs", "vgg"}, `--archs: unknown "vgg"`},
		{[]string{"sweep", "--grid", filepath.Join(dir, "none.json"), "--out", out}, "--grid: cannot read"},
		{[]string{"sweep", "--grid", grid, "--out", out, "--rows", "LD"}, `no row labelled "LD"`},
	} {
		r := ldtorch(t, nil, c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, r.code, r.stderr, c.want)
		}
	}
}

// --base-indices reads a file into base_indices (N follows it unless --base is given) and
// --base-seed sets base_seed; a mismatch and a bad file are usage errors naming the flag.
func TestReproductionFlags(t *testing.T) {
	dir := t.TempDir()
	idx := filepath.Join(dir, "idx.txt")
	os.WriteFile(idx, []byte("5 17 23\n"), 0o644)
	r := ldtorch(t, nil, "distill", "--dry-run", "--base-indices", idx, "--base-seed", "77", "--base-selection", "unbalanced")
	var cfg struct {
		BaseExamples int     `json:"base_examples"`
		BaseSeed     *int64  `json:"base_seed"`
		BaseIndices  []int64 `json:"base_indices"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &cfg) != nil || cfg.BaseExamples != 3 || cfg.BaseSeed == nil || *cfg.BaseSeed != 77 || len(cfg.BaseIndices) != 3 {
		t.Fatalf("dry-run: exit %d, %+v\n%s%s", r.code, cfg, r.stdout, r.stderr)
	}
	r = ldtorch(t, nil, "distill", "--dry-run")
	if json.Unmarshal([]byte(r.stdout), &cfg) != nil || cfg.BaseSeed == nil || *cfg.BaseSeed != 1234 || cfg.BaseIndices != nil {
		t.Errorf("default base seed: %+v", cfg)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--base-indices", idx, "--base", "10"}, "--base-indices: lists 3 base examples but --base is 10"},
		{[]string{"--base-indices", filepath.Join(dir, "none")}, "--base-indices: open"},
	} {
		r := ldtorch(t, nil, append([]string{"distill", "--dry-run"}, c.args...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, r.code, r.stderr, c.want)
		}
	}
}
