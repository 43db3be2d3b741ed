package rowlock

import (
	"context"
	"database/sql"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/pgxrow"
	"github.com/sqllock/sqllock/internal/testdb"
)

// TestReleaseNotifiesOnlyOtherProcesses: on PostgreSQL a release sends a
// NOTIFY when waiters asked for one (wanted), but not when every waiter
// that asked is in the releasing process, which wakes them in memory: a
// NOTIFY with a session listening made the releasing commit much slower.
// Whether a release notified is told without timing: after it, the test
// sends a marker on the same channel, and notifications arrive in commit
// order, so the release's would come first.
func TestReleaseNotifiesOnlyOtherProcesses(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		if tg.Dialect != dblock.Postgres {
			continue // MySQL has no notifications: waiters poll
		}
		t.Run(tg.Name, func(t *testing.T) {
			cases := []struct {
				name string
				// wantedBy are the processes whose waiters asked for a
				// wake-up before the release, in order.
				wantedBy   []string
				wantNotify bool
			}{
				{"nobody asked", nil, false},
				{"this process asked", []string{lockinput.ProcessHost()}, false},
				{"this process asked twice", []string{lockinput.ProcessHost(), lockinput.ProcessHost()}, false},
				{"another process asked", []string{"elsewhere:1"}, true},
				{"this process, then another", []string{lockinput.ProcessHost(), "elsewhere:1"}, true},
				{"another process, then this one", []string{"elsewhere:1", lockinput.ProcessHost()}, true},
			}
			l, err := New(tg.DB)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			listen := listenConn(t, tg.DB, releaseChannel)
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					ctx := t.Context()
					name := testdb.Name(t)
					k, err := l.TryAcquire(ctx, name)
					if err != nil {
						t.Fatal(err)
					}
					for _, process := range c.wantedBy {
						// What a waiter of that process does before it
						// sleeps.
						asker := postgresStore{db: pgxrow.Wrap(tg.DB), process: process}
						if armed, _, err := asker.wantWake(ctx, name, holderInfo{}); err != nil || !armed {
							t.Fatalf("wantWake as %s = %v, %v", process, armed, err)
						}
					}
					if err := k.Release(ctx); err != nil {
						t.Fatal(err)
					}
					marker := name + "/marker"
					if _, err := tg.DB.ExecContext(ctx, `SELECT pg_notify($1, $2)`, releaseChannel, marker); err != nil {
						t.Fatal(err)
					}
					notified := false
					for {
						payload := nextNotification(t, listen)
						if payload == marker {
							break
						}
						if payload == name {
							notified = true
						}
					}
					if notified != c.wantNotify {
						t.Errorf("release notified: %v, want %v", notified, c.wantNotify)
					}
				})
			}
		})
	}
}

// listenConn is a connection of db that LISTENs on channel, closed when
// the test ends.
func listenConn(t *testing.T, db *sql.DB, channel string) *sql.Conn {
	t.Helper()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := conn.ExecContext(t.Context(), `LISTEN `+pgx.Identifier{channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return conn
}

// nextNotification waits for the next notification on conn (the test's
// deadline bounds the wait) and returns its payload.
func nextNotification(t *testing.T, conn *sql.Conn) string {
	t.Helper()
	var payload string
	err := conn.Raw(func(dc any) error {
		n, err := dc.(*stdlib.Conn).Conn().WaitForNotification(context.WithoutCancel(t.Context()))
		if err == nil {
			payload = n.Payload
		}
		return err
	})
	if err != nil {
		t.Fatalf("waiting for a notification: %v", err)
	}
	return payload
}
