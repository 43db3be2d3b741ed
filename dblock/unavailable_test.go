package dblock_test

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/rowlock"
)

// wantUnavailable fails t unless err wraps ErrUnavailable and not
// ErrNotAcquired: a server that cannot be reached is never "someone else
// holds it".
func wantUnavailable(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, dblock.ErrUnavailable) || errors.Is(err, dblock.ErrNotAcquired) {
		t.Errorf("%s: %v; want ErrUnavailable (and not ErrNotAcquired)", what, err)
	}
}

// TestUnavailableServer: with nothing listening at the server's address,
// every call of rowlock, forupdate and migrations that needs the server
// returns ErrUnavailable at once (Acquire does not wait for ctx), with the
// driver's network error still in the chain.
func TestUnavailableServer(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			db := testdb.Open(t, tg, tg.DSNVia(closedPort(t)))
			ctx := t.Context()
			name := testdb.Name(t)

			rl, err := rowlock.New(db, rowlock.WithDialect(tg.Dialect))
			if err != nil {
				t.Fatal(err) // New does not need the server when told the dialect
			}
			t.Cleanup(func() { _ = rl.Close() })
			_, err = rl.TryAcquire(ctx, name)
			wantUnavailable(t, "rowlock TryAcquire", err)
			if _, ok := errors.AsType[*net.OpError](err); !ok {
				t.Errorf("rowlock TryAcquire: %v: the driver's *net.OpError is not in the chain", err)
			}
			_, err = rl.Acquire(ctx, name)
			wantUnavailable(t, "rowlock Acquire", err)
			_, _, _, _, err = rl.Holder(ctx, name)
			wantUnavailable(t, "rowlock Holder", err)

			fl, err := forupdate.New(db, forupdate.WithDialect(tg.Dialect))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = fl.Close() })
			_, err = fl.TryAcquire(ctx, name)
			wantUnavailable(t, "forupdate TryAcquire", err)
			_, err = fl.Acquire(ctx, name)
			wantUnavailable(t, "forupdate Acquire", err)

			wantUnavailable(t, "migrations.Up", migrations.Up(ctx, db, migrations.WithDialect(tg.Dialect)))
			_, _, err = migrations.Version(ctx, db, migrations.WithDialect(tg.Dialect))
			wantUnavailable(t, "migrations.Version", err)
		})
	}
	t.Run(testdb.SQLiteName, func(t *testing.T) {
		if testdb.LeftOut(t, testdb.SQLiteName) {
			return
		}
		// SQLite has no server: a file that cannot be opened is its
		// unreachable database.
		db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "gone", "locks.db")+"?"+testdb.SQLiteParams)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		rl, err := rowlock.New(db)
		if err == nil {
			t.Cleanup(func() { _ = rl.Close() })
			_, err = rl.TryAcquire(t.Context(), testdb.Name(t))
		}
		wantUnavailable(t, "rowlock New, TryAcquire", err)
		wantUnavailable(t, "migrations.Up", migrations.Up(t.Context(), db))
		_, _, err = migrations.Version(t.Context(), db)
		wantUnavailable(t, "migrations.Version", err)
	})
}

// TestUnavailableUnderHolds: when the connections of held locks are cut
// (and new ones refused), the locks are lost with ErrUnavailable as the
// cause, next to ErrLockLost, and Refresh says so too.
func TestUnavailableUnderHolds(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			proxy := testdb.NewProxy(t, tg.HostPort())
			db := testdb.Open(t, tg, tg.DSNVia(proxy.Addr()))
			rl, err := rowlock.New(db)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = rl.Close() })
			fl, err := forupdate.New(db)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = fl.Close() })
			// A lease far longer than the test: only the cut connections
			// can end these holds.
			rowHold, err := rl.TryAcquire(ctx, testdb.Name(t), dblock.TTL(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			txHold, err := fl.TryAcquire(ctx, testdb.Name(t), dblock.TTL(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			// Lost holds are released all the same, as a deferred Release
			// would: forupdate's rolls its transaction back.
			t.Cleanup(func() { _ = rowHold.Release(context.Background()); _ = txHold.Release(context.Background()) })

			proxy.Cut()
			for what, hold := range map[string]dblock.Lock{"rowlock": rowHold, "forupdate": txHold} {
				wantUnavailable(t, what+" Refresh", hold.Refresh(ctx))
				<-hold.Done()
				err := hold.Err()
				if !errors.Is(err, dblock.ErrLockLost) || !errors.Is(err, dblock.ErrUnavailable) {
					t.Errorf("%s: Err() = %v; want ErrLockLost and ErrUnavailable", what, err)
				}
			}
		})
	}
}

// closedPort returns a 127.0.0.1 address nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}
