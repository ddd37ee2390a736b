package check

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const root = "../../.."

func load(t *testing.T) *File {
	t.Helper()
	f, err := Load(filepath.Join(root, "docs/results/cells.json"))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestCells: every claim word in cells.json is what its runs and the paper's number give,
// every run names a known machine and a record page heading that exists.
func TestCells(t *testing.T) {
	f := load(t)
	if len(f.Cells) == 0 {
		t.Fatal("cells.json has no cells")
	}
	for _, err := range CheckCells(f, root) {
		t.Error(err)
	}
}

// TestResults: every number RESULTS.md links to a cell is that cell's mean, and the
// paper, Δ, claim and runs columns of its row say what cells.json says.
func TestResults(t *testing.T) {
	f := load(t)
	b, err := os.ReadFile(filepath.Join(root, "docs/RESULTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), `" "`); n != 0 {
		t.Errorf("RESULTS.md: %d links with a stray quote", n)
	}
	for _, err := range CheckResults(f, string(b), "docs") {
		t.Error(err)
	}
	linked := map[string]bool{}
	for _, m := range link.FindAllStringSubmatch(string(b), -1) {
		linked[m[3]] = true
	}
	// The summary tables cite the cells of the paper's Table 1 and the goals.
	for _, c := range f.Cells {
		if strings.HasPrefix(c.Table, "Table 1") && !linked[c.ID] {
			t.Errorf("RESULTS.md does not cite cell %s (%s)", c.ID, c.Table)
		}
	}
	for _, g := range f.Targets {
		if !linked[g.ID] {
			t.Errorf("RESULTS.md does not cite target %s", g.ID)
		}
	}
}

func ptr(x float64) *float64 { return &x }

// TestRule: the rule catches what it is for, on made-up cells.
func TestRule(t *testing.T) {
	mk := func(claim string, paper, std float64, vals ...float64) *File {
		c := Cell{ID: "x", Decimals: 2, Claim: claim, Paper: &Paper{Mean: paper, Std: ptr(std)}}
		for _, v := range vals {
			c.Runs = append(c.Runs, Run{Value: v, Machine: "m", Record: "docs/RESULTS.md"})
		}
		return &File{Machines: map[string]string{"m": ""}, Cells: []Cell{c}, byID: map[string]*Cell{"x": &c}}
	}
	for _, tc := range []struct {
		claim       string
		paper, std  float64
		vals        []float64
		wantProblem bool
	}{
		{"within", 75.98, 1.00, []float64{74.64}, true},               // LD RR 20: 1.34 stds below
		{"below", 75.98, 1.00, []float64{74.64}, false},               //
		{"within", 87.98, 0.45, []float64{87.53}, false},              // exactly one std, as printed
		{"within", 34.44, 6.15, []float64{35.91, 67.07, 62.77}, true}, // the paper below all three runs
		{"above", 34.44, 6.15, []float64{35.91, 67.07, 62.77}, false},
		{"within", 87.27, 0.69, []float64{86.71, 86.73, 86.78, 86.06}, true}, // mean 1.01 stds below
	} {
		errs := CheckCells(mk(tc.claim, tc.paper, tc.std, tc.vals...), root)
		if got := len(errs) > 0; got != tc.wantProblem {
			t.Errorf("claim %q for %v against %v ± %v: problems %v, want problems: %v", tc.claim, tc.vals, tc.paper, tc.std, errs, tc.wantProblem)
		}
	}

	f := mk("below", 75.98, 1.00, 74.64)
	f.Cells[0].Runs[0].Record = "docs/RESULTS.md#no-such-heading"
	if errs := CheckCells(f, root); len(errs) != 1 {
		t.Errorf("a record anchor that does not exist: %v", errs)
	}

	f = mk("below", 75.98, 1.00, 74.64)
	row := func(s string) string {
		return "| cell | paper | ours | Δ | claim | runs |\n|---|---|---|---|---|---|\n" + s + "\n"
	}
	good := `| LD RR 20 | 75.98 ± 1.00 | [74.64](RESULTS.md "x") | −1.34 | below | 74.64 |`
	if errs := CheckResults(f, row(good), "docs"); len(errs) != 0 {
		t.Errorf("a correct row: %v", errs)
	}
	for _, s := range []string{
		`| LD RR 20 | 75.98 ± 1.00 | [74.65](RESULTS.md "x") | −1.34 | below | 74.64 |`,  // not the mean
		`| LD RR 20 | 75.98 ± 1.00 | [74.64](RESULTS.md "x") | −1.34 | within | 74.64 |`, // not the claim
		`| LD RR 20 | 75.98 ± 1.10 | [74.64](RESULTS.md "x") | −1.34 | below | 74.64 |`,  // not the paper's std
		`| LD RR 20 | 75.98 ± 1.00 | [74.64](RESULTS.md "x") | −1.24 | below | 74.64 |`,  // not the distance
		`| LD RR 20 | 75.98 ± 1.00 | [74.64](other.md "x") | −1.34 | below | 74.64 |`,    // not a record of the cell
		`| LD RR 20 | 75.98 ± 1.00 | [74.64](RESULTS.md "y") | −1.34 | below | 74.64 |`,  // no such cell
	} {
		if errs := CheckResults(f, row(s), "docs"); len(errs) == 0 {
			t.Errorf("no problem found in %s", s)
		}
	}
}

func TestAnchors(t *testing.T) {
	got := strings.Join(Anchors("# Results\n## LD RR, 100 base examples\n```\n# not a heading\n```\n## The authors' code\n## Results\n"), " ")
	if want := "results ld-rr-100-base-examples the-authors-code results-1"; got != want {
		t.Errorf("Anchors: %q, want %q", got, want)
	}
}
