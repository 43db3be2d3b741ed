// Package readme checks the README, CONTRIBUTING.md, model/README.md and
// the pages under docs/. Every Go code block in them compiles. Their
// relative links lead to files that exist. They and the Go comments name
// no package, identifier or file that is gone (refs_test.go). What they
// say of pgxpool holds against the real PostgreSQL.
package readme

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/parser"
	"go/scanner"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
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

// TestSnippetsCompile compiles every ` + "```go" + ` block of README.md and
// of the pages under docs/. A block that is a whole file (it has a package
// clause, after comments if any) is compiled as it is; any other is the
// body of a function returning error, after its own import block if it
// has one, with the imports of snippetImports it uses added. Compile errors
// name the Markdown file and its line.
func TestSnippetsCompile(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []block
	for _, doc := range markdownFiles(t, root) {
		text, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		found := goBlocks(doc, string(text))
		if doc == "README.md" && len(found) < 3 {
			t.Fatalf("found %d Go blocks in README.md; the extraction is broken", len(found))
		}
		blocks = append(blocks, found...)
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
		if isFile(b.code) {
			sub := b.id()
			write(filepath.Join(pkgDir, sub, "snippet.go"), fmt.Sprintf("//line %s:%d\n%s", b.file, b.line, b.code))
			packages = append(packages, "./internal/readme/snippets/"+sub)
			continue
		}
		src, err := wrap(b)
		if err != nil {
			t.Errorf("%s:%d: %v", b.file, b.line, err)
			continue
		}
		write(filepath.Join(pkgDir, b.id()+".go"), src)
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
		t.Errorf("README and docs snippets do not compile (%v):\n%s", err, out)
	}
}

// markdownFiles lists README.md, CONTRIBUTING.md, model/README.md and
// the pages under docs/, relative to root.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md", "CONTRIBUTING.md", "model/README.md"}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, filepath.ToSlash(rel))
	}
	return files
}

// isFile tells a block that is a whole Go file (a package clause, perhaps
// after comments) from a fragment.
func isFile(code string) bool {
	_, err := parser.ParseFile(token.NewFileSet(), "", code, parser.PackageClauseOnly)
	return err == nil
}

type block struct {
	file string // the Markdown file, relative to the repository root
	line int    // of the block's first line of code, 1-based
	code string
}

// id names the block's file or folder among the snippets, unique across
// Markdown files.
func (b block) id() string {
	name := strings.TrimSuffix(b.file, ".md")
	name = strings.NewReplacer("/", "_", ".", "_", "-", "_").Replace(strings.ToLower(name))
	return fmt.Sprintf("%s_line%d", name, b.line)
}

// goBlocks returns the fenced ```go blocks of a Markdown text.
func goBlocks(file, md string) []block {
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
		out = append(out, block{file: file, line: start + 1, code: strings.Join(lines[start:end], "\n") + "\n"})
		i = end
	}
	return out
}

var importBlock = regexp.MustCompile(`^\s*import\s*(\([^)]*\)|"[^"]*")\s*\n`)

// wrap makes a fragment a file of package snippets: its import block at
// the top, its body in a function, //line directives keeping the Markdown
// file's line numbers.
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
		fmt.Fprintf(&src, "//line %s:%d\n%s\n", b.file, b.line, imports)
	}
	src.WriteString(strings.Join(auto, "\n") + "\n\n")
	src.WriteString("func _() error {\n")
	fmt.Fprintf(&src, "//line %s:%d\n%s", b.file, bodyLine, code)
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

// mdLink matches a Markdown link or image: [text](target) or ![alt](target).
var mdLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)\)`)

// TestLinks: every relative link of README.md and of the pages under docs/
// leads to a file or folder that exists, and every #anchor to a heading of
// that file, so that moving a section cannot leave a dead link behind.
func TestLinks(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string][]string{} // Markdown file -> its headings' anchors
	anchorsOf := func(file string) []string {
		if a, ok := anchors[file]; ok {
			return a
		}
		text, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		anchors[file] = headingAnchors(string(text))
		return anchors[file]
	}
	for _, doc := range markdownFiles(t, root) {
		text, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		for lineNo, line := range strings.Split(proseOnly(string(text)), "\n") {
			for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				file := doc
				if path != "" {
					file = filepath.ToSlash(filepath.Join(filepath.Dir(doc), path))
					if _, err := os.Stat(filepath.Join(root, file)); err != nil {
						t.Errorf("%s:%d: link %q: %v", doc, lineNo+1, target, err)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(file, ".md") {
					t.Errorf("%s:%d: link %q: an anchor into a file that is not Markdown", doc, lineNo+1, target)
					continue
				}
				if !slices.Contains(anchorsOf(file), anchor) {
					t.Errorf("%s:%d: link %q: %s has no heading with that anchor", doc, lineNo+1, target, file)
				}
			}
		}
	}
}

// proseOnly blanks the fenced code blocks and inline code spans of a
// Markdown text, keeping its lines, so that code is not read as links.
func proseOnly(md string) string {
	lines := strings.Split(md, "\n")
	inFence := false
	for i, line := range lines {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			lines[i] = ""
			continue
		}
		if inFence {
			lines[i] = ""
			continue
		}
		lines[i] = inlineCode.ReplaceAllString(line, "``")
	}
	return strings.Join(lines, "\n")
}

var inlineCode = regexp.MustCompile("`[^`]*`")

// headingAnchors lists the anchors GitHub gives the headings of a Markdown
// text: lower case, spaces as hyphens, punctuation dropped, and -1, -2...
// after a repeated one.
func headingAnchors(md string) []string {
	var out []string
	seen := map[string]int{}
	for _, line := range strings.Split(proseOnly(md), "\n") {
		title, ok := strings.CutPrefix(line, "#")
		if !ok {
			continue
		}
		title = strings.TrimLeft(title, "#")
		if !strings.HasPrefix(title, " ") {
			continue
		}
		var slug strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(title)) {
			switch {
			case r == ' ':
				slug.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				slug.WriteRune(r)
			}
		}
		anchor := slug.String()
		if n := seen[anchor]; n > 0 {
			seen[anchor] = n + 1
			anchor = fmt.Sprintf("%s-%d", anchor, n)
		} else {
			seen[anchor] = 1
		}
		out = append(out, anchor)
	}
	return out
}
