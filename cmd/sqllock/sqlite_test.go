package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/migrations"
)

// TestCLISQLite runs the binary on an SQLite file, as the README's first
// command does on a machine with no database server: run works on a file
// that does not exist yet, and two runs on one file exclude each other.
func TestCLISQLite(t *testing.T) {
	if testdb.LeftOut(t, testdb.SQLiteName) {
		return
	}
	bin := filepath.Join(t.TempDir(), "sqllock")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	file := filepath.Join(t.TempDir(), "locks.db")
	cli := &sqllockCLI{t: t, bin: bin, dsn: "sqlite:" + file}

	// Looking at a file that does not exist creates nothing.
	cli.expect(exitConfig, "", "no SQLite file at "+file, "status")
	if _, err := os.Stat(file); err == nil {
		t.Fatal("status created the file")
	}

	// A file that cannot be opened (its directory is missing) is the DSN's
	// fault, and no server is involved.
	missing := &sqllockCLI{t: t, bin: bin, dsn: "sqlite:" + filepath.Join(t.TempDir(), "no-such-dir", "locks.db")}
	if code, _, errOut := missing.run("run", "--name", "demo", "--", "true"); code != exitConfig ||
		!strings.Contains(errOut, "cannot open the SQLite file") || strings.Contains(errOut, "server") {
		t.Errorf("run on an SQLite file in a missing directory: exit %d, stderr %q; want 78 and a message about the file, none about a server", code, errOut)
	}

	// The first command on a fresh file: run creates the tables.
	out := cli.expect(exitOK, "", "", "run", "--name", "demo", "--", "sh", "-c", `echo "$SQLLOCK_NAME $SQLLOCK_TOKEN"`)
	if got := strings.Fields(out); len(got) != 2 || got[0] != "demo" {
		t.Fatalf("command saw %q, want the lock name and token", out)
	}
	if _, err := os.Stat(file); err != nil {
		t.Fatalf("the file was not created: %v", err)
	}
	cli.expect(exitOK, fmt.Sprintf("%d\n", migrations.Latest), "", "migrate", "version")
	cli.expect(3, "", "", "run", "--name", "demo", "--", "sh", "-c", "exit 3")

	// A run holds the lock; another, on the same file through its other
	// spelling (sqlite:///abs), exits 75 and never runs its command.
	holder := cli.start("run", "--name", "demo", "--", "sh", "-c", "echo holding; exec sleep 600")
	holder.waitLine("holding")
	other := &sqllockCLI{t: t, bin: bin, dsn: "sqlite://" + file}
	marker := filepath.Join(t.TempDir(), "ran")
	other.expect(exitTempFail, "", "lock demo is held by another process", "run", "-v", "--name", "demo", "--", "touch", marker)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the second run ran its command while the first held the lock")
	}
	// A run that waits gets the lock once the holder's command ends.
	waiter := other.start("run", "--name", "demo", "--wait", "1m", "--", "touch", marker)
	if err := holder.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	holder.wait(time.Minute)
	if code := waiter.wait(time.Minute); code != exitOK {
		t.Fatalf("waiting run: exit %d; stderr: %s", code, waiter.stderr.String())
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the waiting run did not run its command: %v", err)
	}

	// Tokens grew across the processes.
	out = cli.expect(exitOK, "", "", "run", "--name", "demo", "--", "sh", "-c", `echo "$SQLLOCK_TOKEN"`)
	if token, err := strconv.Atoi(strings.TrimSpace(out)); err != nil || token < 5 {
		t.Errorf("token after five holds = %q, want at least 5", out)
	}
	cli.expect(exitOK, "No locks held.", "", "status")
}

// TestSQLiteDSN: an sqlite: DSN names a file explicitly; anything else is a
// usage error that says what to write.
func TestSQLiteDSN(t *testing.T) {
	for _, tc := range []struct {
		dsn, want string
	}{
		{"sqlite:", "names no file"},
		{"sqlite://", "names no file"},
		{"sqlite://host/x.db", "names a host"},
		{"sqlite::memory:", "file path shared"},
		{"sqlite:file:x.db", "file path shared"},
		{"sqlite:x.db?_pragma=busy_timeout(1)", "no parameters"},
	} {
		_, err := parseDSN(tc.dsn)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseDSN(%q) = %v, want an error containing %q", tc.dsn, err, tc.want)
		}
	}
	for _, dsn := range []string{"sqlite:x.db", "SQLite:/tmp/x.db", "sqlite:///tmp/x.db"} {
		d, err := parseDSN(dsn)
		if err != nil || !filepath.IsAbs(d.addr) || filepath.Base(d.addr) != "x.db" {
			t.Errorf("parseDSN(%q) = %+v, %v; want the absolute path of x.db", dsn, d, err)
		}
	}
}
