package rowlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/testdb"
)

// FuzzTryAcquireName feeds names to TryAcquire on the real PostgreSQL: a
// name is either refused with ErrInvalidName and leaves no row, or taken,
// stored byte for byte, and released. Every name starts with a prefix unique
// to this process, so fuzzing workers and test runs never share a name.
func FuzzTryAcquireName(f *testing.F) {
	var tg testdb.Target
	for _, t := range testdb.Targets(f) {
		if t.Dialect == dblock.Postgres {
			tg = t
		}
	}
	if tg.DB == nil {
		f.Fatal("no PostgreSQL target")
	}
	l := newLocker(f, tg.DB)
	prefix := testdb.Name(f) + "/"
	// Few seeds: they run as a plain test in every go test.
	for _, seed := range []string{
		"jobs/nightly",
		"",
		"\xff\xfe",
		"a\x00b",
		"'; DROP TABLE dblock_locks; --",
		`%_\`,
		"e\u0301 ",
		strings.Repeat("😀", 60),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, suffix string) {
		name := prefix + suffix
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		k, err := l.TryAcquire(ctx, name)
		if lockinput.ValidateCallerName(name) != nil {
			if k != nil {
				_ = k.Release(ctx)
				t.Fatalf("TryAcquire(%q) took an invalid name", name)
			}
			if !errors.Is(err, dblock.ErrInvalidName) {
				t.Fatalf("TryAcquire(%q) = %v, want ErrInvalidName", name, err)
			}
			// PostgreSQL cannot even compare with a name that is not UTF-8
			// or holds NUL, so such a name cannot have been written.
			if utf8.ValidString(name) && !strings.ContainsRune(name, 0) {
				if got := fuzzStoredNames(t, ctx, tg, name); len(got) != 0 {
					t.Fatalf("refused name %q was written: %q", name, got)
				}
			}
			return
		}
		if err != nil {
			t.Fatalf("TryAcquire(%q): %v", name, err)
		}
		if k.Name() != name {
			t.Errorf("Name() = %q, want %q", k.Name(), name)
		}
		if got := fuzzStoredNames(t, ctx, tg, name); len(got) != 1 || got[0] != name {
			t.Errorf("row of %q reads back as %q", name, got)
		}
		if err := k.Release(ctx); err != nil {
			t.Fatalf("Release(%q): %v", name, err)
		}
	})
}

// fuzzStoredNames returns the names of the rows that match name, as stored.
func fuzzStoredNames(t *testing.T, ctx context.Context, tg testdb.Target, name string) []string {
	t.Helper()
	rows, err := tg.DB.QueryContext(ctx, `SELECT name FROM dblock_locks WHERE name = $1`, name)
	if err != nil {
		t.Fatalf("read back %q: %v", name, err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var n []byte
		if err := rows.Scan(&n); err != nil {
			t.Fatalf("read back %q: %v", name, err)
		}
		got = append(got, string(n))
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read back %q: %v", name, err)
	}
	return got
}
