package rowlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// TestKindsLostBeforeReturned: an acquisition that runs a statement after
// taking its row (a fair waiter leaving the queue, a semaphore's limit
// check, a reader's look at the writer row) must not return the hold if that statement stalled until the row's
// lease was gone, as when a Galera node is paused mid-acquisition: the
// Galera suite saw a permit of token 6 returned after token 8 of the same
// slot had been taken on another node. Here the proxy holds the statement
// back while the row is revoked; the hold is lost before Acquire returns,
// and Acquire must say so (ErrLockLost) and hold nothing.
func TestKindsLostBeforeReturned(t *testing.T) {
	var fairHolders sync.Map // name -> the lock the fair waiter waits for
	const ttl = time.Second
	kinds := []struct {
		kind string
		// stalled is a piece of the statement after the take, per dialect.
		stalled map[dblock.Dialect]string
		acquire func(ctx context.Context, l *rowlock.Locker, name string) (dblock.Lock, error)
		// rows are the rows the hold may have taken.
		rows func(name string) []string
		// started, if set, runs once the acquisition has started, and
		// returns once it may go on to its take.
		started func(t *testing.T, ctx context.Context, tg testdb.Target, name string)
		// before, if set, runs before the acquisition starts.
		before func(t *testing.T, ctx context.Context, tg testdb.Target, name string)
	}{
		{
			// A fair waiter leaves the queue after its take.
			kind:    "fair",
			stalled: map[dblock.Dialect]string{dblock.Postgres: "dblock_waiters WHERE id = $1", dblock.MySQL: "dblock_waiters WHERE id = ?"},
			acquire: func(ctx context.Context, l *rowlock.Locker, name string) (dblock.Lock, error) {
				return l.Acquire(ctx, name, dblock.TTL(ttl), dblock.Fair())
			},
			rows: func(name string) []string { return []string{name} },
			before: func(t *testing.T, ctx context.Context, tg testdb.Target, name string) {
				holder := newLocker(t, tg.DB)
				k := mustTry(t, holder, name)
				fairHolders.Store(name, k)
			},
			started: func(t *testing.T, ctx context.Context, tg testdb.Target, name string) {
				waitQueued(t, newLocker(t, tg.DB), name, 1)
				k, _ := fairHolders.Load(name)
				release(t, k.(dblock.Lock))
			},
		},
		{
			kind:    "semaphore",
			stalled: map[dblock.Dialect]string{dblock.Postgres: "WHERE name = $1 FOR SHARE", dblock.MySQL: "WHERE name = ? LOCK IN SHARE MODE"},
			acquire: func(ctx context.Context, l *rowlock.Locker, name string) (dblock.Lock, error) {
				s, err := l.Semaphore(2)
				if err != nil {
					return nil, err
				}
				return s.Acquire(ctx, name, dblock.TTL(ttl))
			},
			rows: func(name string) []string { return []string{slotRow(name, 0), slotRow(name, 1)} },
		},
		{
			kind:    "reader",
			stalled: map[dblock.Dialect]string{dblock.Postgres: "f ON f.stripe = $2", dblock.MySQL: "f ON f.stripe = ?"},
			acquire: func(ctx context.Context, l *rowlock.Locker, name string) (dblock.Lock, error) {
				return l.Readers().Acquire(ctx, name, dblock.TTL(ttl))
			},
			rows: func(name string) []string {
				rows := make([]string, 64)
				for i := range rows {
					rows[i] = readerRowOf(name, i)
				}
				return rows
			},
		},
	}
	for _, tg := range testdb.Targets(t) {
		if tg.Dialect == dblock.SQLite {
			continue // no lock kinds
		}
		for _, kc := range kinds {
			t.Run(tg.Name+"/"+kc.kind, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
				defer cancel()
				proxy := testdb.NewProxy(t, tg.HostPort())
				db := testdb.Open(t, tg, plainDSNVia(t, tg, proxy.Addr()))
				l := newLocker(t, db, rowlock.WithCrashGrace(0))
				admin := newLocker(t, tg.DB)
				name := testdb.Name(t)
				if kc.before != nil {
					kc.before(t, ctx, tg, name)
				}
				caught, resume := proxy.StallOn([]byte(kc.stalled[tg.Dialect]))
				defer resume()
				got := make(chan acquired, 1)
				go func() {
					k, err := kc.acquire(ctx, l, name)
					got <- acquired{k, err}
				}()
				if kc.started != nil {
					kc.started(t, ctx, tg, name)
				}
				select {
				case <-caught:
				case r := <-got:
					t.Fatalf("the statement after the take never reached the proxy: Acquire = %v, %v", r.lock, r.err)
				case <-ctx.Done():
					t.Fatal("the statement after the take never reached the proxy")
				}
				revoked := 0
				for _, row := range kc.rows(name) {
					ok, err := admin.Revoke(ctx, row)
					if err != nil {
						t.Fatal(err)
					}
					if ok {
						revoked++
					}
				}
				if revoked != 1 {
					t.Fatalf("revoked %d rows of %q, want the one the stalled acquisition took", revoked, name)
				}
				// No renewal succeeds after Revoke, so one TTL later the
				// hold's deadline (its last renewal plus less than a TTL)
				// has passed, whatever the renewals did meanwhile.
				time.Sleep(ttl)
				resume()
				r := <-got
				if r.err == nil {
					defer func() { _ = r.lock.Release(context.Background()) }()
					t.Fatalf("Acquire returned a hold lost before it returned (Err %v)", r.lock.Err())
				}
				if !errors.Is(r.err, dblock.ErrLockLost) {
					t.Fatalf("Acquire = %v, want ErrLockLost", r.err)
				}
				// Nothing is held: another Locker takes the lock at once.
				other, err := kc.acquire(ctx, newLocker(t, tg.DB), name)
				if err != nil {
					t.Fatalf("after the lost acquisition: %v", err)
				}
				release(t, other)
			})
		}
	}
}
