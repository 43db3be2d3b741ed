package forupdate_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/testdb"
)

// TestPgBouncerHammer: through PgBouncer in transaction pooling mode, with
// pgx's default DSN (named prepared statements), Lockers standing for
// separate processes take one name in turn, waiting in the database or
// retrying TryAcquire; each hold is refreshed, works in its Tx, and is
// released, while the ledger checks one holder at a time and growing
// tokens.
func TestPgBouncerHammer(t *testing.T) {
	if testdb.LeftOut(t, "postgres") {
		return
	}
	tg := testdb.PgBouncer(t)
	const lockers, goroutines, rounds = 3, 4, 6
	name := testdb.Name(t)
	var ledger testdb.Ledger
	var wg sync.WaitGroup
	errs := make(chan error, lockers*goroutines)
	for i := range lockers {
		l := newLocker(t, tg.DB)
		for j := range goroutines {
			who := fmt.Sprintf("locker %d goroutine %d", i, j)
			try := j%2 == 1
			wg.Go(func() {
				for round := range rounds {
					if err := holdOnce(t.Context(), l, name, who, try, &ledger); err != nil {
						errs <- fmt.Errorf("%s, round %d: %w", who, round, err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n, want := ledger.Entries(), lockers*goroutines*rounds; !t.Failed() && n != want {
		t.Fatalf("%d holds recorded, want %d", n, want)
	}
}

// holdOnce takes name (Acquire, or TryAcquire until it succeeds), records
// the hold in the ledger, refreshes it, works in its transaction, and
// releases it.
func holdOnce(ctx context.Context, l *forupdate.Locker, name, who string, try bool, ledger *testdb.Ledger) error {
	// A bound against hangs, not a timing assertion.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var k dblock.Lock
	var err error
	for {
		if try {
			k, err = l.TryAcquire(ctx, name)
		} else {
			k, err = l.Acquire(ctx, name)
		}
		if !try || !errors.Is(err, dblock.ErrNotAcquired) || ctx.Err() != nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	if err := ledger.Enter(who, k.Token()); err != nil {
		_ = k.Release(context.Background())
		return err
	}
	work := func() error {
		if err := k.Refresh(ctx); err != nil {
			return fmt.Errorf("Refresh: %w", err)
		}
		if err := inLockTx(ctx, k.(*forupdate.Lock), name); err != nil {
			return err
		}
		if err := k.Err(); err != nil {
			return fmt.Errorf("Err while held: %w", err)
		}
		return nil
	}
	werr := work()
	if err := ledger.Leave(who); err != nil {
		werr = errors.Join(werr, err)
	}
	if err := k.Release(ctx); err != nil {
		werr = errors.Join(werr, fmt.Errorf("Release: %w", err))
	}
	return werr
}

// inLockTx locks the lock's row again in the lock's transaction, without
// waiting: that succeeds only in the transaction holding the row lock, so
// Tx's statements run in the server session that holds the lock, pinned
// by the pooler for the transaction. The user's own statements pass a
// mode that works through a pooler, as users' must.
func inLockTx(ctx context.Context, k *forupdate.Lock, name string) error {
	var got string
	err := k.Tx().QueryRowContext(ctx, `SELECT name FROM `+forupdate.DefaultTable+` WHERE name = $1 FOR UPDATE NOWAIT`,
		pgx.QueryExecModeSimpleProtocol, name).Scan(&got)
	if err != nil || got != name {
		return fmt.Errorf("the row again, in Tx: %q, %v", got, err)
	}
	return nil
}

// TestPgBouncerPings: through PgBouncer, the holder's pings keep its
// session from the server's idle timeout (the TTL) well past the TTL:
// another Locker cannot take the lock, and the holder's transaction still
// holds it. Without pings the server would have ended the session.
func TestPgBouncerPings(t *testing.T) {
	if testdb.LeftOut(t, "postgres") {
		return
	}
	tg := testdb.PgBouncer(t)
	holder, other := newLocker(t, tg.DB), newLocker(t, tg.DB)
	name := testdb.Name(t)
	const ttl = time.Second
	// A context that cannot be canceled: the lock's statement runs
	// through database/sql in the transaction, not pgx itself (the
	// hammer's contexts can be).
	k := acquire(t, context.Background(), holder, name, dblock.TTL(ttl))
	defer release(t, k)
	// Three TTLs, about nine pings.
	time.Sleep(3 * ttl)
	if err := k.Err(); err != nil {
		t.Fatalf("Err after 3 TTLs: %v", err)
	}
	if _, err := other.TryAcquire(t.Context(), name); !errors.Is(err, dblock.ErrNotAcquired) {
		t.Fatalf("another Locker's TryAcquire of a held lock = %v, want ErrNotAcquired", err)
	}
	if err := inLockTx(t.Context(), k, name); err != nil {
		t.Fatal(err)
	}
}

// TestKindsPgBouncer: through PgBouncer in transaction pooling mode, with
// pgx's default DSN, a semaphore of two admits at most two holders at once
// among goroutines of two Lockers that wait for permits, with growing
// tokens per slot, and readers and writers exclude one another.
func TestKindsPgBouncer(t *testing.T) {
	if testdb.LeftOut(t, "postgres") {
		return
	}
	tg := testdb.PgBouncer(t)
	hammerSemaphore(t, tg, 2, 4, 3)

	ctx := t.Context()
	name := testdb.Name(t)
	l := newLocker(t, tg.DB)
	r, err := try(ctx, l.Readers(), name)
	if err != nil {
		t.Fatalf("reader: %v", err)
	}
	if _, err := try(ctx, newLocker(t, tg.DB).Writers(), name); !errors.Is(err, dblock.ErrNotAcquired) {
		t.Errorf("writer while a reader holds: %v, want ErrNotAcquired", err)
	}
	release(t, r)
	w, err := try(ctx, l.Writers(), name)
	if err != nil {
		t.Fatalf("writer after the reader left: %v", err)
	}
	release(t, w)
}
