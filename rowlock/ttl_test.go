package rowlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// ttler is a hold that tells its remaining lease.
type ttler interface {
	dblock.Lock
	TTL() time.Duration
}

var (
	_ ttler = (*rowlock.Lock)(nil)
	_ ttler = (*rowlock.Permit)(nil)
	_ ttler = (*rowlock.RWLock)(nil)
	_ ttler = (*rowlock.MultiLock)(nil)
)

// TestTTL: a hold of every kind tells a remaining lease that is positive,
// at most the lease less its safety margin, and never more than the
// database itself still grants the row (read before it, by the database
// clock); 0 once released.
func TestTTL(t *testing.T) {
	const lease = 20 * time.Second
	for _, tg := range testdb.AllTargets(t) {
		for _, kind := range driverKinds {
			if tg.Dialect == dblock.SQLite && !kind.onSQLite {
				continue // the lock kinds need a server
			}
			t.Run(tg.Name+"/"+kind.name, func(t *testing.T) {
				t.Parallel()
				ctx := t.Context()
				l := newLocker(t, tg.DB)
				name := testdb.Name(t)
				k, err := takeWithTTL(ctx, l, kind, name, lease)
				if err != nil {
					t.Fatal(err)
				}
				h := k.(ttler)
				row := kind.row(name)
				granted := time.Duration(expiresAtMicros(t, tg, row)-dbNowMicros(t, tg)) * time.Microsecond
				ttl := h.TTL()
				if ttl <= 0 || ttl > lease-lease/10 {
					t.Fatalf("TTL = %v while held, want in (0, %v]", ttl, lease-lease/10)
				}
				if ttl >= granted {
					t.Fatalf("TTL = %v, at least what the database grants the row (%v, read before it)", ttl, granted)
				}
				if err := k.Refresh(ctx); err != nil {
					t.Fatal(err)
				}
				if ttl := h.TTL(); ttl <= 0 {
					t.Fatalf("TTL = %v after Refresh", ttl)
				}
				release(t, k)
				if ttl := h.TTL(); ttl != 0 {
					t.Fatalf("TTL = %v after Release, want 0", ttl)
				}
			})
		}
	}
}

// takeWithTTL takes name's lock of kind with lease.
func takeWithTTL(ctx context.Context, l *rowlock.Locker, kind driverKind, name string, lease time.Duration) (dblock.Lock, error) {
	opt := dblock.TTL(lease)
	switch kind.name {
	case "mutex":
		return l.TryAcquire(ctx, name, opt)
	case "semaphore":
		s, err := l.Semaphore(1)
		if err != nil {
			return nil, err
		}
		return s.TryAcquire(ctx, name, opt)
	case "read-write":
		return l.Writers().TryAcquire(ctx, name, opt)
	case "multi":
		return l.TryAcquireAll(ctx, []string{name + "-a", name + "-b"}, opt)
	}
	return nil, errors.New("unknown kind " + kind.name)
}

// TestTTLOfLostHold: a hold that finds its row taken over is lost, and its
// TTL is 0 at once.
func TestTTLOfLostHold(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			a, b := newLocker(t, tg.DB), newLocker(t, tg.DB)
			name := testdb.Name(t)
			k, err := a.TryAcquire(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			expireNow(t, tg, name)
			other, err := b.TryAcquire(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			defer release(t, other)
			if err := k.Refresh(ctx); !errors.Is(err, dblock.ErrLockLost) {
				t.Fatalf("Refresh after a takeover = %v, want ErrLockLost", err)
			}
			if ttl := k.(*rowlock.Lock).TTL(); ttl != 0 {
				t.Fatalf("TTL of a lost hold = %v, want 0", ttl)
			}
			_ = k.Release(ctx)
		})
	}
}
