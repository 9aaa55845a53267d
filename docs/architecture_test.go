package docs

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/schedulerd/schedulerd"

// TestArchitectureIsCurrent keeps architecture.md the map of the tree:
// every package has its paragraph, no package imports what its paragraph
// forbids, and every file the page names exists.
func TestArchitectureIsCurrent(t *testing.T) {
	page, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	paragraphs := map[string]string{}
	for _, part := range strings.Split(string(page), "\n### `")[1:] {
		name, body, _ := strings.Cut(part, "`")
		body, _, _ = strings.Cut(body, "\n## ")
		paragraphs[name] = body
	}
	root := ".."
	pkgs := packages(t, root)
	for _, pkg := range pkgs {
		body, ok := paragraphs[pkg]
		if !ok {
			t.Errorf("package %s has no paragraph in architecture.md (a heading ### `%s`)", pkg, pkg)
			continue
		}
		forbidden := mustNotImport(body)
		if forbidden == nil {
			t.Errorf("architecture.md: the paragraph of %s says nothing of what it must not import", pkg)
		}
		for _, imp := range imports(t, filepath.Join(root, pkg)) {
			rel, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue
			}
			for _, f := range forbidden {
				if rel == f || strings.HasPrefix(rel, f+"/") && !strings.HasPrefix(pkg, f+"/") && pkg != f {
					t.Errorf("package %s imports %s, which architecture.md forbids it", pkg, rel)
				}
			}
		}
	}
	for name := range paragraphs {
		if !slices.Contains(pkgs, name) {
			t.Errorf("architecture.md has a paragraph of %s, which is no package", name)
		}
	}
	files := regexp.MustCompile("`([a-z0-9_./-]+\\.go)`").FindAllStringSubmatch(string(page), -1)
	if len(files) < 20 {
		t.Fatalf("architecture.md names %d files; the map should name the files of each step", len(files))
	}
	for _, m := range files {
		if strings.Contains(m[1], "/") {
			if _, err := os.Stat(filepath.Join(root, m[1])); err != nil {
				t.Errorf("architecture.md names %s, which does not exist", m[1])
			}
		}
	}
}

// mustNotImport reads the packages of a paragraph's "Must not import:"
// sentence; nil when it has none.
func mustNotImport(body string) []string {
	_, rest, ok := strings.Cut(strings.ReplaceAll(body, "\n", " "), "Must not import:")
	if !ok {
		return nil
	}
	sentence, _, _ := strings.Cut(rest, ".")
	var out []string
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(sentence, -1) {
		out = append(out, m[1])
	}
	return out
}

// packages lists the directories of the module that hold Go code (not
// test files alone), relative to root, leaving out other modules.
func packages(t *testing.T, root string) []string {
	var out []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "node_modules") {
				return filepath.SkipDir
			}
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module (tools/dist, bench/river)
				}
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			if rel != "." && !slices.Contains(out, filepath.ToSlash(rel)) {
				out = append(out, filepath.ToSlash(rel))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// imports returns the imports of the non-test files of the package in dir.
func imports(t *testing.T, dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, e.Name()), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			out = append(out, p)
		}
	}
	return out
}
