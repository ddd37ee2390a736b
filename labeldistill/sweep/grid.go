package sweep

// grid.go: a sweep's grid file (grid.json): rows × columns of config settings over a common
// config, read and checked, and expanded into its cells (configs and folders).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/torch/fileio/boundedread"
)

// Grid is a sweep's grid file (JSON):
//
//	{
//	  "title":   "Table 1, MNIST: test accuracy (%)",
//	  "config":  {"dataset": "mnist", "baselines": ["true", "smooth"]},
//	  "rows":    [{"label": "LD", "set": {"method": "ld"}}, {"label": "LD RR", "set": {"method": "rr"}}],
//	  "columns": {"key": "base_examples", "values": [10, 20, 50, 100, 200, 500]},
//	  "paper":   {"LD": {"10": "60.89 ± 3.20"}, "Baseline": {"10": "48.35 ± 3.03"}}
//	}
//
// A cell's config is config.Default, then "config", then its row's "set", then its
// column's "set" (keys are Config's json names, as in a --config file). Rows and columns
// are each a list of {"label", "set"} or the shorthand {"key", "values"} (labels are the
// values). "paper" holds the published numbers by printed row label and column label;
// summary.md shows them in a "(paper)" row under each row.
//
// "base_file" (on the grid, a row or a column; a column's wins over its row's, a row's over
// the grid's) names an index file of base examples, as `distill --base-indices` takes it
// (one written by `ldtorch select-base`): the cell distils exactly those examples and
// records the file. In its name {base_examples}, {base_seed}, {seed} and {dataset} stand
// for the cell's settings; a relative name is relative to the grid file's folder.
type Grid struct {
	Title    string                       `json:"title"`
	Config   json.RawMessage              `json:"config"`
	BaseFile string                       `json:"base_file,omitempty"`
	Rows     GridAxis                     `json:"rows"`
	Columns  GridAxis                     `json:"columns"`
	Paper    map[string]map[string]string `json:"paper,omitempty"`
	Notes    string                       `json:"notes,omitempty"`
	dir      string                       // the grid file's folder (ReadGrid)
}

// GridEntry is one row or column: its label, the config keys it sets and, optionally, its
// cells' base-example file.
type GridEntry struct {
	Label    string          `json:"label"`
	Set      json.RawMessage `json:"set"`
	BaseFile string          `json:"base_file,omitempty"`
}

// GridAxis is a grid's rows or columns.
type GridAxis []GridEntry

// UnmarshalJSON accepts a list of entries or {"key": K, "values": [...]}.
func (a *GridAxis) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		var entries []GridEntry
		if err := strictUnmarshal(b, &entries); err != nil {
			var typ *json.UnmarshalTypeError
			if errors.As(err, &typ) && typ.Field == "" {
				return errors.New("want a list of {\"label\", \"set\"} objects")
			}
			return err
		}
		*a = entries
		return nil
	}
	var short struct {
		Key    string            `json:"key"`
		Values []json.RawMessage `json:"values"`
	}
	if len(b) == 0 || b[0] != '{' {
		return errors.New("want a list of {\"label\", \"set\"} or an object {\"key\", \"values\"}")
	}
	if err := strictUnmarshal(b, &short); err != nil {
		return err
	}
	if short.Key == "" || len(short.Values) == 0 {
		return errors.New("{\"key\", \"values\"} needs a key and at least one value")
	}
	for _, v := range short.Values {
		label := strings.Trim(string(v), `"`)
		set, _ := json.Marshal(map[string]json.RawMessage{short.Key: v})
		*a = append(*a, GridEntry{Label: label, Set: set})
	}
	return nil
}

func strictUnmarshal(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// Cell is one distillation of a grid.
type Cell struct {
	Row, Column string          // labels
	ID          string          // folder name under cells/
	Config      config.Resolved // Out = the cell's folder
	// BaseFile is the index file the cell's base_indices were read from (nil: none named).
	// BaseFileErr says why a named file could not be read (the cell cannot run until it
	// can); BaseFilePath is its path.
	BaseFile     *data.BaseFile
	BaseFilePath string
	BaseFileErr  error
}

// ReadGrid reads and checks a grid file: labels unique and non-empty, every cell's config
// valid, at most config.MaxGridCells cells. The file is read through config.MaxFileBytes
// (an endless stream given as the file is an error naming it and the bound); JSON errors
// give their line and column.
func ReadGrid(path string) (*Grid, error) { return ReadGridContext(context.Background(), path) }

// ReadGridContext is ReadGrid that gives up when ctx ends while a named pipe given as the
// file waits for its writer.
func ReadGridContext(ctx context.Context, path string) (*Grid, error) {
	b, err := boundedread.ReadFileContext(ctx, path, config.MaxFileBytes, "grid file")
	if err != nil {
		return nil, err
	}
	g, err := parseGrid(b, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return g, nil
}

// ParseGrid reads and checks a grid from JSON (see ReadGrid); relative base_file paths are
// taken from the current folder.
func ParseGrid(b []byte) (*Grid, error) { return parseGrid(b, "") }

// parseGrid is ParseGrid with relative base_file paths taken from dir.
func parseGrid(b []byte, dir string) (*Grid, error) {
	// The top level first (an object of known keys, nothing after it), with line and
	// column for syntax errors, then each part, named.
	var top struct {
		Title    string                       `json:"title"`
		Config   json.RawMessage              `json:"config"`
		BaseFile string                       `json:"base_file,omitempty"`
		Rows     json.RawMessage              `json:"rows"`
		Columns  json.RawMessage              `json:"columns"`
		Paper    map[string]map[string]string `json:"paper,omitempty"`
		Notes    string                       `json:"notes,omitempty"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&top); err != nil {
		return nil, config.JSONError(b, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("text after the JSON object")
	}
	g := &Grid{Title: top.Title, Config: top.Config, BaseFile: top.BaseFile, Paper: top.Paper, Notes: top.Notes, dir: dir}
	for _, axis := range []struct {
		name string
		raw  json.RawMessage
		dst  *GridAxis
	}{{"rows", top.Rows, &g.Rows}, {"columns", top.Columns, &g.Columns}} {
		if len(bytes.TrimSpace(axis.raw)) == 0 || string(bytes.TrimSpace(axis.raw)) == "null" {
			return nil, fmt.Errorf("needs %q: a list of {\"label\", \"set\"} or {\"key\", \"values\"}", axis.name)
		}
		if err := axis.dst.UnmarshalJSON(axis.raw); err != nil {
			return nil, fmt.Errorf("%s: %w", axis.name, config.JSONError(axis.raw, err))
		}
		if len(*axis.dst) == 0 {
			return nil, fmt.Errorf("%s: needs at least one entry", axis.name)
		}
	}
	if n := len(g.Rows) * len(g.Columns); n > config.MaxGridCells {
		return nil, fmt.Errorf("%d rows × %d columns: the cells %s", len(g.Rows), len(g.Columns),
			config.CountMessage(int64(n), 1, config.MaxGridCells, "each cell is a whole distillation"))
	}
	if _, err := g.Cells("", nil); err != nil {
		return nil, err
	}
	return g, nil
}

// maxFolderName is the longest file name Linux file systems take (NAME_MAX, in bytes).
const maxFolderName = 255

// Cells returns the grid's cells in row-major order, each config resolved with Out inside
// dir/cells; adjust (may be nil) is applied to every config before resolving (operational
// settings: threads, device, data dir).
func (g *Grid) Cells(dir string, adjust func(*config.Config)) ([]Cell, error) {
	base := config.Default()
	if len(g.Config) > 0 {
		var err error
		if base, err = overlayConfig(base, g.Config); err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
	}
	var cells []Cell
	ids := map[string]string{}
	for _, axis := range []struct {
		name    string
		entries GridAxis
	}{{"rows", g.Rows}, {"columns", g.Columns}} {
		seen := map[string]bool{}
		for _, e := range axis.entries {
			if e.Label == "" || seen[e.Label] {
				return nil, fmt.Errorf("%s: labels must be non-empty and unique, got %q", axis.name, e.Label)
			}
			seen[e.Label] = true
		}
	}
	for _, r := range g.Rows {
		rowCfg, err := overlayConfig(base, r.Set)
		if err != nil {
			return nil, fmt.Errorf("row %q: %w", r.Label, err)
		}
		for _, c := range g.Columns {
			cfg, err := overlayConfig(rowCfg, c.Set)
			if err != nil {
				return nil, fmt.Errorf("column %q: %w", c.Label, err)
			}
			cell := Cell{Row: r.Label, Column: c.Label}
			if cell.BaseFilePath, err = g.baseFilePath(r, c, cfg); err != nil {
				return nil, fmt.Errorf("cell %q/%q: %w", r.Label, c.Label, err)
			}
			if cell.BaseFilePath != "" {
				if cell.BaseFile, cell.BaseFileErr = data.ReadBaseFile(cell.BaseFilePath); cell.BaseFileErr == nil {
					cfg.BaseIndices = cell.BaseFile.Indices
				}
			}
			id := slug(r.Label) + "__" + slug(c.Label)
			if len(id) > maxFolderName {
				return nil, fmt.Errorf("cell %q/%q: its folder name %s… is %d bytes long, more than the %d a file name may have: shorten the labels",
					short(r.Label), short(c.Label), id[:40], len(id), maxFolderName)
			}
			if other, dup := ids[id]; dup {
				return nil, fmt.Errorf("cells %s and %q/%q have the same folder name %s", other, r.Label, c.Label, id)
			}
			ids[id] = fmt.Sprintf("%q/%q", r.Label, c.Label)
			cfg.Out = filepath.Join(dir, CellsFolder, id)
			if adjust != nil {
				adjust(&cfg)
			}
			resolved, err := config.Resolve(cfg)
			if err != nil {
				return nil, fmt.Errorf("cell %q/%q: %w", r.Label, c.Label, err)
			}
			// A setting the cell's method ignores is refused, as distill --config refuses it:
			// the cell would record it as its own.
			where := map[string]string{}
			for _, part := range []struct {
				name string
				set  json.RawMessage
			}{{"the grid's config", g.Config}, {fmt.Sprintf("row %q", r.Label), r.Set}, {fmt.Sprintf("column %q", c.Label), c.Set}} {
				for _, k := range setKeys(part.set) {
					where[k] = part.name
				}
			}
			if key, why := config.DDIgnored(resolved.Config, func(k string) bool { return where[k] != "" }); key != "" {
				return nil, fmt.Errorf("cell %q/%q: %s (set by %s) %s", r.Label, c.Label, key, where[key], why)
			}
			cell.ID, cell.Config = id, resolved
			cells = append(cells, cell)
		}
	}
	return cells, nil
}

// baseFilePath is the base_file of the cell of row r and column c (config cfg), with its
// placeholders filled and relative to the grid's folder; "" when none is named.
func (g *Grid) baseFilePath(r, c GridEntry, cfg config.Config) (string, error) {
	name := g.BaseFile
	for _, e := range []GridEntry{r, c} {
		if e.BaseFile != "" {
			name = e.BaseFile
		}
	}
	if name == "" {
		return "", nil
	}
	name = strings.NewReplacer("{base_examples}", strconv.Itoa(cfg.BaseExamples), "{base_seed}", strconv.FormatInt(cfg.BaseSelectionSeed(), 10),
		"{seed}", strconv.FormatInt(cfg.Seed, 10), "{dataset}", cfg.Dataset).Replace(name)
	if strings.ContainsAny(name, "{}") {
		return "", fmt.Errorf("base_file %q: unknown placeholder (known: {base_examples}, {base_seed}, {seed}, {dataset})", name)
	}
	if !filepath.IsAbs(name) && g.dir != "" {
		name = filepath.Join(g.dir, name)
	}
	return name, nil
}

// withAbsoluteBaseFiles is a copy of g whose relative base_file names are made absolute
// (from the grid file's folder), for the copy a sweep folder keeps: a later run compares
// its cells with the files they were distilled from, wherever that run is started.
func (g *Grid) withAbsoluteBaseFiles() *Grid {
	abs := func(name string) string {
		if name == "" || filepath.IsAbs(name) {
			return name
		}
		if a, err := filepath.Abs(filepath.Join(g.dir, name)); err == nil {
			return a
		}
		return name
	}
	c := *g
	c.BaseFile = abs(g.BaseFile)
	c.Rows, c.Columns = slices.Clone(g.Rows), slices.Clone(g.Columns)
	for _, axis := range []GridAxis{c.Rows, c.Columns} {
		for i := range axis {
			axis[i].BaseFile = abs(axis[i].BaseFile)
		}
	}
	return &c
}

// overlayConfig decodes a JSON object of config keys over c, with the checks of a config
// file (unknown or duplicate keys, wrong types).
func overlayConfig(c config.Config, set json.RawMessage) (config.Config, error) {
	if len(bytes.TrimSpace(set)) == 0 || string(bytes.TrimSpace(set)) == "null" {
		return c, nil
	}
	if _, err := config.Parse(set); err != nil { // key and type checks only
		return c, err
	}
	out := c
	// Slices must not alias the outer config's.
	out.NormMean, out.NormStd = slices.Clone(c.NormMean), slices.Clone(c.NormStd)
	out.Baselines, out.BaselineSteps, out.BaseIndices = slices.Clone(c.Baselines), slices.Clone(c.BaselineSteps), slices.Clone(c.BaseIndices)
	if c.BaseSeed != nil {
		seed := *c.BaseSeed
		out.BaseSeed = &seed
	}
	if err := json.Unmarshal(set, &out); err != nil {
		return c, err
	}
	return out, nil
}

// setKeys are the keys of a JSON object of config keys (none when it is empty or not an
// object: overlayConfig reports that).
func setKeys(set json.RawMessage) []string {
	var m map[string]json.RawMessage
	if json.Unmarshal(set, &m) != nil {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// short cuts a label for a message to 40 characters.
func short(s string) string {
	if r := []rune(s); len(r) > 40 {
		return string(r[:40]) + "…"
	}
	return s
}

var nonSlug = regexp.MustCompile(`[^a-z0-9.+-]+`)

// slug turns a label into a folder name: "LD RR" → "ld-rr", "E → M" → "e-m".
func slug(s string) string {
	s = strings.Trim(nonSlug.ReplaceAllString(strings.ToLower(s), "-"), "-")
	if s == "" {
		s = "x"
	}
	return s
}
