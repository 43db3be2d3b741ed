package main

import (
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	_ "modernc.org/sqlite" // the "sqlite" driver

	"github.com/sqllock/sqllock/dblock"
)

// sqlitePragmas are set on every connection to an SQLite file: a writer
// that finds the file locked waits its turn (up to 5 s) instead of failing
// with SQLITE_BUSY, and WAL lets readers run beside the one writer.
const sqlitePragmas = "_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)"

// sqliteDatabase reads the rest of an sqlite: DSN, a file path:
// sqlite:locks.db (relative to the working directory), sqlite:/var/lib/x.db
// or sqlite:///var/lib/x.db. The file is created if missing. There is no
// default file and no in-memory database: both processes of a pair must
// name the same file, and a memory database is private to one process.
func sqliteDatabase(path string) (database, error) {
	if rest, ok := strings.CutPrefix(path, "//"); ok {
		if rest != "" && !strings.HasPrefix(rest, "/") {
			return database{}, usagef("", "sqlite://%s names a host: use sqlite:relative/path.db or sqlite:///absolute/path.db", rest)
		}
		path = rest
	}
	switch {
	case path == "":
		return database{}, usagef("", "the sqlite: DSN names no file: use sqlite:/path/to/locks.db")
	case strings.ContainsAny(path, "?#"):
		return database{}, usagef("", "the sqlite: DSN takes a file path and no parameters (sqllock sets busy_timeout and WAL itself)")
	case path == ":memory:" || strings.HasPrefix(path, "file:"):
		return database{}, usagef("", "the sqlite: DSN takes a file path shared by the processes to exclude (not %q)", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return database{}, usagef("", "sqlite file %q: %v", path, err)
	}
	dsn := (&url.URL{Scheme: "file", Opaque: abs, RawQuery: sqlitePragmas}).String()
	return database{
		dialect: dblock.SQLite,
		addr:    abs,
		open: func() *sql.DB {
			// Opening never fails: the file is opened by the first query.
			db, err := sql.Open("sqlite", dsn)
			if err != nil {
				panic(err)
			}
			return db
		},
	}, nil
}

// checkSQLiteFile refuses an SQLite file that does not exist to the
// commands that only look at one (status, reap): opening it would create
// an empty file, and a mistyped path must not pass for a lock store with
// nothing in it. run and migrate create it.
func (d database) checkSQLiteFile(cmd string) error {
	if d.dialect != dblock.SQLite || cmd == "run" || cmd == "migrate" {
		return nil
	}
	if _, err := os.Stat(d.addr); errors.Is(err, fs.ErrNotExist) {
		return &exitCode{code: exitConfig, msg: fmt.Sprintf(
			"no SQLite file at %s: check the path ('sqllock run' and 'sqllock migrate up' create it)", d.addr)}
	}
	return nil
}

// cutPrefixFold is strings.CutPrefix ignoring case.
func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}
