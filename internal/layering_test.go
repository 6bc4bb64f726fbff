// Package internal_test pins the rule of the module's bottom layer: the
// packages under internal/ are what the public packages build on, so none
// of them (their tests included) imports a package of the module outside
// internal/. The test and benchmark harness that drives the public
// packages lives in harness/, above them.
package internal_test

import (
	"bufio"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sessionlane/lanes/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// modulePath reads the module path from the go.mod above this directory.
func modulePath(t *testing.T) string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "go.mod"))
	if err != nil {
		t.Fatalf("go.mod: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	t.Fatalf("go.mod names no module (%v)", sc.Err())
	return ""
}

// TestInternalImportsNoPublicPackage parses the imports of every Go file
// under internal/ and fails naming each import of a package of the module
// that is not itself under internal/.
func TestInternalImportsNoPublicPackage(t *testing.T) {
	mod := modulePath(t)
	below := mod + "/internal"
	files := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != "." && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		files++
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			if (p == mod || strings.HasPrefix(p, mod+"/")) && p != below && !strings.HasPrefix(p, below+"/") {
				t.Errorf("internal/%s imports %s, a package above internal/ (the harness belongs in harness/)", filepath.ToSlash(path), p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatal("no Go file found under internal/: the walk looked in the wrong place")
	}
}
