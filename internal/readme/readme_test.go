// Package readme checks the README: every Go code block in it compiles,
// and what it says of pgxpool holds against the real PostgreSQL.
package readme

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/scanner"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// snippetImports are the packages a README snippet may use without an
// import block of its own, by the name it uses them with.
var snippetImports = map[string]string{
	"context":    "context",
	"errors":     "errors",
	"fmt":        "fmt",
	"slog":       "log/slog",
	"sql":        "database/sql",
	"time":       "time",
	"cron":       "github.com/robfig/cron/v3",
	"pgxpool":    "github.com/jackc/pgx/v5/pgxpool",
	"stdlib":     "github.com/jackc/pgx/v5/stdlib",
	"cronguard":  "github.com/sqllock/sqllock/cronguard",
	"dblock":     "github.com/sqllock/sqllock/dblock",
	"dblocktest": "github.com/sqllock/sqllock/dblocktest",
	"forupdate":  "github.com/sqllock/sqllock/forupdate",
	"gocronlock": "github.com/sqllock/sqllock/gocronlock",
	"leader":     "github.com/sqllock/sqllock/leader",
	"migrations": "github.com/sqllock/sqllock/migrations",
	"reaper":     "github.com/sqllock/sqllock/reaper",
	"rowlock":    "github.com/sqllock/sqllock/rowlock",
}

// harness declares what the snippets take as given: the application's
// context, *sql.DB and Locker, and the jobs they run.
const harness = `package snippets

import (
	"context"
	"database/sql"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/rowlock"
)

var (
	ctx    = context.Background()
	db     *sql.DB
	locker *rowlock.Locker
)

func report(context.Context) error       { return nil }
func indexForever(context.Context) error { return nil }

// service is the application code a test of the README exercises.
type service struct{ locker dblock.Locker }

func NewService(l dblock.Locker) service        { return service{l} }
func (service) Run(ctx context.Context) error { return nil }
`

// TestSnippetsCompile compiles every ` + "```go" + ` block of README.md. A
// block that is a whole file (it starts with "package") is compiled as it
// is; any other is the body of a function returning error, after its own
// import block if it has one, with the imports of snippetImports it uses
// added. Compile errors name README.md and its line.
func TestSnippetsCompile(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlocks(string(readme))
	if len(blocks) < 5 {
		t.Fatalf("found %d Go blocks in README.md; the extraction is broken", len(blocks))
	}

	tmp := t.TempDir()
	pkgDir := filepath.Join(root, "internal", "readme", "snippets")
	overlay := map[string]string{}
	packages := []string{"./internal/readme/snippets"}
	write := func(path, src string) {
		file := filepath.Join(tmp, fmt.Sprintf("%d.go", len(overlay)))
		if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		overlay[path] = file
	}
	write(filepath.Join(pkgDir, "harness.go"), harness)
	for _, b := range blocks {
		if strings.HasPrefix(strings.TrimSpace(b.code), "package ") {
			sub := fmt.Sprintf("line%d", b.line)
			write(filepath.Join(pkgDir, sub, "snippet.go"), fmt.Sprintf("//line README.md:%d\n%s", b.line, b.code))
			packages = append(packages, "./internal/readme/snippets/"+sub)
			continue
		}
		src, err := wrap(b)
		if err != nil {
			t.Errorf("README.md:%d: %v", b.line, err)
			continue
		}
		write(filepath.Join(pkgDir, fmt.Sprintf("line%d.go", b.line)), src)
	}
	spec, err := json.Marshal(map[string]any{"Replace": overlay})
	if err != nil {
		t.Fatal(err)
	}
	specFile := filepath.Join(tmp, "overlay.json")
	if err := os.WriteFile(specFile, spec, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", append([]string{"build", "-overlay", specFile}, packages...)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("README snippets do not compile (%v):\n%s", err, out)
	}
}

type block struct {
	line int // of the block's first line of code, 1-based
	code string
}

// goBlocks returns the fenced ```go blocks of a Markdown text.
func goBlocks(md string) []block {
	var out []block
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```go" {
			continue
		}
		start := i + 1
		end := start
		for end < len(lines) && strings.TrimSpace(lines[end]) != "```" {
			end++
		}
		out = append(out, block{line: start + 1, code: strings.Join(lines[start:end], "\n") + "\n"})
		i = end
	}
	return out
}

var importBlock = regexp.MustCompile(`^\s*import\s*(\([^)]*\)|"[^"]*")\s*\n`)

// wrap makes a fragment a file of package snippets: its import block at
// the top, its body in a function, //line directives keeping README.md's
// line numbers.
func wrap(b block) (string, error) {
	code, imports, bodyLine := b.code, "", b.line
	if m := importBlock.FindStringSubmatch(code); m != nil {
		imports = m[0]
		code = code[len(m[0]):]
		bodyLine += strings.Count(m[0], "\n")
	}
	used, err := packagesUsed(code)
	if err != nil {
		return "", err
	}
	var auto []string
	for _, name := range used {
		if path, ok := snippetImports[name]; ok && !strings.Contains(imports, `"`+path+`"`) {
			auto = append(auto, fmt.Sprintf("import %q", path))
		}
	}
	var src bytes.Buffer
	src.WriteString("package snippets\n\n")
	if imports != "" {
		fmt.Fprintf(&src, "//line README.md:%d\n%s\n", b.line, imports)
	}
	src.WriteString(strings.Join(auto, "\n") + "\n\n")
	src.WriteString("func _() error {\n")
	fmt.Fprintf(&src, "//line README.md:%d\n%s", bodyLine, code)
	src.WriteString("\treturn nil\n}\n")
	return src.String(), nil
}

// packagesUsed lists the identifiers code qualifies something with
// (name.X), comments left out.
func packagesUsed(code string) ([]string, error) {
	fset := token.NewFileSet()
	file := fset.AddFile("snippet", -1, len(code))
	var errs scanner.ErrorList
	var s scanner.Scanner
	s.Init(file, []byte(code), func(pos token.Position, msg string) { errs.Add(pos, msg) }, 0)
	var used []string
	var prev token.Token
	var prevLit string
	for {
		_, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.PERIOD && prev == token.IDENT && !slices.Contains(used, prevLit) {
			used = append(used, prevLit)
		}
		// A selector's own name (x.Y.Z: Y) is not a package.
		if prev == token.PERIOD && tok == token.IDENT {
			tok = token.ILLEGAL
		}
		prev, prevLit = tok, lit
	}
	return used, errs.Err()
}
