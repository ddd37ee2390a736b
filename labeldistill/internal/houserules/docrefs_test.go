package houserules

// docrefs_test.go: the docs name code that is there. A doc that cites `dir/file.go` (a path
// with a folder) names a file of the repository, and the identifiers it lists after it
// (`dir/file.go`: `Name`, `Type.Method`) are declared in that file, so that moving code
// cannot leave the docs pointing at files and functions that are gone.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// goRef is a cited Go file and what follows it up to the end of its clause: a list of
// identifiers in backquotes after ": ".
var goRef = regexp.MustCompile("`([A-Za-z0-9_./-]+/[A-Za-z0-9_]+\\.go)`(: ([^;|\\n]*))?")

var backquoted = regexp.MustCompile("`([^`]+)`")

// identifier is a Go name or a Type.Name pair as docs cite them.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$`)

// docFiles are the markdown pages of the repository that describe its code.
func docFiles(t *testing.T, root string) []string {
	var out []string
	for _, pattern := range []string{"README.md", "docs/*.md", "docs/*/*.md", "scripts/*/README.md", "scripts/*/*/README.md"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m...)
	}
	return out
}

// declared lists every name a Go file declares: functions, methods, types, variables,
// constants and struct fields.
func declared(t *testing.T, path string) map[string]bool {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	names := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		switch d := n.(type) {
		case *ast.FuncDecl:
			names[d.Name.Name] = true
		case *ast.TypeSpec:
			names[d.Name.Name] = true
		case *ast.ValueSpec:
			for _, id := range d.Names {
				names[id.Name] = true
			}
		case *ast.Field:
			for _, id := range d.Names {
				names[id.Name] = true
			}
		}
		return true
	})
	return names
}

func TestDocsNameCodeThatExists(t *testing.T) {
	root := repoRoot(t)
	cache := map[string]map[string]bool{}
	for _, doc := range docFiles(t, root) {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, doc)
		for _, m := range goRef.FindAllStringSubmatch(string(text), -1) {
			path := m[1]
			full := filepath.Join(root, filepath.FromSlash(path))
			if _, err := os.Stat(full); err != nil {
				t.Errorf("%s cites %s, which is not in the repository", rel, path)
				continue
			}
			if strings.HasSuffix(path, "_test.go") && m[3] == "" {
				continue
			}
			names, ok := cache[full]
			if !ok {
				names = declared(t, full)
				cache[full] = names
			}
			for _, q := range backquoted.FindAllStringSubmatch(m[3], -1) {
				id := q[1]
				if !identifier.MatchString(id) {
					continue
				}
				last := id[strings.LastIndex(id, ".")+1:]
				if !names[last] {
					t.Errorf("%s cites %s in %s, which declares no %s", rel, id, path, last)
				}
			}
		}
	}
}
