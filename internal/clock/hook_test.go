package clock

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// notLibrary are the folders (from the module root) whose code is not the
// library's, with the reason; their clock reads are not checked. Every
// other folder with Go code is found by libraryPackages and checked, so a
// new package cannot go unchecked by being left off a list.
var notLibrary = map[string]string{
	"bench":                        "a measuring command: it times operations on its own clock",
	"dblocktest":                   "the in-memory Locker for users' unit tests: no database clock exists there, its leases are the process clock by design",
	"internal/clock":               "the hook itself: Now reads time.Now",
	"internal/failover":            "a test harness (failover tests)",
	"internal/hostile":             "a test harness (hostile driver errors)",
	"internal/metrics/metricstest": "a test harness (metrics readers)",
	"internal/testdb":              "the test harness: its deadlines bound test set-up",
	"internal/torture":             "the torture suite: it sets the offset, and its ledger reads the database clock",
}

// libraryPackages lists every folder under root, from the module root,
// that holds Go code other than tests and is not in notLibrary.
func libraryPackages(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if name := d.Name(); rel != "." && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(rel))
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		seen[dir] = true
		if _, skip := notLibrary[dir]; !skip && !slices.Contains(out, dir) {
			out = append(out, dir)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir := range notLibrary {
		if !seen[dir] {
			t.Errorf("notLibrary[%q] names no folder with Go code any more: remove it", dir)
		}
	}
	return out
}

// clockReads are the functions of package time that read the clock:
// time.Since(t) and time.Until(t) are time.Now().Sub(t) and t.Sub(time.Now()).
var clockReads = []string{"Now", "Since", "Until"}

// allowedClockReads are the direct reads the hook does not need, as
// "file function time.X", each with the reason. Every other one fails the
// test, and so does an entry nothing matches any more (remove it).
var allowedClockReads = map[string]string{
	"cronguard/cronguard.go guardedJob.Run time.Now": "attributes an activation to the tick robfig/cron scheduled it for; " +
		"cron computes its schedule from its own time.Now, which the hook cannot reach, so the tick must come from the same clock",
	"gocronlock/locker.go (*Locker).Lock time.Now": "learns a job's period from the gaps between the runs gocron fires, " +
		"and attributes a run to its activation; gocron schedules by its own time.Now, which the hook cannot reach",
	"reaper/reaper.go (*Reaper).sweep time.Now":   "measures a sweep's duration for the log: only the monotonic reading is used",
	"reaper/reaper.go (*Reaper).sweep time.Since": "the sweep's duration for the log, from the time.Now above: monotonic readings only",
	"rowlock/renew.go (*Lock).renewLoop time.Until": "arms a timer for a deadline built from clock.Now, which keeps the monotonic reading: " +
		"Go subtracts the monotonic readings, so the wait is what it would be on a skewed host",
	"forupdate/hold.go (*hold).ping time.Since": "time since lastAlive, which comes from clock.Now with its monotonic reading: " +
		"Go subtracts the monotonic readings, so the result is what it would be on a skewed host",
}

func TestLibraryReadsWallClockThroughHook(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	used := map[string]bool{}
	files := 0
	packages := libraryPackages(t, root)
	for _, must := range []string{"dblock", "rowlock", "forupdate", "reaper", "queue", "internal/queue", "internal/wake"} {
		if !slices.Contains(packages, must) {
			t.Errorf("package discovery missed %s (found %v)", must, packages)
		}
	}
	for _, pkg := range packages {
		paths, err := filepath.Glob(filepath.Join(root, pkg, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range paths {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files++
			rel := pkg + "/" + filepath.Base(path)
			for _, read := range directClockReads(t, fset, f, rel) {
				key := rel + " " + read.fn + " time." + read.name
				if _, ok := allowedClockReads[key]; ok {
					used[key] = true
					continue
				}
				t.Errorf("%s: %s calls time.%s: read the wall clock with clock.Now (github.com/sqllock/sqllock/internal/clock), "+
					"so that tests can skew it, or add %q to allowedClockReads with the reason", read.pos, read.fn, read.name, key)
			}
		}
	}
	if files < 20 {
		t.Fatalf("scanned only %d files under %v: run from internal/clock", files, packages)
	}
	for key := range allowedClockReads {
		if !used[key] {
			t.Errorf("allowedClockReads[%q] matches no code any more: remove it", key)
		}
	}
}

type clockRead struct {
	pos  token.Position
	fn   string // enclosing top-level function, "(*T).Method" for methods
	name string // Now, Since or Until
}

// directClockReads finds every use (call or function value) of
// time.Now/Since/Until in f.
func directClockReads(t *testing.T, fset *token.FileSet, f *ast.File, rel string) []clockRead {
	var timeName string
	for _, imp := range f.Imports {
		if path, _ := strconv.Unquote(imp.Path.Value); path == "time" {
			timeName = "time"
			if imp.Name != nil {
				timeName = imp.Name.Name
			}
		}
	}
	switch timeName {
	case "":
		return nil
	case ".", "_":
		t.Errorf("%s imports time as %q: the check cannot see its clock reads", rel, timeName)
		return nil
	}
	var out []clockRead
	for _, decl := range f.Decls {
		fn := "(package level)"
		if fd, ok := decl.(*ast.FuncDecl); ok {
			fn = funcName(fd)
		}
		ast.Inspect(decl, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == timeName && slices.Contains(clockReads, sel.Sel.Name) {
				out = append(out, clockRead{pos: fset.Position(sel.Pos()), fn: fn, name: sel.Sel.Name})
			}
			return true
		})
	}
	return out
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	recv := fd.Recv.List[0].Type
	star := ""
	if s, ok := recv.(*ast.StarExpr); ok {
		star, recv = "*", s.X
	}
	if idx, ok := recv.(*ast.IndexExpr); ok { // generic receiver T[P]
		recv = idx.X
	}
	if idx, ok := recv.(*ast.IndexListExpr); ok {
		recv = idx.X
	}
	name := "?"
	if id, ok := recv.(*ast.Ident); ok {
		name = id.Name
	}
	if star != "" {
		return "(" + star + name + ")." + fd.Name.Name
	}
	return name + "." + fd.Name.Name
}
