package main

import (
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/sqllock/sqllock/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// TestQuickstart runs the program on every database, with the DSN its
// driver takes (go-sql-driver's user@tcp(host:port)/dbname on MySQL).
func TestQuickstart(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			if got := driverFor(tg.DSN); got != tg.DriverName {
				t.Fatalf("driverFor(%q) = %q, want %q", tg.DSN, got, tg.DriverName)
			}
			if err := run(t.Context(), tg.DSN); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCopyable: a user can copy the program, so it imports nothing of
// sqllock's internal packages, and the README's Quick start is this
// program, word for word (so that it compiles).
func TestCopyable(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if strings.Contains(path, "/internal/") || strings.HasSuffix(path, "/internal") {
			t.Errorf("the quickstart imports %s, which a program outside sqllock cannot", path)
		}
	}

	program, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Quick start\n")
	if !ok {
		t.Fatal("README.md has no Quick start section")
	}
	_, block, ok := strings.Cut(section, "```go\n")
	if ok {
		block, _, ok = strings.Cut(block, "```\n")
	}
	if !ok || block != string(program) {
		t.Errorf("the first Go block of README.md's Quick start is not examples/quickstart/main.go:\n%s", block)
	}
}
