package rowlock

import (
	"context"
	"database/sql"
	"strings"
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
// that asked is of the releasing Locker, which wakes them in memory: a
// NOTIFY with a session listening made the releasing commit much slower.
// Whether a release notified is told without timing: after it, the test
// sends a marker on the same channel, and notifications arrive in commit
// order, so the release's would come first.
func TestReleaseNotifiesOnlyOtherProcesses(t *testing.T) {
	const self, other = "self", "other"
	for _, tg := range testdb.Targets(t) {
		if tg.Dialect != dblock.Postgres {
			continue // MySQL has no notifications: waiters poll
		}
		t.Run(tg.Name, func(t *testing.T) {
			cases := []struct {
				name string
				// wantedBy are the wake identities whose waiters asked
				// for a wake-up before the release, in order: self is
				// the releasing Locker's, other another Locker's of this
				// process.
				wantedBy   []string
				wantNotify bool
			}{
				{"nobody asked", nil, false},
				{"this Locker asked", []string{self}, false},
				{"this Locker asked twice", []string{self, self}, false},
				{"another process asked", []string{"elsewhere:1"}, true},
				{"another Locker of this process asked", []string{other}, true},
				{"this Locker, then another", []string{self, "elsewhere:1"}, true},
				{"another Locker, then this one", []string{other, self}, true},
			}
			l, err := New(tg.DB)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			l2, err := New(tg.DB)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l2.Close() })
			ids := map[string]string{self: l.store.(postgresStore).process, other: l2.store.(postgresStore).process}
			if ids[self] == ids[other] || !strings.HasSuffix(ids[self], lockinput.ProcessHost()) {
				t.Fatalf("wake identities %q and %q: want two, each ending in the process's host", ids[self], ids[other])
			}
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
						if id, ok := ids[process]; ok {
							process = id
						}
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
