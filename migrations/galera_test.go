package migrations

import (
	"io/fs"
	"strings"
	"testing"
)

// TestGaleraFilesRewriteTheSequence: on a Galera node Up reads version 1
// with the token sequence in the form the cluster accepts, and every other
// file as it is. It fails if the statement it replaces changes.
func TestGaleraFilesRewriteTheSequence(t *testing.T) {
	g := galeraFiles{files}
	plain, err := fs.ReadFile(files, galeraFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(plain), galeraSequence) {
		t.Fatalf("%s no longer has %s: galeraFiles would change nothing", galeraFile, galeraSequence)
	}
	got, err := fs.ReadFile(g, galeraFile)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(string(plain), galeraSequence, galeraAccepted, 1); string(got) != want {
		t.Fatalf("galeraFiles' %s:\n%s\nwant:\n%s", galeraFile, got, want)
	}
	entries, err := fs.ReadDir(g, "mysql")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := "mysql/" + e.Name()
		if name == galeraFile {
			continue
		}
		a, errA := fs.ReadFile(files, name)
		b, errB := fs.ReadFile(g, name)
		if errA != nil || errB != nil || string(a) != string(b) {
			t.Errorf("%s differs through galeraFiles (%v, %v)", name, errA, errB)
		}
	}
	f, err := g.Open(galeraFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || info.Size() != int64(len(got)) {
		t.Fatalf("Stat = %v, %v; want size %d", info, err, len(got))
	}
}
