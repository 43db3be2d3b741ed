package readme

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The shape the module keeps (issue 24): files small enough to hold in
// one's head, and branchy functions only where a comment says why.
const (
	// maxFileLines is the most lines of a non-test Go file.
	maxFileLines = 400
	// maxComplexity is the most cyclomatic complexity of a function whose
	// doc comment does not say why it needs more (it must mention its
	// "complexity").
	maxComplexity = 15
)

// TestShape: no non-test Go file of the module is over maxFileLines, and
// no function is over maxComplexity unless its doc comment says why.
func TestShape(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range shapeProblems(t, root) {
		t.Error(p)
	}
}

// TestShapeProblemsFound: the check finds the long file and the branchy
// function of its fixture, and lets the explained one and the short ones
// be.
func TestShapeProblemsFound(t *testing.T) {
	got := shapeProblems(t, "testdata/shape")
	want := []string{
		"long.go: 401 lines, over 400: split it by concept",
		"long.go:3: unexplained has complexity 16, over 15, and its doc comment does not say why",
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("shape problems of testdata/shape:\n got %q\nwant %q", got, want)
	}
}

// shapeProblems walks the non-test Go files under root (not testdata, not
// hidden folders) and returns what breaks the module's shape.
func shapeProblems(t *testing.T, root string) []string {
	t.Helper()
	var problems []string
	fset := token.NewFileSet()
	err := walkGoFiles(root, func(path string) error {
		if strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if n := strings.Count(string(src), "\n"); n > maxFileLines {
			problems = append(problems, fmt.Sprintf("%s: %d lines, over %d: split it by concept", rel, n, maxFileLines))
		}
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			c := complexity(fn)
			if c <= maxComplexity || strings.Contains(strings.ToLower(fn.Doc.Text()), "complexity") {
				continue
			}
			problems = append(problems, fmt.Sprintf("%s:%d: %s has complexity %d, over %d, and its doc comment does not say why",
				rel, fset.Position(fn.Pos()).Line, fn.Name.Name, c, maxComplexity))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return problems
}

// complexity is fn's cyclomatic complexity as gocyclo counts it: one, plus
// one for each if, for, range, non-default case or select clause, and each
// && and ||. Function literals inside count toward fn.
func complexity(fn *ast.FuncDecl) int {
	c := 1
	ast.Inspect(fn, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			c++
		case *ast.CaseClause:
			if n.List != nil {
				c++
			}
		case *ast.CommClause:
			if n.Comm != nil {
				c++
			}
		case *ast.BinaryExpr:
			if n.Op == token.LAND || n.Op == token.LOR {
				c++
			}
		}
		return true
	})
	return c
}
