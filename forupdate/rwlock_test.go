package forupdate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/dblocktest"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/testdb"
)

// try takes name through side for the owner in ctx (a fresh one if none).
func try(ctx context.Context, side dblock.Locker, name string) (*forupdate.Lock, error) {
	return tryAs[*forupdate.Lock](ctx, side, name)
}

// tryAs is TryAcquire through l, whose locks are T.
func tryAs[T dblock.Lock](ctx context.Context, l dblock.Locker, name string) (T, error) {
	k, err := l.TryAcquire(ctx, name)
	if err != nil {
		var none T
		return none, err
	}
	return k.(T), nil
}

// TestRWSharing: readers share a name and keep writers out; a writer keeps
// readers and other writers out; the names are not plain locks' names.
func TestRWSharing(t *testing.T) {
	for _, src := range tokenSources(t) {
		t.Run(src.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			l := src.locker(t, src.target.DB)
			name := testdb.Name(t)
			r1, err := try(ctx, l.Readers(), name)
			if err != nil {
				t.Fatalf("first reader: %v", err)
			}
			r2, err := try(ctx, l.Readers(), name)
			if err != nil {
				t.Fatalf("second reader beside the first: %v", err)
			}
			if r1.Name() != name {
				t.Errorf("Name() = %q, want %q", r1.Name(), name)
			}
			if _, err := try(ctx, l.Writers(), name); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("writer while readers hold: %v, want ErrNotAcquired", err)
			}
			plain, err := l.TryAcquire(ctx, name)
			if err != nil {
				t.Fatalf("plain lock of the same name while readers hold: %v", err)
			}
			release(t, plain)
			release(t, r1)
			release(t, r2)
			w, err := try(ctx, l.Writers(), name)
			if err != nil {
				t.Fatalf("writer once the readers left: %v", err)
			}
			if _, err := try(ctx, l.Readers(), name); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Errorf("reader while a writer holds: %v, want ErrNotAcquired", err)
			}
			if _, err := try(ctx, l.Writers(), name); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Errorf("second writer: %v, want ErrNotAcquired", err)
			}
			release(t, w)
		})
	}
}

// TestRWReentry: a writer may read (re-entering its hold) and write again;
// a reader may read again; a reader asking to write gets ErrUpgrade at
// once, by TryAcquire and Acquire, and holds nothing more.
func TestRWReentry(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			l := newLocker(t, tg.DB)
			name := testdb.Name(t)
			w, err := try(ctx, l.Writers(), name)
			if err != nil {
				t.Fatal(err)
			}
			for _, side := range []dblock.Locker{l.Readers(), l.Writers()} {
				k, err := side.Acquire(w.Context(), name)
				if err != nil {
					t.Fatalf("writer re-entering: %v", err)
				}
				in := k.(*forupdate.Lock)
				if in.Tx() != w.Tx() || in.Token() != w.Token() {
					t.Errorf("re-entry has token %d, want the write hold's %d and its Tx", in.Token(), w.Token())
				}
				release(t, in)
			}
			if _, err := try(ctx, newLocker(t, tg.DB).Readers(), name); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Errorf("reader of another Locker while the write hold remains: %v", err)
			}
			release(t, w)

			r, err := try(ctx, l.Readers(), name)
			if err != nil {
				t.Fatal(err)
			}
			again, err := l.Readers().Acquire(r.Context(), name)
			if err != nil {
				t.Fatalf("reader reading again: %v", err)
			}
			release(t, again)
			if _, err := l.Writers().TryAcquire(r.Context(), name); !errors.Is(err, dblock.ErrUpgrade) {
				t.Errorf("reader TryAcquire-ing the write lock: %v, want ErrUpgrade", err)
			}
			wctx, cancel := context.WithTimeout(r.Context(), time.Minute)
			defer cancel()
			if _, err := l.Writers().Acquire(wctx, name); !errors.Is(err, dblock.ErrUpgrade) {
				t.Errorf("reader Acquire-ing the write lock: %v, want ErrUpgrade", err)
			}
			// Nothing more is held: another reader comes in, and once the
			// reader leaves a writer does.
			other, err := try(ctx, newLocker(t, tg.DB).Readers(), name)
			if err != nil {
				t.Fatalf("another reader: %v", err)
			}
			release(t, other)
			release(t, r)
			w2, err := try(ctx, newLocker(t, tg.DB).Writers(), name)
			if err != nil {
				t.Fatalf("writer after the reader left: %v", err)
			}
			release(t, w2)
		})
	}
}

// TestRWTokens: a writer's token is above every token handed out for the
// name before it, readers' and writers'.
func TestRWTokens(t *testing.T) {
	for _, src := range tokenSources(t) {
		t.Run(src.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			l := src.locker(t, src.target.DB)
			name := testdb.Name(t)
			var highest int64
			for round := range 3 {
				var readers []*forupdate.Lock
				for range 2 {
					r, err := try(ctx, l.Readers(), name)
					if err != nil {
						t.Fatal(err)
					}
					if r.Token() < highest {
						t.Errorf("round %d: reader's token %d below the last writer's %d", round, r.Token(), highest)
					}
					readers = append(readers, r)
				}
				for _, r := range readers {
					highest = max(highest, r.Token())
					release(t, r)
				}
				w, err := try(ctx, l.Writers(), name)
				if err != nil {
					t.Fatal(err)
				}
				if w.Token() <= highest {
					t.Errorf("round %d: writer's token %d, not above %d", round, w.Token(), highest)
				}
				highest = w.Token()
				release(t, w)
			}
		})
	}
}

// TestRWQueuePolicy pins what the package doc says of writers waiting
// behind readers: InnoDB queues a new reader behind a waiting writer;
// PostgreSQL lets it in.
func TestRWQueuePolicy(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			name := testdb.Name(t)
			l := newLocker(t, tg.DB)
			r, err := try(ctx, l.Readers(), name)
			if err != nil {
				t.Fatal(err)
			}
			writerDB := singleConnDB(t, tg)
			session := sessionID(t, tg, writerDB)
			wl := newLocker(t, writerDB)
			got := make(chan error, 1)
			var w dblock.Lock
			go func() {
				var err error
				w, err = wl.Writers().Acquire(ctx, name)
				got <- err
			}()
			waitForState(t, tg, session, "waiting")
			late, err := try(ctx, l.Readers(), name)
			switch {
			case tg.Dialect == dblock.Postgres && err != nil:
				t.Errorf("PostgreSQL: a reader arriving while a writer waits: %v, want it let in", err)
			case tg.Dialect == dblock.MySQL && !errors.Is(err, dblock.ErrNotAcquired):
				t.Errorf("InnoDB: a reader arriving while a writer waits: %v, want ErrNotAcquired", err)
			}
			if late != nil {
				release(t, late)
			}
			release(t, r)
			select {
			case err := <-got:
				if err != nil {
					t.Fatalf("writer after the readers left: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("writer did not get the lock after the readers left")
			}
			release(t, w)
		})
	}
}

// TestRWConformance runs dblock's conformance suite on the write side,
// which is a mutex.
func TestRWConformance(t *testing.T) {
	for _, src := range tokenSources(t) {
		t.Run(src.name, func(t *testing.T) {
			dblocktest.TestLocker(t, dblocktest.Harness{
				New:  func(t *testing.T) dblock.Locker { return src.locker(t, src.target.DB).Writers() },
				Lose: func(t *testing.T, k dblock.Lock) { killSession(t, src.target, k.(*forupdate.Lock)) },
			})
		})
	}
}

// TestKilledReaderFreesWriterAtOnce: a writer waiting for a reader whose
// connection is killed gets the lock at once.
func TestKilledReaderFreesWriterAtOnce(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			name := testdb.Name(t)
			r, err := try(ctx, newLocker(t, tg.DB).Readers(), name)
			if err != nil {
				t.Fatal(err)
			}
			writerDB := singleConnDB(t, tg)
			session := sessionID(t, tg, writerDB)
			got := acquireAsyncWith(ctx, newLocker(t, writerDB).Writers(), name)
			waitForState(t, tg, session, "waiting")
			killSession(t, tg, r)
			res := await(t, got)
			if res.err != nil {
				t.Fatalf("writer after the reader was killed: %v", res.err)
			}
			if res.lock.Token() <= r.Token() {
				t.Errorf("writer's token %d, not above the reader's %d", res.lock.Token(), r.Token())
			}
			release(t, res.lock)
			<-r.Done()
			if !errors.Is(r.Err(), dblock.ErrLockLost) {
				t.Errorf("killed reader's Err: %v, want ErrLockLost", r.Err())
			}
			_ = r.Release(ctx)
		})
	}
}
