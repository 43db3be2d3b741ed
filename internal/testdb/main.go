package testdb

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Main runs a test binary's tests and then fails it if any goroutine is
// left running, besides the ones the harness's shared pools keep on
// purpose: database/sql's connection opener lives as long as a *sql.DB,
// and go-sql-driver watches each open connection, and the harness keeps
// its pools for the whole binary. extra adds what a package knows it may
// leave (IgnorePgxBackgroundReader). A child process (IsChild) runs its
// test without the check: the parent judges it.
func Main(m *testing.M, extra ...goleak.Option) {
	if IsChild() {
		os.Exit(m.Run())
	}
	goleak.VerifyTestMain(m, append([]goleak.Option{
		goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"),
		goleak.IgnoreAnyFunction("github.com/go-sql-driver/mysql.(*mysqlConn).startWatcher.func1"),
	}, extra...)...)
}

// IgnorePgxBackgroundReader ignores the background reader pgx starts on a
// connection whose write takes over 15 ms (a loaded machine): it parks in
// Read until the server next speaks, so an idle connection of a shared
// pool can keep it past the end of the tests.
var IgnorePgxBackgroundReader = goleak.IgnoreAnyFunction("github.com/jackc/pgx/v5/pgconn/internal/bgreader.(*BGReader).bgRead")
