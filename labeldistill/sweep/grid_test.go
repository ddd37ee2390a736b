package sweep

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ldtorch/ldtorch/torch/fileio/boundedread"
)

// TestParseGridErrors: a grid file's problems are named in words, with line and column
// for its syntax (an empty or cut-short file used to say only "EOF", a list "cannot
// unmarshal array into Go value of type sweep.Grid").
func TestParseGridErrors(t *testing.T) {
	cells := func(rows, cols int) string {
		var r, c []string
		for i := range rows {
			r = append(r, `{"label": "r`+strings.Repeat("x", i)+`", "set": {}}`)
		}
		for i := range cols {
			c = append(c, `{"label": "c`+strings.Repeat("x", i)+`", "set": {}}`)
		}
		return `{"rows": [` + strings.Join(r, ",") + `], "columns": [` + strings.Join(c, ",") + `]}`
	}
	for name, tc := range map[string]struct{ text, want string }{
		"empty":         {"", "the file is empty"},
		"cut short":     {`{"rows": [{"label": "a"`, "line 1, column 24: unexpected end of the file"},
		"a list":        {`[1, 2]`, "want an object, got a list"},
		"unknown key":   {`{"rowz": []}`, `unknown key "rowz"`},
		"rows a number": {`{"rows": 5, "columns": {"key": "seed", "values": [1]}}`, `rows: want a list of {"label", "set"} or an object {"key", "values"}`},
		"entry key":     {`{"rows": [{"lable": "x"}], "columns": {"key": "seed", "values": [1]}}`, `rows: unknown key "lable"`},
		"no columns":    {`{"rows": [{"label": "x"}]}`, `needs "columns"`},
		"after":         {`{"rows": [{"label": "x"}], "columns": {"key": "seed", "values": [1]}} {}`, "text after the JSON object"},
		"long label":    {`{"rows": [{"label": "` + strings.Repeat("L", 300) + `"}], "columns": {"key": "seed", "values": [1]}}`, "more than the 255 a file name may have"},
		"too many":      {cells(40, 30), "the cells must be between 1 and 1000, got 1200"},
	} {
		_, err := ParseGrid([]byte(tc.text))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
		if err != nil && (strings.Contains(err.Error(), "Go ") || strings.Contains(err.Error(), "sweep.")) {
			t.Errorf("%s: a Go type in %q", name, err)
		}
	}
	if _, err := ReadGrid("/dev/zero"); !errors.As(err, new(*boundedread.TooLargeError)) {
		t.Errorf("/dev/zero: %v", err)
	}
}

// TestCheckGridFile: a grid that changes a cell of the grid a folder was run with is
// refused before anything is written; added cells are fine.
func TestCheckGridFile(t *testing.T) {
	dir := t.TempDir()
	old := `{"config": {"epochs": 2}, "rows": [{"label": "LD", "set": {"method": "ld"}}], "columns": {"key": "seed", "values": [1]}}`
	if err := os.WriteFile(filepath.Join(dir, GridFile), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ text, want string }{
		{old, ""},
		{`{"config": {"epochs": 2}, "rows": [{"label": "LD", "set": {"method": "ld"}}], "columns": {"key": "seed", "values": [1, 2]}}`, ""},
		{`{"config": {"epochs": 3}, "rows": [{"label": "LD", "set": {"method": "ld"}}], "columns": {"key": "seed", "values": [1]}}`, "epochs: 2 -> 3"},
	} {
		g, err := ParseGrid([]byte(tc.text))
		if err != nil {
			t.Fatal(err)
		}
		err = CheckGridFile(g, dir)
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.text, err, tc.want)
		}
	}
}
