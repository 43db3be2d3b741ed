package readme

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/rowlock"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// TestPgxpool does what the pgxpool section of docs/operations.md (and the
// README's line on pgxpool) says works: a Locker over
// stdlib.OpenDBFromPool, as two replicas each with a pool of its own,
// migrations, exclusion, a waiter, a fenced write, and a pool that stays
// open when its *sql.DB is closed.
func TestPgxpool(t *testing.T) {
	ran := false
	for _, tg := range testdb.Targets(t) {
		if tg.Dialect != dblock.Postgres {
			continue
		}
		ran = true
		ctx := t.Context()
		open := func() (*pgxpool.Pool, *rowlock.Locker) {
			pool, err := pgxpool.New(ctx, tg.DSN)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			db := stdlib.OpenDBFromPool(pool)
			t.Cleanup(func() { _ = db.Close() })
			if err := migrations.Up(ctx, db); err != nil {
				t.Fatalf("migrations.Up over the pool: %v", err)
			}
			locker, err := rowlock.New(db)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = locker.Close() })
			if d, err := lockkit.DetectDialect(db); err != nil || d != dblock.Postgres {
				t.Fatalf("dialect %q, %v over OpenDBFromPool", d, err)
			}
			return pool, locker
		}
		pool, a := open()
		_, b := open()
		name := testdb.Name(t)

		held, err := a.TryAcquire(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.TryAcquire(ctx, name); !errors.Is(err, dblock.ErrNotAcquired) {
			t.Fatalf("second replica's TryAcquire: %v, want ErrNotAcquired", err)
		}
		got := make(chan dblock.Lock, 1)
		go func() {
			k, err := b.Acquire(context.WithoutCancel(ctx), name)
			if err != nil {
				t.Errorf("waiter: %v", err)
			}
			got <- k
		}()
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		k := <-got
		if k == nil {
			t.FailNow()
		}
		if k.Token() <= held.Token() {
			t.Errorf("token %d after %d", k.Token(), held.Token())
		}

		db := stdlib.OpenDBFromPool(pool)
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		fencer, ok := k.(dblock.Fencer)
		if !ok {
			t.Fatalf("%T is not a dblock.Fencer", k)
		}
		if err := fencer.CheckHeld(ctx, tx); err != nil {
			t.Errorf("CheckHeld by the holder over a pool: %v", err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if err := k.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if err := pool.Ping(ctx); err != nil {
			t.Errorf("the pool after its *sql.DB was closed: %v", err)
		}
	}
	if !ran {
		t.Log("PostgreSQL left out (SQLLOCK_TEST_DIALECTS): pgxpool is PostgreSQL's")
	}
}
