package houserules

// houserules_test.go: the house rules of the repository, held by tests so that a new
// feature cannot quietly undo them: file and package sizes, the direction of imports, and
// no environment read by the library (torch/ and nets/ have their own check, torch's
// TestNoEnvironmentReads).

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/ldtorch/ldtorch/"

// layers are the project's packages from the top down: a package imports only packages
// of layers below its own (test files aside). A package not listed fails the test, so a
// new one is placed here when it is added.
var layers = [][]string{
	{"cmd/ldtorch"},
	{"labeldistill/sweep", "labeldistill/study", "labeldistill/selectbase", "labeldistill/bench"},
	{"labeldistill/report"},
	{"labeldistill/artifact"},
	{"labeldistill"},
	{"labeldistill/rundir", "labeldistill/gradvar"},
	{"labeldistill/engine"},
	{"labeldistill/train"},
	{"labeldistill/checkpoint", "labeldistill/internal/testkit"},
	{"labeldistill/config", "labeldistill/results"},
	{"labeldistill/data"},
	{"nets", "nets/augment"},
	{"torch/dist", "torch/devicetest", "torch/internal/atentest"},
	{"torch"},
	{"torch/fileio/npz"},
	{"torch/fileio/atomicfile", "torch/fileio/boundedread"},
	{"scripts/paper/check", "labeldistill/internal/houserules"},
}

// Size limits: every Go file (tests aside) and labeldistill's own package.
const (
	maxFileLines = 600
	maxRootLines = 2500
)

func repoRoot(t *testing.T) string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "..", "..", "..")
}

// goFiles lists the repository's Go files by package folder (relative, slash-separated).
func goFiles(t *testing.T) map[string][]string {
	root := repoRoot(t)
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && (name == "third_party" || name == "testdata" || strings.HasPrefix(name, "build") || (strings.HasPrefix(name, ".") && p != root)) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(name, ".go") {
			rel, _ := filepath.Rel(root, filepath.Dir(p))
			out[filepath.ToSlash(rel)] = append(out[filepath.ToSlash(rel)], p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func lines(t *testing.T, path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

func TestFileAndPackageSizes(t *testing.T) {
	root := 0
	for dir, files := range goFiles(t) {
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			n := lines(t, f)
			if n > maxFileLines {
				t.Errorf("%s has %d lines (at most %d): split it along what it does", f, n, maxFileLines)
			}
			if dir == "labeldistill" {
				root += n
			}
		}
	}
	if root > maxRootLines {
		t.Errorf("the labeldistill package holds %d non-test lines (at most %d): a new concern belongs in a package of its own", root, maxRootLines)
	}
	t.Logf("labeldistill's own package: %d non-test lines", root)
}

func TestImportsPointDown(t *testing.T) {
	layer := map[string]int{}
	for i, l := range layers {
		for _, p := range l {
			layer[p] = i
		}
	}
	fset := token.NewFileSet()
	for dir, files := range goFiles(t) {
		from, ok := layer[dir]
		if !ok {
			t.Errorf("package %s is in no layer: place it in houserules' layers", dir)
			continue
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range af.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				dep, ours := strings.CutPrefix(path, module)
				if !ours {
					continue
				}
				to, ok := layer[dep]
				if ok && to <= from {
					t.Errorf("%s imports %s, a package of its own layer or above", f, dep)
				}
			}
		}
	}
}

// environmentReaders are the only functions of labeldistill that read the environment,
// when called (never at import): the data folder's documented default.
var environmentReaders = []string{"labeldistill/data.DataDir"}

func TestLibraryReadsNoEnvironmentAtImport(t *testing.T) {
	fset := token.NewFileSet()
	for dir, files := range goFiles(t) {
		if !strings.HasPrefix(dir, "labeldistill") {
			continue
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(fset, f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range af.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if d.Name.Name == "init" && d.Recv == nil {
						t.Errorf("%s: an init function (importing a package must change nothing)", f)
					}
					if readsEnvironment(d) && !slices.Contains(environmentReaders, dir+"."+d.Name.Name) {
						t.Errorf("%s: %s reads the environment (the program passes settings in)", f, d.Name.Name)
					}
				case *ast.GenDecl:
					if readsEnvironment(d) {
						t.Errorf("%s: a package-level declaration reads the environment at import", fset.Position(d.Pos()))
					}
				}
			}
		}
	}
}

// readsEnvironment reports whether n calls os.Getenv, os.LookupEnv or os.Environ.
func readsEnvironment(n ast.Node) bool {
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "os" && (sel.Sel.Name == "Getenv" || sel.Sel.Name == "LookupEnv" || sel.Sel.Name == "Environ") {
				found = true
			}
		}
		return !found
	})
	return found
}
