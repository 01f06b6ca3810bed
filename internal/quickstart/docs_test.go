package quickstart_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// codeRef is a reference to Go code in the docs: `path/file.go:Func` or
// `path/file.go:Type.Method`, the path relative to the repository root.
var codeRef = regexp.MustCompile("`((?:[A-Za-z0-9_.-]+/)*[A-Za-z0-9_.-]+\\.go):((?:[A-Za-z_][A-Za-z0-9_]*\\.)?[A-Za-z_][A-Za-z0-9_]*)`")

// mdLink is a Markdown link: its target, up to an optional #anchor.
var mdLink = regexp.MustCompile(`\]\(([^)\s]*)\)`)

// minRefs is how many code references a document must hold at least: the
// life of a call in docs/architecture.md is told as hops through the
// code, and a pattern that stopped matching them must not pass quietly.
var minRefs = map[string]int{"docs/architecture.md": 30}

// TestDocsCodeReferences: every `path/file.go:Func` (or `:Type.Method`)
// that README.md or a page of docs/ names exists: the file, and in it a
// function of that name (a method for Type.Method).
func TestDocsCodeReferences(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	decls := map[string]map[string]bool{} // file → declared functions and methods
	for _, doc := range docPages(t, root) {
		text, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		refs := codeRef.FindAllStringSubmatch(string(text), -1)
		if len(refs) < minRefs[doc] {
			t.Errorf("%s: %d code references (`path.go:Func`), want at least %d", doc, len(refs), minRefs[doc])
		}
		for _, m := range refs {
			file, name := m[1], m[2]
			names, ok := decls[file]
			if !ok {
				names, err = declared(filepath.Join(root, filepath.FromSlash(file)))
				if err != nil {
					t.Errorf("%s names %s: %v", doc, m[0], err)
				}
				decls[file] = names
			}
			if names != nil && !names[name] {
				t.Errorf("%s names %s: %s declares no %s", doc, m[0], file, what(name))
			}
		}
	}
}

// TestDocsLinks: every relative link of README.md and the pages of docs/
// reaches a file or directory of the repository, and an #anchor into a
// Markdown page names one of its headings.
func TestDocsLinks(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	anchors := map[string]map[string]bool{}
	for _, doc := range docPages(t, root) {
		text, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(text), -1) {
			target := m[1]
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			file := doc
			if path != "" {
				file = filepath.ToSlash(filepath.Join(filepath.Dir(doc), path))
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(file))); err != nil {
					t.Errorf("%s links to %s: %v", doc, target, err)
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			if anchors[file] == nil {
				anchors[file] = headingAnchors(t, filepath.Join(root, filepath.FromSlash(file)))
			}
			if !anchors[file][anchor] {
				t.Errorf("%s links to %s: %s has no heading with the anchor #%s", doc, target, file, anchor)
			}
		}
	}
}

// repoRoot is the repository's root: this package is internal/quickstart.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// docPages lists README.md and docs/*.md, relative to root, with slashes.
func docPages(t *testing.T, root string) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, p := range pages {
		rel, err := filepath.Rel(root, p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, filepath.ToSlash(rel))
	}
	if len(out) < 3 {
		t.Fatalf("found only %v: the docs moved?", out)
	}
	return out
}

// declared returns the functions ("Name") and methods ("Type.Name") that
// the Go file at path declares.
func declared(path string) (map[string]bool, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, d := range f.Decls {
		fn, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		if fn.Recv == nil || len(fn.Recv.List) == 0 {
			names[fn.Name.Name] = true
			continue
		}
		if recv := receiverType(fn.Recv.List[0].Type); recv != "" {
			names[recv+"."+fn.Name.Name] = true
		}
	}
	return names, nil
}

// receiverType is the name of a method's receiver type: T of T, *T,
// T[P] and *T[P].
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

func what(name string) string {
	if strings.Contains(name, ".") {
		return "method " + name
	}
	return "function " + name
}

// headingAnchors returns the anchors GitHub gives the headings of the
// Markdown file at path: lower case, punctuation but - and _ dropped,
// spaces as hyphens, a repeated anchor numbered (-1, -2, ...).
func headingAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for line := range strings.SplitSeq(string(text), "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		heading := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(heading) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsNumber(r) || unicode.Is(unicode.Pc, r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			anchors[a+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}
