package houserules_test

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/toolwire/toolwire"

// Limits of the small-functions rule.
const (
	maxFuncLines  = 100
	maxFuncParams = 4
)

// smallFuncPackages are the packages the small-functions rule covers: where
// a call's life is written (the worker's delivery, admission) and the
// capability runtimes that left the core.
var smallFuncPackages = []string{
	"internal/worker",
	"internal/dispatch",
	"internal/approvalflow",
	"internal/hooks",
	"internal/limitgate",
	"internal/maintenance",
	"internal/poolview",
	"internal/api",
}

// forbiddenInDispatch are the packages (and their subpackages) the
// dispatcher core must not depend on.
var forbiddenInDispatch = []string{
	module + "/internal/worker",
	module + "/internal/workerconfig",
	module + "/internal/executors",
	module + "/pkg/toolworker",
}

func TestDispatchDependsOnNoWorker(t *testing.T) {
	t.Parallel()
	if err := checkDispatchDeps(repoRoot(t)); err != nil {
		t.Fatal(err)
	}
}

func TestSmallFunctions(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	var found []string
	for _, dir := range smallFuncPackages {
		if _, err := os.Stat(filepath.Join(root, dir)); os.IsNotExist(err) {
			continue // a package of the list that this tree does not have yet
		}
		found = append(found, bigFunctions(t, root, dir)...)
	}
	if len(found) > 0 {
		t.Fatalf("functions over %d lines or with more than %d parameters (pass a per-call value):\n%s",
			maxFuncLines, maxFuncParams, strings.Join(found, "\n"))
	}
}

func TestNothingImportsExamples(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	var found []string
	for _, p := range packages(t, root) {
		if strings.HasPrefix(p.dir, "examples/") {
			continue
		}
		for _, f := range p.all() {
			for _, imp := range f.file.Imports {
				if ip, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(ip, module+"/examples/") {
					found = append(found, fmt.Sprintf("%s imports %s", f.name, ip))
				}
			}
		}
	}
	if len(found) > 0 {
		t.Fatalf("examples/ are not libraries:\n%s", strings.Join(found, "\n"))
	}
}

func TestGoroutinesAreLeakChecked(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	var found []string
	for _, p := range packages(t, root) {
		starter := startsGoroutine(p.code)
		if starter == "" || p.testSupport() {
			continue
		}
		if !slices.ContainsFunc(p.tests, checksLeaks) {
			found = append(found, fmt.Sprintf("%s starts goroutines (%s) and no test of it uses goleak", p.dir, starter))
		}
	}
	if len(found) > 0 {
		t.Fatalf("every package that starts goroutines checks for leaks (goleak.VerifyTestMain in TestMain):\n%s",
			strings.Join(found, "\n"))
	}
}

func TestEveryPackageIsInTheArchitectureTable(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	listed := architectureTable(t, root)
	var found []string
	for _, p := range packages(t, root) {
		if !strings.HasPrefix(p.dir, "internal/") && !strings.HasPrefix(p.dir, "pkg/") {
			continue
		}
		if p.generated() || listed[p.dir] {
			continue
		}
		found = append(found, p.dir)
	}
	if len(found) > 0 {
		t.Fatalf("packages without a row in docs/architecture.md's package table:\n%s", strings.Join(found, "\n"))
	}
}

func TestPkgNamesNoInternalType(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	var found []string
	for _, p := range packages(t, root) {
		if !strings.HasPrefix(p.dir, "pkg/") || p.generated() {
			continue
		}
		for _, f := range p.code {
			found = append(found, internalTypesInAPI(f)...)
		}
	}
	if len(found) > 0 {
		t.Fatalf("pkg/ declarations that name internal types (give the SDK a type of its own):\n%s", strings.Join(found, "\n"))
	}
}

func TestLongLivedPartsAreServices(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	var found []string
	for _, p := range packages(t, root) {
		found = append(found, nonServices(p)...)
	}
	if len(found) > 0 {
		t.Fatalf("types with Start and Stop have one shape, startstop.Service (Start(ctx) error, Stop(ctx) error):\n%s",
			strings.Join(found, "\n"))
	}
}

// nonServices returns the types of p (non-test code) that have both a
// Start and a Stop method, one of which is not shaped as
// startstop.Service's.
func nonServices(p *goPackage) []string {
	type pair struct{ start, stop *ast.FuncDecl }
	byType := map[string]*pair{}
	var where = map[string]string{}
	for _, f := range p.code {
		for _, d := range f.file.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || (fd.Name.Name != "Start" && fd.Name.Name != "Stop") {
				continue
			}
			typ, _, _ := strings.Cut(funcName(fd), ".")
			pr := byType[typ]
			if pr == nil {
				pr = &pair{}
				byType[typ] = pr
				where[typ] = fmt.Sprintf("%s:%d", f.name, f.fset.Position(fd.Pos()).Line)
			}
			if fd.Name.Name == "Start" {
				pr.start = fd
			} else {
				pr.stop = fd
			}
		}
	}
	var found []string
	for typ, pr := range byType {
		if pr.start == nil || pr.stop == nil {
			continue
		}
		if !serviceShaped(pr.start.Type) || !serviceShaped(pr.stop.Type) {
			found = append(found, fmt.Sprintf("%s: %s", where[typ], typ))
		}
	}
	slices.Sort(found)
	return found
}

// serviceShaped reports whether ft is func(context.Context) error.
func serviceShaped(ft *ast.FuncType) bool {
	if paramCount(ft) != 1 || ft.Results == nil || len(ft.Results.List) != 1 {
		return false
	}
	sel, ok := ft.Params.List[0].Type.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Context" {
		return false
	}
	res, ok := ft.Results.List[0].Type.(*ast.Ident)
	return ok && res.Name == "error"
}

// checkDispatchDeps lists internal/dispatch's dependencies with the go
// command and returns an error naming any forbidden one.
func checkDispatchDeps(root string) error {
	cmd := exec.Command("go", "list", "-deps", "./internal/dispatch")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go list -deps ./internal/dispatch: %w: %s", err, stderr.String())
	}
	var bad []string
	for dep := range strings.FieldsSeq(string(out)) {
		for _, f := range forbiddenInDispatch {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				bad = append(bad, dep)
			}
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("internal/dispatch depends on worker-side packages (move the shared part to a package of its own):\n%s",
			strings.Join(bad, "\n"))
	}
	return nil
}

// bigFunctions returns the functions of the package in dir (non-test,
// non-generated files) that break the small-functions rule.
func bigFunctions(t *testing.T, root, dir string) []string {
	t.Helper()
	p := loadPackage(t, root, dir)
	var found []string
	for _, f := range p.code {
		if f.generated {
			continue
		}
		for _, d := range f.file.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			name := funcName(fd)
			start, end := f.fset.Position(fd.Pos()), f.fset.Position(fd.End())
			if lines := end.Line - start.Line + 1; lines > maxFuncLines {
				found = append(found, fmt.Sprintf("%s:%d: %s is %d lines", f.name, start.Line, name, lines))
			}
			if n := paramCount(fd.Type); n > maxFuncParams {
				found = append(found, fmt.Sprintf("%s:%d: %s takes %d parameters", f.name, start.Line, name, n))
			}
		}
	}
	return found
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// paramCount counts a function's parameters; a variadic one counts once.
func paramCount(ft *ast.FuncType) int {
	n := 0
	for _, f := range ft.Params.List {
		n += max(len(f.Names), 1)
	}
	return n
}

// startsGoroutine returns where the first go statement of the files is,
// or "".
func startsGoroutine(files []*goFile) string {
	for _, f := range files {
		var at string
		ast.Inspect(f.file, func(n ast.Node) bool {
			if g, ok := n.(*ast.GoStmt); ok && at == "" {
				at = fmt.Sprintf("%s:%d", f.name, f.fset.Position(g.Pos()).Line)
			}
			return at == ""
		})
		if at != "" {
			return at
		}
	}
	return ""
}

// checksLeaks reports whether a test file verifies that no goroutine leaks.
func checksLeaks(f *goFile) bool {
	found := false
	ast.Inspect(f.file, func(n ast.Node) bool {
		if s, ok := n.(*ast.SelectorExpr); ok {
			if x, ok := s.X.(*ast.Ident); ok && x.Name == "goleak" && (strings.HasPrefix(s.Sel.Name, "Verify") || s.Sel.Name == "Find") {
				found = true
			}
		}
		return !found
	})
	return found
}

// architectureTable returns the package paths named in the first column of
// docs/architecture.md's package table. A bare name after a path in the
// same cell is a sibling of that path: "`internal/executors/native`,
// `mcp`" names internal/executors/mcp too.
func architectureTable(t *testing.T, root string) map[string]bool {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	listed := map[string]bool{}
	inTable := false
	tick := regexp.MustCompile("`([^`]+)`")
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "| package |"):
			inTable = true
			continue
		case inTable && !strings.HasPrefix(line, "|"):
			inTable = false
		}
		if !inTable {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 3 {
			continue
		}
		parent := ""
		for _, m := range tick.FindAllStringSubmatch(cells[1], -1) {
			name := strings.TrimSuffix(m[1], "/")
			if strings.Contains(name, "/") {
				listed[name] = true
				parent = path.Dir(name)
			} else if parent != "" {
				listed[parent+"/"+name] = true
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(listed) == 0 {
		t.Fatal(`docs/architecture.md has no package table (a "| package |" header)`)
	}
	return listed
}

// internalTypesInAPI returns the exported declarations of f that mention a
// type of an internal package.
func internalTypesInAPI(f *goFile) []string {
	internal := map[string]string{} // local name -> import path
	for _, imp := range f.file.Imports {
		ip, _ := strconv.Unquote(imp.Path.Value)
		if !strings.Contains(ip, "/internal/") && !strings.HasSuffix(ip, "/internal") {
			continue
		}
		name := path.Base(ip)
		if imp.Name != nil {
			name = imp.Name.Name
		}
		internal[name] = ip
	}
	if len(internal) == 0 {
		return nil
	}
	var found []string
	report := func(what string, n ast.Node) {
		ast.Inspect(n, func(n ast.Node) bool {
			if s, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := s.X.(*ast.Ident); ok && internal[x.Name] != "" {
					found = append(found, fmt.Sprintf("%s:%d: %s names %s.%s (%s)",
						f.name, f.fset.Position(s.Pos()).Line, what, x.Name, s.Sel.Name, internal[x.Name]))
				}
			}
			return true
		})
	}
	for _, d := range f.file.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Name.IsExported() && (d.Recv == nil || exportedRecv(d.Recv)) {
				report("func "+funcName(d), d.Type)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						report("type "+s.Name.Name, exportedParts(s.Type))
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() && s.Type != nil {
							report("var "+n.Name, s.Type)
						}
					}
				}
			}
		}
	}
	return found
}

func exportedRecv(r *ast.FieldList) bool {
	t := r.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	id, ok := t.(*ast.Ident)
	return ok && id.IsExported()
}

// exportedParts is a type expression with the unexported fields of a
// struct left out (they are not the package's API).
func exportedParts(e ast.Expr) ast.Node {
	st, ok := e.(*ast.StructType)
	if !ok {
		return e
	}
	var kept []*ast.Field
	for _, f := range st.Fields.List {
		if len(f.Names) == 0 || slices.ContainsFunc(f.Names, func(n *ast.Ident) bool { return n.IsExported() }) {
			kept = append(kept, f)
		}
	}
	return &ast.StructType{Fields: &ast.FieldList{List: kept}}
}

// goFile is one parsed Go file.
type goFile struct {
	name      string // relative to the repository root
	fset      *token.FileSet
	file      *ast.File
	generated bool
}

// goPackage is the Go files of one directory.
type goPackage struct {
	dir         string // relative to the repository root, slash-separated
	code, tests []*goFile
}

// testSupport reports whether the package is a library for tests (its
// name ends in "test" and it has no tests of its own): its goroutines run
// in the tests of the packages that use it, whose leak checks cover them.
func (p *goPackage) testSupport() bool {
	return strings.HasSuffix(path.Base(p.dir), "test") && len(p.tests) == 0
}

func (p *goPackage) all() []*goFile { return slices.Concat(p.code, p.tests) }

// generated reports whether all of the package's code is generated.
func (p *goPackage) generated() bool {
	return len(p.code) > 0 && !slices.ContainsFunc(p.code, func(f *goFile) bool { return !f.generated })
}

// packages returns every Go package of the module (testdata and
// node_modules left out).
func packages(t *testing.T, root string) []*goPackage {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		switch d.Name() {
		case "testdata", "node_modules", ".git", "bin", "data":
			return filepath.SkipDir
		}
		if p != root {
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir // another module (tools/)
			}
		}
		if m, _ := filepath.Glob(filepath.Join(p, "*.go")); len(m) > 0 {
			rel, _ := filepath.Rel(root, p)
			dirs = append(dirs, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	pkgs := make([]*goPackage, 0, len(dirs))
	for _, d := range dirs {
		pkgs = append(pkgs, loadPackage(t, root, d))
	}
	return pkgs
}

var generatedRe = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

func loadPackage(t *testing.T, root, dir string) *goPackage {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	p := &goPackage{dir: dir}
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, name, src, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, name)
		f := &goFile{name: filepath.ToSlash(rel), fset: fset, file: file, generated: generatedRe.Match(src)}
		if strings.HasSuffix(name, "_test.go") {
			p.tests = append(p.tests, f)
		} else {
			p.code = append(p.code, f)
		}
	}
	return p
}

// repoRoot is the module's root directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.Contains(b, []byte("module "+module+"\n")) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod of " + module + " above the test's directory")
		}
		dir = parent
	}
}
