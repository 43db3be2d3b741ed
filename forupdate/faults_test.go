package forupdate_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
)

// childTTL is the TTL of the child's lock: so long that only the death of
// its process can free the lock while the test runs.
const childTTL = time.Hour

// TestChildHolder is the body of the child process of
// TestKilledHolderFreesLockAtOnce; in a normal run it returns at once.
func TestChildHolder(t *testing.T) {
	if !testdb.IsChild() {
		return
	}
	name, dialect := os.Getenv("SQLLOCK_CHILD_LOCK"), os.Getenv("SQLLOCK_CHILD_DIALECT")
	for _, tg := range targets(t) {
		if tg.Name != dialect {
			continue
		}
		k := acquire(t, context.Background(), newLocker(t, tg.DB), name, dblock.TTL(childTTL))
		fmt.Printf("held %d\n", k.Token())
		<-k.Done()
		t.Fatalf("child lost its lock: %v", k.Err())
	}
}

// TestKilledHolderFreesLockAtOnce: SIGKILL a holder; a waiter blocked in
// the database gets the lock. The child's TTL is an hour, so only the end
// of its connection, at its death, can have freed it.
func TestKilledHolderFreesLockAtOnce(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			name := testdb.Name(t)
			child := testdb.Child(t, "TestChildHolder", "SQLLOCK_CHILD_LOCK="+name, "SQLLOCK_CHILD_DIALECT="+tg.Name)
			waitCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			line, err := child.WaitLine(waitCtx, "held ")
			if err != nil {
				t.Fatalf("child did not report holding the lock: %v", err)
			}
			childToken, _ := strconv.ParseInt(strings.TrimPrefix(line, "held "), 10, 64)

			waiterDB := singleConnDB(t, tg)
			session := sessionID(t, tg, waiterDB)
			got := acquireAsync(ctx, newLocker(t, waiterDB), name)
			waitForState(t, tg, session, "waiting")
			killed := time.Now()
			child.Kill()
			r := await(t, got)
			if r.err != nil {
				t.Fatalf("Acquire after the holder was killed: %v", r.err)
			}
			t.Logf("acquired %v after SIGKILL", time.Since(killed))
			if r.lock.Token() <= childToken {
				t.Fatalf("token %d after the dead holder's %d", r.lock.Token(), childToken)
			}
			release(t, r.lock)
		})
	}
}

// TestCutConnectionReleasesAtOnce: a holder whose connection is closed
// (its network path reset) frees the lock for a waiter at once, and learns
// it has lost the lock.
func TestCutConnectionReleasesAtOnce(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			name := testdb.Name(t)
			proxy := testdb.NewProxy(t, tg.HostPort())
			holder := newLocker(t, testdb.Open(t, tg, tg.DSNVia(proxy.Addr())))
			waiterDB := singleConnDB(t, tg)
			session := sessionID(t, tg, waiterDB)

			k := acquire(t, ctx, holder, name, dblock.TTL(time.Hour))
			got := acquireAsync(ctx, newLocker(t, waiterDB), name)
			waitForState(t, tg, session, "waiting")
			proxy.Cut()
			r := await(t, got)
			if r.err != nil {
				t.Fatalf("Acquire after the holder was cut off: %v", r.err)
			}
			// The holder's next ping (every TTL/3) fails: Refresh pings now.
			if err := k.Refresh(ctx); !errors.Is(err, dblock.ErrLockLost) {
				t.Fatalf("Refresh of the cut-off holder = %v, want ErrLockLost", err)
			}
			select {
			case <-k.Done():
			default:
				t.Fatal("Done not closed after the lock was lost")
			}
			if err := k.Release(ctx); !errors.Is(err, dblock.ErrLockLost) {
				t.Fatalf("Release of a lost lock = %v, want ErrLockLost", err)
			}
			release(t, r.lock)
		})
	}
}

// TestPartitionedHolder: a holder whose network goes silent (no reset, no
// packets) is ended by the server's idle timeout, the TTL; the holder
// declares the lock lost before anyone else gets it, by the order of
// events.
func TestPartitionedHolder(t *testing.T) {
	const ttl = 3 * time.Second
	for _, tg := range targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			name := testdb.Name(t)
			proxy := newFreezeProxy(t, tg.HostPort())
			holder := newLocker(t, testdb.Open(t, tg, tg.DSNVia(proxy.Addr())))
			waiterDB := singleConnDB(t, tg)
			session := sessionID(t, tg, waiterDB)

			k := acquire(t, ctx, holder, name, dblock.TTL(ttl))
			got := acquireAsync(ctx, newLocker(t, waiterDB), name)
			waitForState(t, tg, session, "waiting")
			proxy.Freeze()
			r := await(t, got)
			if r.err != nil {
				t.Fatalf("Acquire after the holder was partitioned: %v", r.err)
			}
			select {
			case <-k.Done():
			default:
				t.Fatal("another holder got the lock before the partitioned one declared it lost")
			}
			if !errors.Is(k.Err(), dblock.ErrLockLost) {
				t.Fatalf("partitioned holder's Err = %v, want ErrLockLost", k.Err())
			}
			if err := k.Release(ctx); !errors.Is(err, dblock.ErrLockLost) {
				t.Fatalf("Release of a lost lock = %v, want ErrLockLost", err)
			}
			release(t, r.lock)
		})
	}
}
