package rowlock_test

import (
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// TestSessionFailureLosesNoLock: a Locker whose session connection cannot
// be had (here a DSN naming a database that does not exist) holds no lock,
// so its log must not say locks were lost: it says the session failed, once.
func TestSessionFailureLosesNoLock(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			dsn := tg.DSN
			if tg.Dialect == dblock.MySQL {
				cfg, err := mysql.ParseDSN(dsn)
				if err != nil {
					t.Fatal(err)
				}
				cfg.DBName = "sqllock_no_such_database"
				dsn = cfg.FormatDSN()
			} else {
				u, err := url.Parse(dsn)
				if err != nil {
					t.Fatal(err)
				}
				u.Path = "/sqllock_no_such_database"
				dsn = u.String()
			}
			logs := &logRecords{}
			l, err := rowlock.New(testdb.Open(t, tg, dsn), rowlock.WithLogger(slog.New(logs)))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			for range 3 {
				if _, err := l.TryAcquire(t.Context(), testdb.Name(t)); err == nil {
					t.Fatal("TryAcquire on a database that does not exist succeeded")
				}
			}
			// The session's attempt ends on its own goroutine.
			deadline := time.Now().Add(time.Minute)
			for logs.count("session connection") == 0 {
				if time.Now().After(deadline) {
					t.Fatal("the Locker never logged its session connection's failure")
				}
				time.Sleep(10 * time.Millisecond)
			}
			logs.mu.Lock()
			defer logs.mu.Unlock()
			for _, m := range logs.msgs {
				if strings.Contains(m, "lost") && !strings.Contains(m, "no lock was lost") {
					t.Errorf("a Locker that held nothing logged %q", m)
				}
			}
		})
	}
}
