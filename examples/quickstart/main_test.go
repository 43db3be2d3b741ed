package main

import (
	"database/sql"
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
// driver takes (go-sql-driver's user@tcp(host:port)/dbname on MySQL), and
// checks that each run's fenced write commits.
func TestQuickstart(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			if got := driverFor(tg.DSN); got != tg.DriverName {
				t.Fatalf("driverFor(%q) = %q, want %q", tg.DSN, got, tg.DriverName)
			}
			// The program's fenced write commits: one more row each run.
			count := func() int {
				db, err := sql.Open(tg.DriverName, tg.DSN)
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				var n int
				if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM quickstart_runs").Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			// The first run creates the table.
			if err := run(t.Context(), tg.DSN); err != nil {
				t.Fatal(err)
			}
			before := count()
			if err := run(t.Context(), tg.DSN); err != nil {
				t.Fatal(err)
			}
			if after := count(); after != before+1 {
				t.Errorf("quickstart_runs has %d rows after a run, had %d: the fenced write did not commit", after, before)
			}
		})
	}
}

// TestCopyable: a user can copy the program, so it imports nothing of
// sqllock's internal packages, and the README's Quick start is this
// program, word for word (so that it compiles and runs).
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
	_, block, ok := strings.Cut(string(readme), "```go\n// Command quickstart ")
	if !ok {
		t.Fatal("README.md has no Go block opening with // Command quickstart")
	}
	block, _, ok = strings.Cut("// Command quickstart "+block, "```\n")
	if !ok || block != string(program) {
		t.Errorf("README.md's quickstart block is not examples/quickstart/main.go:\n%s", block)
	}
}
