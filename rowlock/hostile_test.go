package rowlock_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/hostile"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// rowlockBackend is the hostile-input environment of rowlock: the
// migrated tables, shared with every other test, so that its snapshot
// reads only the case's names.
type rowlockBackend struct{}

func (rowlockBackend) LockTable() string { return "dblock_locks" }

func (rowlockBackend) Locker(e *hostile.Env, db *sql.DB) dblock.Locker { return locker(e, db) }

// Settle closes the case's Locker, which stops its session connection
// once it holds no lock: a Locker that waited keeps the connection until it
// has been idle a while, and Close must give it back. Locks it holds stay
// held, so checks after the call still work. (The session connections come
// from a pool of their own, see locker: a held lock keeps its marker's
// connection, which is not a connection the call kept.)
func (rowlockBackend) Settle(e *hostile.Env) {
	if err := caseLocker(e).Close(); err != nil {
		e.T.Errorf("Close: %v", err)
	}
}

// locker returns a new Locker on db, closed when the test ends.
func locker(e *hostile.Env, db *sql.DB, opts ...rowlock.Option) *rowlock.Locker {
	e.T.Helper()
	sessions := testdb.Open(e.T, e.Target, e.Target.DSN)
	l, err := rowlock.New(db, append([]rowlock.Option{rowlock.WithSessionDB(sessions)}, opts...)...)
	if err != nil {
		e.T.Fatalf("arrange: rowlock.New: %v", err)
	}
	e.T.Cleanup(func() {
		if !e.Wedged() {
			_ = l.Close()
		}
	})
	return l
}

// caseLocker is the case's own Locker, for calls only rowlock has.
func caseLocker(e *hostile.Env) *rowlock.Locker { return e.L.(*rowlock.Locker) }

// storable reports whether the target's name column could hold name; a
// name it cannot hold cannot have been written, and PostgreSQL refuses to
// compare with it.
func storable(d dblock.Dialect, name string) bool {
	if d == dblock.MySQL {
		return len(name) <= 255 // VARBINARY(255)
	}
	return utf8.ValidString(name) && !strings.ContainsRune(name, 0) && utf8.RuneCountInString(name) <= 255
}

// Snapshot reads the rows a case may touch: every lock row (all its
// columns, as text) and the number of waiter rows, per name, for names
// with the case's prefix and the watched names.
func (rowlockBackend) Snapshot(e *hostile.Env) hostile.Snapshot {
	e.T.Helper()
	ctx := context.Background()
	var names []string
	for _, n := range e.Watched() {
		if storable(e.Target.Dialect, n) {
			names = append(names, n)
		}
	}
	var lockQ, waitQ string
	var args []any
	switch e.Target.Dialect {
	case dblock.Postgres:
		lockQ = `SELECT name, concat_ws('|', token, stripe, owner_host, owner_id, hold_count, note,
		             acquired_at, min_hold_until, expires_at)
		         FROM dblock_locks WHERE starts_with(name, $1) OR name = ANY($2)`
		waitQ = `SELECT name, count(*)::text FROM dblock_waiters
		         WHERE starts_with(name, $1) OR name = ANY($2) GROUP BY name`
		args = []any{e.Prefix, names}
	default:
		where := `LEFT(name, ?) = ?`
		args = []any{len(e.Prefix), []byte(e.Prefix)}
		if len(names) > 0 {
			where += ` OR name IN (` + strings.TrimSuffix(strings.Repeat("?, ", len(names)), ", ") + `)`
			for _, n := range names {
				args = append(args, []byte(n))
			}
		}
		lockQ = `SELECT name, CONCAT_WS('|', token, stripe, owner_host, HEX(owner_id), hold_count, note,
		             acquired_at, min_hold_until, expires_at)
		         FROM dblock_locks WHERE ` + where
		waitQ = `SELECT name, COUNT(*) FROM dblock_waiters WHERE ` + where + ` GROUP BY name`
	}
	var s hostile.Snapshot
	// A waiter "row" is the number of rows of a name: GROUP BY leaves out
	// names without any, so a missing row is a count of 0.
	for table, q := range map[string]string{"dblock_locks": lockQ, "dblock_waiters": waitQ} {
		rows, err := e.Target.DB.QueryContext(ctx, q, args...)
		if err != nil {
			e.T.Fatalf("snapshot of %s: %v", table, err)
		}
		got := map[string]string{}
		for rows.Next() {
			var name, row []byte
			if err := rows.Scan(&name, &row); err != nil {
				e.T.Fatalf("snapshot of %s: %v", table, err)
			}
			got[string(name)] = string(row)
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			e.T.Fatalf("snapshot of %s: %v", table, err)
		}
		s.AddRows(table, got)
	}
	return s
}

// expire moves name's lease into the past by the database clock.
func expire(e *hostile.Env, name string) {
	e.T.Helper()
	q := `UPDATE dblock_locks SET expires_at = clock_timestamp() - interval '1 second' WHERE name = $1`
	if e.Target.Dialect == dblock.MySQL {
		q = `UPDATE dblock_locks SET expires_at = UTC_TIMESTAMP(6) - INTERVAL 1 SECOND WHERE name = ?`
	}
	if _, err := e.Target.DB.ExecContext(e.T.Context(), q, name); err != nil {
		e.T.Fatalf("arrange: expire %q: %v", name, err)
	}
}

// hostileEmptyDB returns a pool whose default schema (PostgreSQL) or
// database (MySQL) has none of sqllock's tables.
func hostileEmptyDB(t *testing.T, tg testdb.Target) *sql.DB {
	t.Helper()
	const empty = "sqllock_hostile_empty"
	switch tg.Dialect {
	case dblock.Postgres:
		if _, err := tg.DB.ExecContext(t.Context(), `CREATE SCHEMA IF NOT EXISTS `+empty); err != nil {
			t.Fatal(err)
		}
		sep := "?"
		if strings.Contains(tg.DSN, "?") {
			sep = "&"
		}
		return testdb.Open(t, tg, tg.DSN+sep+"search_path="+empty)
	default:
		if _, err := tg.DB.ExecContext(t.Context(), `CREATE DATABASE IF NOT EXISTS `+empty); err != nil {
			t.Fatal(err)
		}
		slash := strings.LastIndex(tg.DSN, "/")
		params := ""
		if q := strings.Index(tg.DSN[slash:], "?"); q >= 0 {
			params = tg.DSN[slash+q:]
		}
		return testdb.Open(t, tg, tg.DSN[:slash+1]+empty+params)
	}
}

// TestHostileInput runs the dblock contract's hostile inputs
// (hostile.ContractCases) and rowlock's own: fair queueing, fencing
// checks, takeovers, Sweep, Waiters and a closed Locker.
func TestHostileInput(t *testing.T) {
	var nilCtx context.Context // a nil interface, as a caller's bug passes it
	kit := hostile.Kit[rowlock.Option]{
		New: func(_ *hostile.Env, db *sql.DB, opts ...rowlock.Option) (dblock.Locker, error) {
			l, err := rowlock.New(db, opts...)
			if l == nil {
				return nil, err // not a typed nil inside the interface
			}
			return l, err
		},
		WithDialect:  rowlock.WithDialect,
		WithLogger:   rowlock.WithLogger,
		DefaultTable: "dblock_locks",
	}
	// takenOver lets another owner take the lock over after its lease
	// lapsed, as after a long pause of the holder.
	takenOver := func(e *hostile.Env, k dblock.Lock) {
		expire(e, k.Name())
		e.Hold(k.Name())
	}
	// checkHeld runs CheckHeld in a transaction of the case's pool.
	checkHeld := func(e *hostile.Env, k dblock.Lock, ctx context.Context) error {
		tx, err := e.DB.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		return k.(dblock.Fencer).CheckHeld(ctx, tx)
	}
	own := caseLocker
	closedDB := func(e *hostile.Env) *rowlock.Locker { return locker(e, e.ClosedDB()) }
	emptyDB := func(e *hostile.Env) *rowlock.Locker { return locker(e, hostileEmptyDB(e.T, e.Target)) }
	closedLocker := func(e *hostile.Env) *rowlock.Locker { l := locker(e, e.DB); _ = l.Close(); return l }
	// tryOn and acquireOn take rowlock's Locker, for WithLocker's L.
	tryOn := func(l *rowlock.Locker, name string, ctx context.Context) error { return hostile.TryOn(l, name, ctx) }
	acquireOn := func(opts ...dblock.Option) func(l *rowlock.Locker, name string, ctx context.Context) error {
		return func(l *rowlock.Locker, name string, ctx context.Context) error {
			return hostile.AcquireOn(opts...)(l, name, ctx)
		}
	}
	waitersOn := func(l *rowlock.Locker, name string, ctx context.Context) error {
		_, err := l.Waiters(ctx, name)
		return err
	}
	sweepOn := func(l *rowlock.Locker, _ string, ctx context.Context) error {
		// A grace no row of any test reaches: a sweep that runs deletes
		// nothing.
		_, _, err := l.Sweep(ctx, 1000*time.Hour, 1, "")
		return err
	}
	sweep := func(grace time.Duration, limit int, from string) hostile.Arrange {
		return hostile.WithLocker(own, func(l *rowlock.Locker, _ string, ctx context.Context) error {
			_, _, err := l.Sweep(ctx, grace, limit, from)
			return err
		})
	}

	// The calls that look at, count or clean whole tables, with good
	// arguments: a grace no row of any test reaches, so that nothing is
	// deleted when one runs.
	type call = func(l *rowlock.Locker, name string, ctx context.Context) error
	tableCalls := []struct {
		name string
		call call
	}{
		{"Locks", func(l *rowlock.Locker, _ string, ctx context.Context) error {
			_, err := l.Locks(ctx, 10)
			return err
		}},
		{"Held", func(l *rowlock.Locker, name string, ctx context.Context) error {
			_, _, err := l.Held(ctx, name)
			return err
		}},
		{"AllWaiters", func(l *rowlock.Locker, _ string, ctx context.Context) error {
			_, err := l.AllWaiters(ctx, 10)
			return err
		}},
		{"Lapsed", func(l *rowlock.Locker, _ string, ctx context.Context) error {
			_, _, err := l.Lapsed(ctx)
			return err
		}},
		{"DeleteDeadWaiters", func(l *rowlock.Locker, _ string, ctx context.Context) error {
			_, err := l.DeleteDeadWaiters(ctx, 1000*time.Hour, 1)
			return err
		}},
	}
	var tableCases []hostile.Case
	for _, c := range tableCalls {
		withCtx := func(mk func(context.Context) context.Context) call {
			return func(l *rowlock.Locker, name string, ctx context.Context) error { return c.call(l, name, mk(ctx)) }
		}
		tableCases = append(tableCases,
			hostile.Case{Name: "nil context, " + c.name, Want: []error{dblock.ErrInvalidOption},
				Arrange: hostile.WithLocker(own, withCtx(hostile.NilContext))},
			hostile.Case{Name: "canceled context, " + c.name, Want: []error{context.Canceled},
				Arrange: hostile.WithLocker(own, withCtx(hostile.Canceled))},
			hostile.Case{Name: "missing tables, " + c.name, Want: []error{dblock.ErrSchemaMissing}, Msg: "migrations.Up",
				Arrange: hostile.WithLocker(emptyDB, c.call)},
			hostile.Case{Name: "closed *sql.DB, " + c.name, Want: []error{dblock.ErrInvalidDB},
				Arrange: hostile.WithLocker(closedDB, c.call)},
		)
	}
	invalid := func(c call) hostile.Arrange { return hostile.WithLocker(own, c) }
	tableCases = append(tableCases, []hostile.Case{
		{Name: "Locks with limit 0", Want: []error{dblock.ErrInvalidOption},
			Arrange: invalid(func(l *rowlock.Locker, _ string, ctx context.Context) error { _, err := l.Locks(ctx, 0); return err })},
		{Name: "AllWaiters with a negative limit", Want: []error{dblock.ErrInvalidOption},
			Arrange: invalid(func(l *rowlock.Locker, _ string, ctx context.Context) error {
				_, err := l.AllWaiters(ctx, math.MinInt)
				return err
			})},
		{Name: "Held of the empty name", Want: []error{dblock.ErrInvalidName},
			Arrange: invalid(func(l *rowlock.Locker, _ string, ctx context.Context) error { _, _, err := l.Held(ctx, ""); return err })},
		{Name: "Held of a name of 10 MB", Want: []error{dblock.ErrInvalidName},
			Arrange: invalid(func(l *rowlock.Locker, name string, ctx context.Context) error {
				_, _, err := l.Held(ctx, name+hostile.TenMB())
				return err
			})},
		{Name: "DeleteDeadWaiters with a negative grace", Want: []error{dblock.ErrInvalidOption},
			Arrange: invalid(func(l *rowlock.Locker, _ string, ctx context.Context) error {
				_, err := l.DeleteDeadWaiters(ctx, -time.Second, 1)
				return err
			})},
		{Name: "DeleteDeadWaiters with limit 0", Want: []error{dblock.ErrInvalidOption},
			Arrange: invalid(func(l *rowlock.Locker, _ string, ctx context.Context) error {
				_, err := l.DeleteDeadWaiters(ctx, 0, 0)
				return err
			})},
		{Name: "DeleteDeadWaiters with a limit over MaxSweepBatch", Want: []error{dblock.ErrInvalidOption},
			Arrange: invalid(func(l *rowlock.Locker, _ string, ctx context.Context) error {
				_, err := l.DeleteDeadWaiters(ctx, 0, rowlock.MaxSweepBatch+1)
				return err
			})},
	}...)

	cases := append(hostile.ContractCases(kit), []hostile.Case{
		// Acquisition options.
		{Name: "nil option among good ones, Acquire", Want: []error{dblock.ErrInvalidOption},
			Arrange: hostile.Acquire(hostile.Named("x"), dblock.TTL(time.Second), nil, dblock.Fair())},
		{Name: "longest TTL is accepted", Arrange: func(e *hostile.Env) func(context.Context) error {
			name := e.N("x")
			e.MayWrite(name)
			return func(ctx context.Context) error {
				k, err := e.L.TryAcquire(ctx, name, dblock.TTL(math.MaxInt64))
				if err != nil {
					return err
				}
				return k.Release(ctx)
			}
		}},

		// Contexts.
		{Name: "nil context, CheckHeld", Want: []error{dblock.ErrInvalidOption},
			Arrange: hostile.OnHeld(hostile.StillHeld, func(e *hostile.Env, k dblock.Lock, ctx context.Context) error {
				tx, err := e.DB.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				defer tx.Rollback()
				return k.(dblock.Fencer).CheckHeld(nilCtx, tx)
			})},
		{Name: "nil context, Waiters", Want: []error{dblock.ErrInvalidOption},
			Arrange: hostile.WithLocker(own, func(l *rowlock.Locker, name string, _ context.Context) error {
				return waitersOn(l, name, nilCtx)
			})},
		{Name: "nil context, Sweep", Want: []error{dblock.ErrInvalidOption},
			Arrange: hostile.WithLocker(own, func(l *rowlock.Locker, name string, _ context.Context) error {
				return sweepOn(l, name, nilCtx)
			})},
		{Name: "canceled context, fair Acquire", Want: []error{dblock.ErrNotAcquired, context.Canceled},
			Arrange: hostile.WithCtx(hostile.Canceled, hostile.Acquire(hostile.Named("x"), dblock.Fair()))},
		{Name: "canceled context on a held lock, fair Acquire", Want: []error{dblock.ErrNotAcquired, context.Canceled},
			Arrange: hostile.OnHeld(nil, func(e *hostile.Env, k dblock.Lock, ctx context.Context) error {
				return hostile.Acquire(hostile.Global(k.Name()), dblock.Fair())(e)(hostile.Canceled(ctx))
			})},
		{Name: "deadline passes while queued, fair Acquire leaves no waiter", Want: []error{dblock.ErrNotAcquired, context.DeadlineExceeded},
			Arrange: hostile.OnHeld(nil, func(e *hostile.Env, k dblock.Lock, ctx context.Context) error {
				ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				defer cancel()
				return hostile.GotLock(e.L.Acquire(ctx, k.Name(), dblock.Fair()))
			})},
		{Name: "canceled context, Waiters", Want: []error{context.Canceled},
			Arrange: hostile.WithLocker(own, func(l *rowlock.Locker, name string, ctx context.Context) error {
				return waitersOn(l, name, hostile.Canceled(ctx))
			})},

		// Database handles and Locker options.
		{Name: "New with a zero waiter TTL", Want: []error{dblock.ErrInvalidOption},
			Arrange: hostile.NewWith(kit, hostile.SharedDB, rowlock.WithWaiterTTL(0))},
		{Name: "closed *sql.DB, fair Acquire", Want: []error{dblock.ErrInvalidDB}, Arrange: hostile.WithLocker(closedDB, acquireOn(dblock.Fair()))},
		{Name: "closed *sql.DB, Waiters", Want: []error{dblock.ErrInvalidDB}, Arrange: hostile.WithLocker(closedDB, waitersOn)},
		{Name: "closed *sql.DB, Sweep", Want: []error{dblock.ErrInvalidDB}, Arrange: hostile.WithLocker(closedDB, sweepOn)},
		{Name: "closed *sql.DB, Release and Refresh", Want: []error{dblock.ErrInvalidDB},
			Arrange: func(e *hostile.Env) func(context.Context) error {
				db := testdb.Open(e.T, e.Target, e.Target.DSN)
				l := locker(e, db)
				name := e.N("held")
				k, err := l.TryAcquire(e.T.Context(), name)
				if err != nil {
					e.T.Fatalf("arrange: %v", err)
				}
				e.Watch(name)
				_ = db.Close()
				e.T.Cleanup(func() { _ = k.Release(context.Background()) })
				return func(ctx context.Context) error {
					refreshErr := k.Refresh(ctx)
					if !errors.Is(refreshErr, dblock.ErrInvalidDB) {
						return fmt.Errorf("Refresh: %w", refreshErr)
					}
					return k.Release(ctx)
				}
			}},
		{Name: "wrong dialect, TryAcquire", Want: []error{dblock.ErrUnknownDialect},
			Arrange: func(e *hostile.Env) func(context.Context) error {
				// Built outside New's check, should New let it through.
				other := rowlock.WithDialect(hostile.OtherDialect(e.Target.Dialect))
				return hostile.NewWith(kit, hostile.SharedDB, other, rowlock.WithListen(false))(e)
			}},

		// Missing tables.
		{Name: "missing tables, TryAcquire", Want: []error{dblock.ErrSchemaMissing}, Msg: "migrations.Up", Arrange: hostile.WithLocker(emptyDB, tryOn)},
		{Name: "missing tables, fair Acquire", Want: []error{dblock.ErrSchemaMissing}, Msg: "migrations.Up",
			Arrange: hostile.WithLocker(emptyDB, acquireOn(dblock.Fair()))},
		{Name: "missing tables, Waiters", Want: []error{dblock.ErrSchemaMissing}, Msg: "migrations.Up", Arrange: hostile.WithLocker(emptyDB, waitersOn)},
		{Name: "missing tables, Sweep", Want: []error{dblock.ErrSchemaMissing}, Msg: "migrations.Up", Arrange: hostile.WithLocker(emptyDB, sweepOn)},

		// Lock handles.
		{Name: "CheckHeld after Release", Want: []error{dblock.ErrLockLost}, Arrange: hostile.OnHeld(hostile.Released, checkHeld)},
		{Name: "Release by a former holder after a takeover", Want: []error{dblock.ErrLockLost},
			Arrange: hostile.OnHeld(takenOver, func(_ *hostile.Env, k dblock.Lock, ctx context.Context) error { return k.Release(ctx) })},
		{Name: "Refresh by a former holder after a takeover", Want: []error{dblock.ErrLockLost},
			Arrange: hostile.OnHeld(takenOver, func(_ *hostile.Env, k dblock.Lock, ctx context.Context) error { return k.Refresh(ctx) })},
		{Name: "CheckHeld by a former holder after a takeover", Want: []error{dblock.ErrLockLost}, Arrange: hostile.OnHeld(takenOver, checkHeld)},
		{Name: "CheckHeld with a nil tx", Want: []error{dblock.ErrInvalidOption},
			Arrange: hostile.OnHeld(hostile.StillHeld, func(_ *hostile.Env, k dblock.Lock, ctx context.Context) error {
				return k.(dblock.Fencer).CheckHeld(ctx, nil)
			})},
		{Name: "CheckHeld with a finished tx", Want: []error{sql.ErrTxDone},
			Arrange: hostile.OnHeld(hostile.StillHeld, func(e *hostile.Env, k dblock.Lock, ctx context.Context) error {
				tx, err := e.DB.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				if err := tx.Rollback(); err != nil {
					return err
				}
				return k.(dblock.Fencer).CheckHeld(ctx, tx)
			})},
		{Name: "Sweep with a negative grace", Want: []error{dblock.ErrInvalidOption}, Arrange: sweep(-time.Second, 1, "")},
		{Name: "Sweep with limit 0", Want: []error{dblock.ErrInvalidOption}, Arrange: sweep(0, 0, "")},
		{Name: "Sweep with a negative limit", Want: []error{dblock.ErrInvalidOption}, Arrange: sweep(0, math.MinInt, "")},
		{Name: "Sweep from a position no name can have", Want: []error{dblock.ErrInvalidOption},
			Arrange: sweep(0, 1, strings.Repeat("z", dblock.MaxNameLength+1))},
		{Name: "Sweep with a limit over MaxSweepBatch", Want: []error{dblock.ErrInvalidOption}, Arrange: sweep(0, rowlock.MaxSweepBatch+1, "")},

		// A closed Locker.
		{Name: "closed Locker, TryAcquire", Want: []error{dblock.ErrClosed}, Arrange: hostile.WithLocker(closedLocker, tryOn)},
		{Name: "closed Locker, fair Acquire", Want: []error{dblock.ErrClosed}, Arrange: hostile.WithLocker(closedLocker, acquireOn(dblock.Fair()))},
		{Name: "closed twice, Acquire", Want: []error{dblock.ErrClosed},
			Arrange: hostile.WithLocker(func(e *hostile.Env) *rowlock.Locker {
				l := locker(e, e.DB)
				_, _ = l.Close(), l.Close()
				return l
			}, acquireOn())},

		// Waiters.
		{Name: "Waiters of the empty name", Want: []error{dblock.ErrInvalidName},
			Arrange: hostile.WithLocker(own, func(l *rowlock.Locker, _ string, ctx context.Context) error { return waitersOn(l, "", ctx) })},
		{Name: "Waiters of a name not UTF-8", Want: []error{dblock.ErrInvalidName},
			Arrange: hostile.WithLocker(own, func(l *rowlock.Locker, name string, ctx context.Context) error { return waitersOn(l, name+"\xff", ctx) })},
		{Name: "Waiters of a name of 10 MB", Want: []error{dblock.ErrInvalidName},
			Arrange: hostile.WithLocker(own, func(l *rowlock.Locker, name string, ctx context.Context) error {
				return waitersOn(l, name+hostile.TenMB(), ctx)
			})},
	}...)
	cases = append(cases, tableCases...)

	hostile.Run(t, testdb.Targets(t), func(*testing.T, testdb.Target) hostile.Backend { return rowlockBackend{} }, cases)
}
