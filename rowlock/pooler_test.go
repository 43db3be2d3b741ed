package rowlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// Waiters through a pooler are not woken by NOTIFY (their LISTEN sits on
// a pooled server connection), so the tests' Lockers poll often; none of
// them depends on how soon a waiter learns of a release.
func poolerLocker(t testing.TB, tg testdb.Target) *rowlock.Locker {
	return newLocker(t, tg.DB, rowlock.WithPollInterval(time.Millisecond, 20*time.Millisecond))
}

// TestPgBouncerHammer: through PgBouncer in transaction pooling mode,
// with pgx's default DSN (named prepared statements), Lockers standing for
// separate processes take one name in turn, each hold renewed, checked
// inside a transaction and released, plain and fair, while the ledger
// checks one holder at a time and growing tokens.
func TestPgBouncerHammer(t *testing.T) {
	if testdb.LeftOut(t, "postgres") {
		return
	}
	tg := testdb.PgBouncer(t)
	const lockers, goroutines, rounds = 3, 4, 6
	cases := []struct {
		name string
		opts []dblock.Option
		// try: every other goroutine polls with TryAcquire instead of
		// waiting in Acquire.
		try bool
	}{
		{name: "plain", try: true},
		{name: "fair", opts: []dblock.Option{dblock.Fair()}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			name := testdb.Name(t)
			var ledger testdb.Ledger
			var wg sync.WaitGroup
			errs := make(chan error, lockers*goroutines)
			for i := range lockers {
				l := poolerLocker(t, tg)
				for j := range goroutines {
					who := fmt.Sprintf("locker %d goroutine %d", i, j)
					try := c.try && j%2 == 1
					wg.Go(func() {
						for round := range rounds {
							if err := holdOnce(t.Context(), tg, l, name, who, try, c.opts, &ledger); err != nil {
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
		})
	}
}

// holdOnce takes name (Acquire, or TryAcquire until it succeeds), records
// the hold in the ledger, renews it, proves it in a transaction, and
// releases it.
func holdOnce(ctx context.Context, tg testdb.Target, l *rowlock.Locker, name, who string, try bool, opts []dblock.Option, ledger *testdb.Ledger) error {
	// A bound against hangs, not a timing assertion.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var k dblock.Lock
	var err error
	for {
		if try {
			k, err = l.TryAcquire(ctx, name, opts...)
		} else {
			k, err = l.Acquire(ctx, name, opts...)
		}
		if !try || !errors.Is(err, dblock.ErrNotAcquired) || ctx.Err() != nil {
			break
		}
		sleepBriefly()
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
		tx, err := tg.DB.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		if err := k.(*rowlock.Lock).CheckHeld(ctx, tx); err != nil {
			return fmt.Errorf("CheckHeld: %w", err)
		}
		if err := tx.Commit(); err != nil {
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

// TestPgBouncerRenewal: through PgBouncer, the background renewals keep a
// short lease alive well past its TTL: another Locker cannot take it, and
// the holder's Err stays nil. Without renewals it would have lapsed.
func TestPgBouncerRenewal(t *testing.T) {
	if testdb.LeftOut(t, "postgres") {
		return
	}
	tg := testdb.PgBouncer(t)
	holder, other := poolerLocker(t, tg), poolerLocker(t, tg)
	name := testdb.Name(t)
	const ttl = 600 * time.Millisecond
	// A context that cannot be canceled: the take runs through
	// database/sql, not pgx itself (the hammer's contexts can be).
	k, err := holder.TryAcquire(context.Background(), name, dblock.TTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer release(t, k)
	// Three TTLs, about nine renewals.
	time.Sleep(3 * ttl)
	if err := k.Err(); err != nil {
		t.Fatalf("Err after 3 TTLs: %v", err)
	}
	if _, err := other.TryAcquire(t.Context(), name); !errors.Is(err, dblock.ErrNotAcquired) {
		t.Fatalf("another Locker's TryAcquire of a renewed lock = %v, want ErrNotAcquired", err)
	}
	if h, ok, err := other.Held(t.Context(), name); err != nil || !ok || h.Token != k.Token() {
		t.Fatalf("Held = %+v, %v, %v; want the holder's token %d", h, ok, err, k.Token())
	}
}

// TestPgBouncerListings: through PgBouncer, what `sqllock status` and the
// reaper run (listings, counts, sweeps) works from many goroutines at
// once: each runs its statement on whichever server connection the pooler
// gives it.
func TestPgBouncerListings(t *testing.T) {
	if testdb.LeftOut(t, "postgres") {
		return
	}
	tg := testdb.PgBouncer(t)
	l, waiter := poolerLocker(t, tg), poolerLocker(t, tg)
	name := testdb.Name(t)
	k, err := l.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	defer release(t, k)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	queued := make(chan error, 1)
	go func() {
		_, err := waiter.Acquire(ctx, name, dblock.Fair())
		queued <- err
	}()
	waitQueued(t, l, name, 1)

	// The sweeps' grace is long: other tests' released rows stay.
	const grace = time.Hour
	calls := []struct {
		name string
		run  func(ctx context.Context) error
	}{
		{"Held", func(ctx context.Context) error {
			h, ok, err := l.Held(ctx, name)
			if err == nil && (!ok || h.Token != k.Token()) {
				err = fmt.Errorf("Held = %+v, %v; want token %d", h, ok, k.Token())
			}
			return err
		}},
		{"Waiters", func(ctx context.Context) error {
			ws, err := l.Waiters(ctx, name)
			if err == nil && len(ws) != 1 {
				err = fmt.Errorf("Waiters = %+v, want one", ws)
			}
			return err
		}},
		{"Locks", func(ctx context.Context) error { _, err := l.Locks(ctx, 100); return err }},
		{"AllWaiters", func(ctx context.Context) error { _, err := l.AllWaiters(ctx, 100); return err }},
		{"Lapsed", func(ctx context.Context) error { _, _, err := l.Lapsed(ctx); return err }},
		{"Sweep", func(ctx context.Context) error { _, _, err := l.Sweep(ctx, grace, 100, ""); return err }},
		{"DeleteDeadWaiters", func(ctx context.Context) error { _, err := l.DeleteDeadWaiters(ctx, grace, 100); return err }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			const goroutines, times = 8, 5
			var wg sync.WaitGroup
			errs := make(chan error, goroutines)
			for range goroutines {
				wg.Go(func() {
					for range times {
						if err := c.run(t.Context()); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
	cancel()
	if err := <-queued; !errors.Is(err, context.Canceled) {
		t.Fatalf("the queued Acquire, canceled = %v", err)
	}
}

// TestPgBouncerHeartbeats: through PgBouncer, a fair waiter's heartbeats
// keep its place in the queue for several waiter TTLs (a lapsed waiter is
// no longer listed), and it takes the lock once the holder releases it.
func TestPgBouncerHeartbeats(t *testing.T) {
	if testdb.LeftOut(t, "postgres") {
		return
	}
	tg := testdb.PgBouncer(t)
	const waiterTTL = 300 * time.Millisecond
	holder := poolerLocker(t, tg)
	waiter := newLocker(t, tg.DB, rowlock.WithWaiterTTL(waiterTTL), rowlock.WithPollInterval(time.Millisecond, 20*time.Millisecond))
	name := testdb.Name(t)
	k, err := holder.TryAcquire(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute) // a bound against hangs
	defer cancel()
	got := make(chan error, 1)
	go func() {
		w, err := waiter.Acquire(ctx, name, dblock.Fair())
		if err == nil {
			err = w.Release(context.Background())
		}
		got <- err
	}()
	first := waitQueued(t, holder, name, 1)[0]
	// Three waiter TTLs, about nine heartbeats.
	time.Sleep(3 * waiterTTL)
	if ws, err := holder.Waiters(t.Context(), name); err != nil || len(ws) != 1 || ws[0].ID != first.ID {
		t.Fatalf("Waiters after 3 waiter TTLs = %+v, %v; want the waiter still queued as %d", ws, err, first.ID)
	}
	release(t, k)
	if err := <-got; err != nil {
		t.Fatalf("the fair waiter, after the release: %v", err)
	}
}
