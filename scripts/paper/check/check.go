// Package check keeps docs/RESULTS.md honest against docs/results/cells.json.
//
// cells.json holds one entry per cell: a configuration (dataset, method, base examples,
// settings), the paper's mean and std where the paper has the cell, every run of that
// configuration (value, std over its test models, seed, commit, machine, the record page
// that describes it) and the claim word the docs use for it. A rerun that reproduces an
// earlier run bit for bit is listed as a further record of that run ("also"), not as a new
// run. Its targets are the project's goals, each either a cell's mean or a measured value
// against a stated bound.
//
// The arithmetic, which the claim words must match:
//
//   - ours is the mean of the cell's run values;
//   - the distance is (ours − paper mean) / paper std, rounded to two decimals, as printed;
//   - "within": |distance| ≤ 1.00; "below" or "above": further away, by its sign;
//   - a paper number without a std (ratios): "within" if ours equals it at the cell's
//     decimals, else "below" or "above";
//   - "no paper cell": the paper has no number for this configuration;
//   - a target is "met" when its value (a cell's mean, or the measured value) satisfies
//     its bound (op and value, or op and another cell's mean), else "missed".
//
// In docs/RESULTS.md a cell's number is a link whose title is the cell's id:
// [87.66](results/mnist-100.md#ld-rr-100-base-examples "t1m-ldrr-100"). The link's text must
// be the cell's mean at its decimals (a target's link: its value), and the link must point
// at one of the cell's run records. In a table row with exactly one such link, the columns
// headed "paper", "Δ", "claim" and "runs" must hold the paper's number, the distance, the
// claim word and the run values. Cells whose status says they are being remeasured must
// not be linked at all.
package check

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

// Paper is the paper's number for a cell.
type Paper struct {
	Mean   float64  `json:"mean"`
	Std    *float64 `json:"std"`
	Source string   `json:"source"`
}

// Run is one measurement of a cell's configuration.
type Run struct {
	Value    float64  `json:"value"`
	Std      *float64 `json:"std"`
	Seed     int      `json:"seed"`
	BaseSeed *int     `json:"base_seed"`
	Commit   *string  `json:"commit"`
	Machine  string   `json:"machine"`
	Record   string   `json:"record"`
	Also     []string `json:"also"`
	Note     string   `json:"note"`
}

// Cell is one configuration and its runs.
type Cell struct {
	ID       string `json:"id"`
	Table    string `json:"table"`
	Dataset  string `json:"dataset"`
	Method   string `json:"method"`
	Base     int    `json:"base_examples"`
	Config   string `json:"config"`
	Unit     string `json:"unit"`
	Decimals int    `json:"decimals"`
	Paper    *Paper `json:"paper"`
	Runs     []Run  `json:"runs"`
	Status   string `json:"status"`
	Note     string `json:"note"`
	Claim    string `json:"claim"`
}

// Target is a goal: a cell's mean or a measured value against a bound.
type Target struct {
	ID       string   `json:"id"`
	What     string   `json:"what"`
	Cell     string   `json:"cell"`
	Measured *float64 `json:"measured"`
	Op       string   `json:"op"`
	Value    *float64 `json:"value"`
	Than     string   `json:"than"`
	Unit     string   `json:"unit"`
	Record   string   `json:"record"`
	Claim    string   `json:"claim"`
}

// File is cells.json.
type File struct {
	Machines map[string]string `json:"machines"`
	Cells    []Cell            `json:"cells"`
	Targets  []Target          `json:"targets"`
	byID     map[string]*Cell
}

// Load reads cells.json.
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f.byID = map[string]*Cell{}
	for i := range f.Cells {
		f.byID[f.Cells[i].ID] = &f.Cells[i]
	}
	return &f, nil
}

// Mean is ours: the mean of the run values.
func (c *Cell) Mean() float64 {
	s := 0.0
	for _, r := range c.Runs {
		s += r.Value
	}
	return s / float64(len(c.Runs))
}

// Distance is (ours − paper) / paper std rounded to two decimals; ok is false without a
// paper std.
func (c *Cell) Distance() (d float64, ok bool) {
	if c.Paper == nil || c.Paper.Std == nil {
		return 0, false
	}
	return math.Round((c.Mean()-c.Paper.Mean) / *c.Paper.Std * 100) / 100, true
}

// ExpectedClaim is the claim word the arithmetic gives.
func (c *Cell) ExpectedClaim() string {
	if c.Paper == nil {
		return "no paper cell"
	}
	d, ok := c.Distance()
	if !ok {
		p := math.Pow(10, float64(c.Decimals))
		d = math.Round((c.Mean()-c.Paper.Mean)*p) / p
	} else if math.Abs(d) <= 1 {
		return "within"
	}
	switch {
	case d > 0:
		return "above"
	case d < 0:
		return "below"
	}
	return "within"
}

func num(x float64, decimals int) string { return fmt.Sprintf("%.*f", decimals, x) }

// PaperText, DistanceText and RunsText are what RESULTS.md's columns must say.
func (c *Cell) PaperText() string {
	switch {
	case c.Paper == nil:
		return "–"
	case c.Paper.Std == nil:
		return num(c.Paper.Mean, c.Decimals)
	}
	return num(c.Paper.Mean, c.Decimals) + " ± " + num(*c.Paper.Std, c.Decimals)
}

func (c *Cell) DistanceText() string {
	d, ok := c.Distance()
	if !ok {
		return "–"
	}
	return fmt.Sprintf("%+.2f", d)
}

func (c *Cell) RunsText() string {
	if len(c.Runs) == 1 && c.Runs[0].Std != nil {
		return num(c.Runs[0].Value, c.Decimals) + " ± " + num(*c.Runs[0].Std, c.Decimals)
	}
	v := make([]string, len(c.Runs))
	for i, r := range c.Runs {
		v[i] = num(r.Value, c.Decimals)
	}
	return strings.Join(v, ", ")
}

// value is a target's value and its bound's, and the decimals to print them with.
func (f *File) value(t *Target) (x, y float64, decimals int, err error) {
	decimals = 0
	switch {
	case t.Cell != "":
		c, ok := f.byID[t.Cell]
		if !ok {
			return 0, 0, 0, fmt.Errorf("target %s: no cell %q", t.ID, t.Cell)
		}
		x, decimals = c.Mean(), c.Decimals
	case t.Measured != nil:
		x = *t.Measured
		if t.Unit == "%" {
			decimals = 2
		}
	default:
		return 0, 0, 0, fmt.Errorf("target %s: neither a cell nor a measured value", t.ID)
	}
	switch {
	case t.Than != "":
		c, ok := f.byID[t.Than]
		if !ok {
			return 0, 0, 0, fmt.Errorf("target %s: no cell %q", t.ID, t.Than)
		}
		y = c.Mean()
	case t.Value != nil:
		y = *t.Value
	default:
		return 0, 0, 0, fmt.Errorf("target %s: no bound", t.ID)
	}
	return x, y, decimals, nil
}

// ExpectedClaim is "met" or "missed" for a target.
func (f *File) ExpectedClaim(t *Target) (string, error) {
	x, y, _, err := f.value(t)
	if err != nil {
		return "", err
	}
	var ok bool
	switch t.Op {
	case ">=":
		ok = x >= y
	case ">":
		ok = x > y
	case "<=":
		ok = x <= y
	case "<":
		ok = x < y
	default:
		return "", fmt.Errorf("target %s: unknown op %q", t.ID, t.Op)
	}
	if ok {
		return "met", nil
	}
	return "missed", nil
}

var claims = map[string]bool{"within": true, "below": true, "above": true, "no paper cell": true}

// CheckCells checks cells.json by itself: ids, machines, record pages and their anchors
// (root is the repository), and every claim word against the arithmetic.
func CheckCells(f *File, root string) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	seen := map[string]bool{}
	for i := range f.Cells {
		c := &f.Cells[i]
		if seen[c.ID] {
			bad("cell %s: id used twice", c.ID)
		}
		seen[c.ID] = true
		if len(c.Runs) == 0 {
			bad("cell %s: no runs", c.ID)
			continue
		}
		if !claims[c.Claim] {
			bad("cell %s: claim %q is not one of within, below, above, no paper cell", c.ID, c.Claim)
		} else if want := c.ExpectedClaim(); c.Claim != want {
			bad("cell %s: claim %q, the arithmetic says %q (ours %s, paper %s, distance %s)",
				c.ID, c.Claim, want, num(c.Mean(), c.Decimals), c.PaperText(), c.DistanceText())
		}
		if c.Status != "" && c.Status != "being remeasured" {
			bad("cell %s: unknown status %q", c.ID, c.Status)
		}
		for j, r := range c.Runs {
			if _, ok := f.Machines[r.Machine]; !ok {
				bad("cell %s run %d: unknown machine %q", c.ID, j+1, r.Machine)
			}
			if err := checkLink(root, r.Record); err != nil {
				bad("cell %s run %d: %v", c.ID, j+1, err)
			}
		}
	}
	for i := range f.Targets {
		t := &f.Targets[i]
		if seen[t.ID] {
			bad("target %s: id used twice", t.ID)
		}
		seen[t.ID] = true
		want, err := f.ExpectedClaim(t)
		switch {
		case err != nil:
			errs = append(errs, err)
		case t.Claim != want:
			bad("target %s: claim %q, the arithmetic says %q", t.ID, t.Claim, want)
		}
		if t.Record != "" {
			if err := checkLink(root, t.Record); err != nil {
				bad("target %s: %v", t.ID, err)
			}
		}
	}
	return errs
}

// checkLink checks that a repository path with an optional #anchor names an existing
// markdown file with a heading of that anchor.
func checkLink(root, link string) error {
	file, anchor, _ := strings.Cut(link, "#")
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(file)))
	if err != nil {
		return fmt.Errorf("record %s: %w", link, err)
	}
	if anchor == "" {
		return nil
	}
	for _, a := range Anchors(string(b)) {
		if a == anchor {
			return nil
		}
	}
	return fmt.Errorf("record %s: %s has no heading with anchor #%s", link, file, anchor)
}

// Anchors lists the anchors GitHub gives a markdown file's headings: lower case, letters,
// digits, spaces, hyphens and underscores kept, spaces made hyphens, repeats numbered.
func Anchors(md string) []string {
	var out []string
	n := map[string]int{}
	fence := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "```") {
			fence = !fence
		}
		if fence || !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if k := n[a]; k > 0 {
			out = append(out, fmt.Sprintf("%s-%d", a, k))
		} else {
			out = append(out, a)
		}
		n[a]++
	}
	return out
}

var link = regexp.MustCompile(`\[([^\]]*)\]\(([^)\s]+)\s+"([^"]+)"\)`)

func norm(s string) string {
	return strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(s, "−", "-"), "**", ""))
}

// CheckResults checks the tables of RESULTS.md (its text; docDir is the folder its links
// are relative to, as a repository path, "docs") against f.
func CheckResults(f *File, results, docDir string) []error {
	var errs []error
	targets := map[string]*Target{}
	for i := range f.Targets {
		targets[f.Targets[i].ID] = &f.Targets[i]
	}
	var header []string
	lines := strings.Split(results, "\n")
	for i, line := range lines {
		bad := func(format string, a ...any) {
			errs = append(errs, fmt.Errorf("RESULTS.md:%d: %s", i+1, fmt.Sprintf(format, a...)))
		}
		if !strings.HasPrefix(line, "|") {
			header = nil
			continue
		}
		cols := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if header == nil {
			header = cols
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(cols[0]), "---") {
			continue
		}
		found := link.FindAllStringSubmatch(line, -1)
		for _, m := range found {
			text, url, id := norm(m[1]), m[2], m[3]
			rec := filepath.ToSlash(filepath.Join(docDir, url))
			if t, ok := targets[id]; ok {
				x, _, d, err := f.value(t)
				if err != nil {
					errs = append(errs, err)
				} else if want := num(x, d); text != want {
					bad("target %s: the link says %q, the value is %s", id, text, want)
				}
				continue
			}
			c, ok := f.byID[id]
			if !ok {
				bad("link to %q: no such cell or target", id)
				continue
			}
			if c.Status != "" {
				bad("cell %s is %s: its row must not give a number", id, c.Status)
			}
			if want := num(c.Mean(), c.Decimals); text != want {
				bad("cell %s: the link says %q, the mean of its runs is %s", id, text, want)
			}
			okRec := false
			for _, r := range c.Runs {
				okRec = okRec || r.Record == rec
			}
			if !okRec {
				bad("cell %s: the link points at %s, which is none of its runs' records", id, rec)
			}
		}
		if len(found) != 1 {
			continue
		}
		id := found[0][3]
		c, isCell := f.byID[id]
		t, isTarget := targets[id]
		for j, h := range header {
			if j >= len(cols) {
				break
			}
			got := norm(cols[j])
			var want string
			switch strings.ToLower(strings.TrimSpace(h)) {
			case "paper":
				if !isCell {
					continue
				}
				want = c.PaperText()
			case "δ":
				if !isCell {
					continue
				}
				want = c.DistanceText()
			case "runs":
				if !isCell {
					continue
				}
				want = c.RunsText()
			case "claim":
				switch {
				case isCell:
					want = c.Claim
				case isTarget:
					want = t.Claim
				default:
					continue
				}
			default:
				continue
			}
			if got != norm(want) {
				bad("%s: column %q says %q, want %q", id, strings.TrimSpace(h), got, want)
			}
		}
	}
	return errs
}
