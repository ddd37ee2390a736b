package torch

// noenv_test.go: the library reads no environment and importing it changes nothing. Settings
// come from the program through setters (SetCUDAGraphs, SetMkldnnSetting, SetPanicStacks,
// SetDirectConv, SetCPPBacktraces); the ldtorch command reads its variables once at start
// (cmd/ldtorch/environment.go).

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// envAllowed are the functions of non-test files under torch/ and nets/ that may read the
// environment, by file (relative to torch/) and function: torch/dist's explicit
// from-environment calls (torchrun's variables, read when the program asks) and its launcher
// (whose ranks inherit this process's environment unless it is given one), and the test
// helper torch/devicetest (LDTORCH_TEST_DEVICE, and LDTORCH_MKLDNN for the test binaries'
// check of oneDNN, as the command reads it), which no program imports
// (TestNoEnvironmentReads checks that too).
var envAllowed = map[string][]string{
	"dist/dist.go":             {"FromEnv", "TimeoutFromEnv", "CheckEnv"},
	"dist/launch.go":           {"Launch"},
	"devicetest/devicetest.go": {"Device", "GuardConvolutions"},
}

// envFuncs are the calls that read the environment, by package.
var envFuncs = map[string][]string{
	"os":      {"Getenv", "LookupEnv", "Environ", "ExpandEnv"},
	"syscall": {"Getenv", "Environ"},
}

// envReads returns, for one Go source file, "function: pkg.Name" for every reference to a
// call that reads the environment ("" as the function for package-level declarations),
// and the names of its init functions.
func envReads(fset *token.FileSet, name string, src any) (reads, inits []string, err error) {
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, nil, err
	}
	local := map[string]string{} // local import name → import path, for os and syscall
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if _, ok := envFuncs[path]; !ok {
			continue
		}
		n := path
		if imp.Name != nil {
			n = imp.Name.Name
		}
		local[n] = path
	}
	scan := func(fn string, node ast.Node) {
		ast.Inspect(node, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			id, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			if path, ok := local[id.Name]; ok && slices.Contains(envFuncs[path], sel.Sel.Name) {
				reads = append(reads, fn+": "+path+"."+sel.Sel.Name)
			}
			return true
		})
	}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok {
			if fd.Recv == nil && fd.Name.Name == "init" {
				inits = append(inits, fset.Position(fd.Pos()).String())
			}
			scan(fd.Name.Name, fd)
			continue
		}
		scan("", d)
	}
	return reads, inits, nil
}

// TestNoEnvironmentReads: no non-test Go file under torch/ or nets/ reads the environment
// outside envAllowed, none has an init function, no non-test file of the repository imports
// torch/devicetest, and no C++ file of the shim calls getenv.
func TestNoEnvironmentReads(t *testing.T) {
	fset := token.NewFileSet()
	checked := 0
	for _, root := range []string{".", filepath.Join("..", "nets")} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" || d.Name() == "csrc" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			reads, inits, err := envReads(fset, path, nil)
			if err != nil {
				return err
			}
			checked++
			for _, in := range inits {
				t.Errorf("%s: an init function (importing a package must change nothing)", in)
			}
			rel := filepath.ToSlash(path)
			for _, r := range reads {
				fn, _, _ := strings.Cut(r, ":")
				if fn == "" || !slices.Contains(envAllowed[rel], fn) {
					where := "function " + fn
					if fn == "" {
						where = "a package-level declaration (read at import)"
					}
					t.Errorf("%s: %s reads the environment (%s): take the value from the program through a setter",
						rel, where, strings.TrimSpace(r[len(fn)+1:]))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked < 40 {
		t.Fatalf("only %d Go files checked: the walk went wrong", checked)
	}

	// The test helper that may read LDTORCH_TEST_DEVICE is imported by tests only.
	const helper = "github.com/ldtorch/ldtorch/torch/devicetest"
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == ".git" || n == "build" || n == "testdata" || n == "node_modules" || (strings.HasPrefix(n, ".") && n != "..") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return nil // not ours to judge (a file of another build); go vet sees it
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == helper && !strings.HasPrefix(filepath.ToSlash(path), "../torch/devicetest/") {
				t.Errorf("%s imports %s, a test helper that reads the environment", path, helper)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// The shim reads no environment either (libtorch's own reads, e.g. TORCH_CPP_LOG_LEVEL
	// when SetLogLevelFromEnv asks, are libtorch's).
	getenv := regexp.MustCompile(`\b(secure_getenv|getenv|environ)\b`)
	cfiles := 0
	err = filepath.WalkDir("csrc", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(path, ".cc") || strings.HasSuffix(path, ".h")) {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		cfiles++
		if m := getenv.FindString(stripComments(string(b))); m != "" {
			t.Errorf("%s calls %s: the shim takes settings from the program through its API", path, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfiles < 20 {
		t.Fatalf("only %d C++ files checked under csrc/", cfiles)
	}
}

// The scanner sees reads in functions, at package level (import time), under another
// import name and through syscall, and init functions.
func TestEnvScannerDetectsReads(t *testing.T) {
	src := `package p
import (
	"os"
	sc "syscall"
)
var atImport = os.Getenv("A")
func init() {}
func a() { _, _ = os.LookupEnv("B") }
func b() { f := os.Environ; _ = f }
func c() { _, _ = sc.Getenv("C") }
func d() { _ = "os.Getenv" }
type T struct{}
func (T) init() {}
`
	reads, inits, err := envReads(token.NewFileSet(), "p.go", src)
	ok(t, err)
	want := []string{": os.Getenv", "a: os.LookupEnv", "b: os.Environ", "c: syscall.Getenv"}
	if !slices.Equal(reads, want) || len(inits) != 1 {
		t.Errorf("reads %q (want %q), inits %q (want one)", reads, want, inits)
	}
	if m := regexp.MustCompile(`\b(secure_getenv|getenv|environ)\b`).FindString(stripComments("// getenv in a comment\nconst char *e = std::getenv(\"X\");")); m != "getenv" {
		t.Errorf("C++ scan: %q", m)
	}
	if m := regexp.MustCompile(`\b(secure_getenv|getenv|environ)\b`).FindString(stripComments("// getenv in a comment\nint x = 1; /* environ */")); m != "" {
		t.Errorf("C++ scan of comments only: %q", m)
	}
}

// SetPanicStacks: Guard's error carries the goroutine's stack only when asked to.
func TestSetPanicStacks(t *testing.T) {
	defer SetPanicStacks(false)
	boom := func() (int, error) { panic("boom") }
	for _, on := range []bool{false, true, false} {
		SetPanicStacks(on)
		_, err := Guard("guard_test", boom)
		if err == nil || !strings.HasPrefix(err.Error(), "guard_test: internal error: boom") {
			t.Fatalf("stacks %v: %v", on, err)
		}
		if has := strings.Contains(err.Error(), "goroutine "); has != on {
			t.Errorf("stacks %v: stack in the error %v: %q", on, has, err)
		}
	}
}

// SetCPPBacktraces: off from the start, on and off again on request; errors stay one
// line either way (the shim drops libtorch's backtraces).
func TestSetCPPBacktraces(t *testing.T) {
	scoped(t)
	defer func() { ok(t, SetCPPBacktraces(false)) }()
	if CPPBacktraces() {
		t.Fatal("libtorch's backtraces are on before any call asked for them")
	}
	a := tensors(t)(Zeros([]int64{2, 3}))
	for _, on := range []bool{true, false} {
		ok(t, SetCPPBacktraces(on))
		if CPPBacktraces() != on {
			t.Fatalf("SetCPPBacktraces(%v): reported %v", on, CPPBacktraces())
		}
		_, err := a.Mm(a)
		if err == nil || strings.Contains(err.Error(), "frame #") {
			t.Errorf("backtraces %v: error %v", on, err)
		}
	}
}
