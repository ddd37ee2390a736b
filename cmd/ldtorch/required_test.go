// Flags a command cannot do without: missing, a usage error naming them, as every other
// (exit 2, one line); urfave's own check printed the command's whole help first and exited 1.

package main

import (
	"testing"
)

func TestRequiredFlagsAreUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"select-base", "--dataset", "mnist", "--base", "10", "--out", "sel.txt"}, "--strategy is required (see ldtorch select-base --help)"},
		{[]string{"select-base", "--dataset", "mnist", "--base", "10", "--strategy", "paper"}, "--out is required"},
		{[]string{"select-base", "--base", "10"}, "--dataset, --strategy and --out are required"},
		{[]string{"sweep", "--out", "sweep-out"}, "--grid is required (see ldtorch sweep --help)"},
		{[]string{"sweep", "--grid", "grid.json"}, "--out is required"},
	} {
		r := ldtorch(t, nil, tc.args...)
		wantOneLine(t, r, exitUsage, tc.want)
		if r.stdout != "" {
			t.Errorf("%v: stdout %q, want nothing (no help)", tc.args, r.stdout)
		}
	}
}
