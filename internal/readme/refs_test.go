package readme

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestNoDeadReferences: the Markdown pages (README.md, CONTRIBUTING.md,
// model/README.md, docs/*.md) and every Go comment of the module name only
// packages, identifiers and files that exist. Code moves; a name left
// behind in the docs misleads the next reader, so it fails here.
func TestNoDeadReferences(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	m := loadModule(t, root)
	var texts []text
	for _, doc := range markdownFiles(t, root) {
		b, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, text{file: doc, line: 1, body: string(b)})
	}
	texts = append(texts, m.comments...)
	if len(texts) < 100 {
		t.Fatalf("read only %d texts: the scan is broken", len(texts))
	}
	dead := m.deadRefs(texts)
	for _, d := range dead {
		t.Error(d)
	}
	if m.checked < 500 {
		t.Errorf("checked only %d references: the scan is broken", m.checked)
	}
	t.Logf("%d references checked, %d dead", m.checked, len(dead))
}

// TestDeadReferencesFound plants dead references of each kind in a
// Markdown file and a Go file under testdata, beside live ones, and checks
// that exactly the dead ones are reported.
func TestDeadReferencesFound(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	m := loadModule(t, root)
	var texts []text
	b, err := os.ReadFile("testdata/dead/page.md")
	if err != nil {
		t.Fatal(err)
	}
	texts = append(texts, text{file: "internal/readme/testdata/dead/page.md", line: 1, body: string(b)})
	fixture := loadModule(t, filepath.Join(root, "internal", "readme", "testdata", "dead"))
	for _, c := range fixture.comments {
		c.pkg = "rowlock" // the fixture's comments speak as rowlock's would
		texts = append(texts, c)
	}
	var got []string
	for _, d := range m.deadRefs(texts) {
		got = append(got, d.ref)
	}
	want := []string{
		// page.md
		"github.com/sqllock/sqllock/nosuchpkg",
		"rowlock.NoSuchOption",
		"rowlock.Locker.NoSuchMethod",
		"(*rowlock.Lock).NoSuchMethod",
		"docs/no-such-page.md",
		"rowlock/no_such_file.go",
		".ci/no-such-script",
		"docs/design.md, No such section",
		"waiter.noSuchMethod",
		"session.run",
		"lock.NoSuchMethod",
		// fixture.go
		"dblock.ErrNoSuchError",
		"(*Locker).NoSuchMethod",
		"internal/nosuchpkg",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("dead references found:\n%q\nwant:\n%q", got, want)
	}
}

// text is a piece of prose to check: a Markdown file or one Go comment.
type text struct {
	file string
	line int    // of body's first line
	pkg  string // the package a Go comment belongs to; "" for Markdown
	body string
}

type deadRef struct {
	file string
	line int
	ref  string
	why  string
}

func (d deadRef) String() string {
	return fmt.Sprintf("%s:%d: %s: %s", d.file, d.line, d.ref, d.why)
}

// pkgInfo is what a package declares at top level, and the members
// (methods, fields, interface methods) of its types.
type pkgInfo struct {
	decls    map[string]bool
	members  map[string]map[string]bool
	embedded map[string][]ast.Expr // a type's embedded types and alias target
}

type module struct {
	checked  int // references checked, dead or not
	root     string
	byName   map[string][]*pkgInfo // package name -> its packages
	comments []text
}

// walkGoFiles calls fn with the path of every Go file under root, test
// files included, leaving out testdata and dot folders.
func walkGoFiles(root string, fn func(path string) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		return fn(path)
	})
}

// loadModule parses every Go file under root (testdata and dot folders
// left out) for declarations and comments.
func loadModule(t *testing.T, root string) *module {
	t.Helper()
	m := &module{root: root, byName: map[string][]*pkgInfo{}}
	byDir := map[string]*pkgInfo{}
	fset := token.NewFileSet()
	err := walkGoFiles(root, func(path string) error {
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		dir := filepath.Dir(path)
		name := strings.TrimSuffix(f.Name.Name, "_test")
		p := byDir[dir+"\x00"+name]
		if p == nil {
			p = &pkgInfo{decls: map[string]bool{}, members: map[string]map[string]bool{}, embedded: map[string][]ast.Expr{}}
			byDir[dir+"\x00"+name] = p
			m.byName[name] = append(m.byName[name], p)
		}
		p.add(f)
		for _, cg := range f.Comments {
			m.comments = append(m.comments, text{
				file: filepath.ToSlash(rel),
				line: fset.Position(cg.Pos()).Line,
				pkg:  name,
				body: cg.Text(),
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (p *pkgInfo) add(f *ast.File) {
	member := func(typ, name string) {
		if p.members[typ] == nil {
			p.members[typ] = map[string]bool{}
		}
		p.members[typ][name] = true
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil || len(d.Recv.List) == 0 {
				p.decls[d.Name.Name] = true
				continue
			}
			member(baseName(d.Recv.List[0].Type), d.Name.Name)
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.ValueSpec:
					for _, n := range s.Names {
						p.decls[n.Name] = true
					}
				case *ast.TypeSpec:
					typ := s.Name.Name
					p.decls[typ] = true
					member(typ, "") // known, even without members
					if s.Assign != token.NoPos {
						p.embedded[typ] = append(p.embedded[typ], s.Type)
					}
					var fields *ast.FieldList
					switch tt := s.Type.(type) {
					case *ast.StructType:
						fields = tt.Fields
					case *ast.InterfaceType:
						fields = tt.Methods
					}
					if fields == nil {
						continue
					}
					for _, fl := range fields.List {
						if len(fl.Names) == 0 {
							p.embedded[typ] = append(p.embedded[typ], fl.Type)
							member(typ, baseName(fl.Type))
						}
						for _, n := range fl.Names {
							member(typ, n.Name)
						}
					}
				}
			}
		}
	}
}

// baseName is the type name of a receiver or embedded field: T of *T,
// T[P], pkg.T.
func baseName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.SelectorExpr:
			return x.Sel.Name
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// hasMember tells whether type typ of p has a method or field name,
// promoted ones included. Members of types outside the module are taken
// on trust.
func (m *module) hasMember(p *pkgInfo, typ, name string, depth int) bool {
	if p.members[typ][name] {
		return true
	}
	if depth > 5 {
		return false
	}
	for _, e := range p.embedded[typ] {
		for {
			if s, ok := e.(*ast.StarExpr); ok {
				e = s.X
				continue
			}
			break
		}
		switch x := e.(type) {
		case *ast.Ident:
			if m.hasMember(p, x.Name, name, depth+1) {
				return true
			}
		case *ast.SelectorExpr:
			pkg, ok := x.X.(*ast.Ident)
			if !ok {
				return true
			}
			others := m.byName[pkg.Name]
			if len(others) == 0 {
				return true // a type from outside the module
			}
			for _, o := range others {
				if m.hasMember(o, x.Sel.Name, name, depth+1) {
					return true
				}
			}
		default:
			return true
		}
	}
	return false
}

var (
	// modulePath matches an import path inside this module.
	modulePath = regexp.MustCompile(`github\.com/sqllock/sqllock((?:/[a-z0-9_]+)*)`)
	// sectionRef matches a section of a Markdown page named after it: the
	// page's path, a comma or an opening parenthesis, perhaps the word
	// "section", then the section's title, quoted or starting with a
	// capital letter, up to a closing parenthesis, a period or a
	// semicolon.
	sectionRef = regexp.MustCompile(`((?:docs/[\w-]+|CONTRIBUTING|README|model/README)\.md)(?:, | \()(?:section )?(?:"([^"]+)"|([A-Z][\w '’:-]*?)[).;])`)
	// docLink matches a Go doc link to the comment's own package.
	docLink = regexp.MustCompile(`\[\*?([A-Z]\w*)(?:\.([A-Za-z_]\w*))?\]`)
	// methodRef matches (*T).M, (T).M, (*pkg.T).M.
	// localRef is a code span `recv.member` whose recv is lowercase: an
	// unexported type's member (checkLocalRefs), or a variable's.
	localRef  = regexp.MustCompile("`" + `([a-z]\w*)\.([A-Za-z_]\w*)(?:\(\))?` + "`")
	methodRef = regexp.MustCompile(`\(\*?(?:([a-z][a-z0-9]*)\.)?([A-Za-z_]\w*)\)\.([A-Za-z_]\w*)`)
	// qualified matches pkg.Name and pkg.Type.Member.
	qualified = regexp.MustCompile(`([a-z][a-z0-9]*)\.([A-Za-z_]\w*)(?:\.([A-Za-z_]\w*))?`)
	// repoPath matches a path that may name a file or folder of the
	// repository: segments of letters, digits, dots, dashes and
	// underscores, at least one slash.
	repoPath = regexp.MustCompile(`\.?[A-Za-z0-9_][A-Za-z0-9_.-]*(?:/[A-Za-z0-9_][A-Za-z0-9_.-]*)+/?`)
)

// fileExtensions are the endings that make a path with a slash a file of
// the repository wherever it starts.
var fileExtensions = []string{".go", ".md", ".sql", ".pml", ".svg"}

// deadRefs returns the references of texts that name nothing in the
// module.
func (m *module) deadRefs(texts []text) []deadRef {
	top := map[string]bool{}
	entries, _ := os.ReadDir(m.root)
	for _, e := range entries {
		top[e.Name()] = true
	}
	var out []deadRef
	seen := map[deadRef]bool{}
	for _, tx := range texts {
		// A section named after a page ("docs/design.md, Crash
		// detection") may span lines of a comment.
		joined := strings.Join(strings.Fields(tx.body), " ")
		for _, loc := range sectionRef.FindAllStringSubmatchIndex(joined, -1) {
			page, title := group(joined, loc, 1), group(joined, loc, 2)
			if title == "" {
				title = group(joined, loc, 3)
				if strings.HasPrefix(joined[loc[1]-1:], ".md") {
					continue // a list of pages: "README.md, CONTRIBUTING.md"
				}
			}
			m.checked++
			if !m.hasHeading(page, title) {
				d := deadRef{file: tx.file, line: tx.line, ref: page + ", " + title, why: "no such section"}
				if !seen[d] {
					seen[d] = true
					out = append(out, d)
				}
			}
		}
		for i, line := range strings.Split(tx.body, "\n") {
			report := func(ref, why string) {
				d := deadRef{file: tx.file, line: tx.line + i, ref: ref, why: why}
				if !seen[d] {
					seen[d] = true
					out = append(out, d)
				}
			}
			m.checkLine(tx, line, top, report)
		}
	}
	return out
}

func (m *module) checkLine(tx text, line string, top map[string]bool, report func(ref, why string)) {
	for _, loc := range modulePath.FindAllStringSubmatchIndex(line, -1) {
		sub := line[loc[2]:loc[3]]
		if sub == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(m.root, sub)); err != nil {
			report(line[loc[0]:loc[1]], "no such package")
		}
	}
	line = modulePath.ReplaceAllString(line, "")

	if tx.pkg != "" {
		// A Go doc link (Name or Type.Member in square brackets) names
		// something of the comment's own package; a qualified one is
		// checked below.
		for _, loc := range docLink.FindAllStringSubmatchIndex(line, -1) {
			if loc[1] < len(line) && line[loc[1]] == '(' {
				continue // a Markdown link
			}
			name, member := group(line, loc, 1), group(line, loc, 2)
			if len(name) == 1 {
				continue // a type parameter: T[P]
			}
			ps := m.byName[tx.pkg]
			m.checked++
			switch {
			case !m.declares(ps, name):
				report(line[loc[0]:loc[1]], "no such identifier in package "+tx.pkg)
			case member != "" && !m.anyMember(ps, name, member):
				report(line[loc[0]:loc[1]], "no such method or field")
			}
		}
	}

	for _, loc := range methodRef.FindAllStringSubmatchIndex(line, -1) {
		pkg, typ, member := group(line, loc, 1), group(line, loc, 2), group(line, loc, 3)
		if len(typ) == 1 {
			continue // a placeholder: (*T).Method
		}
		m.checked++
		var candidates []*pkgInfo
		switch {
		case pkg != "":
			candidates = m.byName[pkg]
			if candidates == nil {
				continue // a package outside the module
			}
		case tx.pkg != "" && m.declares(m.byName[tx.pkg], typ):
			candidates = m.byName[tx.pkg]
		default:
			for _, ps := range m.byName {
				candidates = append(candidates, ps...)
			}
		}
		if !m.anyMember(candidates, typ, member) {
			report(line[loc[0]:loc[1]], "no such method or field")
		}
	}
	line = methodRef.ReplaceAllString(line, "")

	if tx.pkg == "" {
		m.checkLocalRefs(line, report)
	}

	for _, loc := range qualified.FindAllStringSubmatchIndex(line, -1) {
		if loc[0] > 0 && (isWordByte(line[loc[0]-1]) || strings.ContainsRune("/.-@", rune(line[loc[0]-1]))) {
			continue // part of a path, a host or a longer selector
		}
		pkg, name, member := group(line, loc, 1), group(line, loc, 2), group(line, loc, 3)
		ps := m.byName[pkg]
		if ps == nil || slices.Contains(fileExtensions, "."+name) || name == "go" {
			continue
		}
		if loc[1] < len(line) && (line[loc[1]] == '/' || line[loc[1]] == '.' && loc[1]+1 < len(line) && isWordByte(line[loc[1]+1])) {
			continue // a file name or a path
		}
		ref := pkg + "." + name
		m.checked++
		if !m.declares(ps, name) && !m.declares(ps, strings.TrimSuffix(name, "s")) { // "dblock.Lockers": plural
			report(ref, "no such identifier")
			continue
		}
		if member != "" && m.isType(ps, name) && !m.anyMember(ps, name, member) {
			report(ref+"."+member, "no such method or field")
		}
	}

	for _, loc := range repoPath.FindAllStringIndex(line, -1) {
		p := strings.TrimRight(line[loc[0]:loc[1]], "./")
		if loc[0] > 0 && strings.ContainsRune("/~$<{*", rune(line[loc[0]-1])) {
			continue // absolute, home, variable or pattern
		}
		if strings.Contains(p, "..") || strings.HasPrefix(p, "./") {
			continue
		}
		first, _, _ := strings.Cut(p, "/")
		isFile := slices.Contains(fileExtensions, filepath.Ext(p))
		switch {
		case strings.Contains(first, ".") && first != ".ci":
			continue // a host (modernc.org/sqlite) or a file name
		case !top[first] && first != ".ci" && (!isFile || m.byName[first] == nil):
			// Not this repository's: a Go import path, "read/write", a
			// file of another project. A file under a folder named as one
			// of the module's packages is checked: the package may have
			// moved.
			continue
		}
		m.checked++
		if _, err := os.Stat(filepath.Join(m.root, p)); err == nil {
			continue
		}
		// A path relative to the text's own folder (a Markdown link).
		if _, err := os.Stat(filepath.Join(m.root, filepath.Dir(tx.file), p)); err == nil {
			continue
		}
		report(p, "no such file or folder")
	}
}

// hasHeading tells whether the Markdown page (from the module root) has
// a heading with this title, case aside.
func (m *module) hasHeading(page, title string) bool {
	b, err := os.ReadFile(filepath.Join(m.root, page))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if h, ok := strings.CutPrefix(line, "#"); ok && strings.EqualFold(strings.TrimSpace(strings.TrimLeft(h, "#")), title) {
			return true
		}
	}
	return false
}

func group(s string, loc []int, i int) string {
	if loc[2*i] < 0 {
		return ""
	}
	return s[loc[2*i]:loc[2*i+1]]
}

func isWordByte(b byte) bool {
	return b == '_' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' || '0' <= b && b <= '9'
}

// checkLocalRefs checks a Markdown line's references to unexported types'
// members, written `recv.member` (docs/concurrency.md's hops, the model's
// code map). Such a span is dead when recv is a type of the module that has
// no such member, or when recv is no type at all but its capitalized name
// is and member is unexported (the type was exported: `session.close`
// after session became Session). An exported member of such a recv is a
// variable's (`locker.Readers`) and must be the type's. A recv that is no
// type either way is a variable (`inc.cancel`), and is left alone.
func (m *module) checkLocalRefs(line string, report func(ref, why string)) {
	var all []*pkgInfo
	for _, ps := range m.byName {
		all = append(all, ps...)
	}
	for _, loc := range localRef.FindAllStringSubmatchIndex(line, -1) {
		recv, member := group(line, loc, 1), group(line, loc, 2)
		if m.byName[recv] != nil || slices.Contains(fileExtensions, "."+member) {
			continue // a package (checked above), or a file name
		}
		ref, exported := recv+"."+member, member[0] >= 'A' && member[0] <= 'Z'
		capitalized := strings.ToUpper(recv[:1]) + recv[1:]
		switch {
		case m.isType(all, recv):
			m.checked++
			if !m.anyMember(all, recv, member) {
				report(ref, "no such method or field")
			}
		case !m.isType(all, capitalized):
		case exported:
			// A variable of that type, as users write: `locker.Readers`.
			m.checked++
			if !m.anyMember(all, capitalized, member) {
				report(ref, "no such method or field of "+capitalized)
			}
		default:
			m.checked++
			report(ref, "no such type (there is "+capitalized+")")
		}
	}
}

func (m *module) declares(ps []*pkgInfo, name string) bool {
	for _, p := range ps {
		if p.decls[name] {
			return true
		}
	}
	return false
}

func (m *module) isType(ps []*pkgInfo, name string) bool {
	for _, p := range ps {
		if _, ok := p.members[name]; ok {
			return true
		}
	}
	return false
}

func (m *module) anyMember(ps []*pkgInfo, typ, member string) bool {
	for _, p := range ps {
		if m.hasMember(p, typ, member, 0) {
			return true
		}
	}
	return false
}
