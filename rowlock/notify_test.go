package rowlock_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// TestChildWokenWaiter is the body of the child process of
// TestReleaseWakesOtherProcess; in a normal run it returns at once.
func TestChildWokenWaiter(t *testing.T) {
	if !testdb.IsChild() {
		return
	}
	name, dialect := os.Getenv("SQLLOCK_CHILD_LOCK"), os.Getenv("SQLLOCK_CHILD_DIALECT")
	for _, tg := range testdb.Targets(t) {
		if tg.Name != dialect {
			continue
		}
		var opts []rowlock.Option
		if tg.Dialect == dblock.Postgres {
			// Never poll during the test: only a NOTIFY can wake it.
			opts = append(opts, rowlock.WithPollInterval(time.Hour, time.Hour), rowlock.WithIdleRecheck(time.Hour))
		}
		l, err := rowlock.New(tg.DB, opts...)
		if err != nil {
			t.Fatal(err)
		}
		k, err := l.Acquire(context.Background(), name, dblock.Fair())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("acquired %d\n", k.Token())
		if err := k.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		_ = l.Close()
	}
}

// TestReleaseWakesOtherProcess: a release wakes a waiter in another
// process, which no in-memory wake-up reaches. On PostgreSQL the child's
// waiter never polls while the test runs (the holder's lease is 10 minutes,
// its pauses an hour), so only the release's NOTIFY can wake it. On MySQL it
// polls, as there.
func TestReleaseWakesOtherProcess(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // liveness bound
			defer cancel()
			l := newLocker(t, tg.DB)
			name := testdb.Name(t)
			holder, err := l.TryAcquire(ctx, name, dblock.TTL(10*time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			child := testdb.Child(t, "TestChildWokenWaiter", "SQLLOCK_CHILD_LOCK="+name, "SQLLOCK_CHILD_DIALECT="+tg.Name)
			eventually(t, ctx, "the child never queued", func() bool {
				ws, err := l.Waiters(ctx, name)
				return err == nil && len(ws) == 1
			})
			if tg.Dialect == dblock.Postgres {
				// The child asks for a NOTIFY right before it sleeps.
				eventually(t, ctx, "the child never asked to be notified", func() bool {
					var wanted bool
					err := tg.DB.QueryRowContext(ctx, `SELECT wanted FROM dblock_locks WHERE name = $1`, name).Scan(&wanted)
					return err == nil && wanted
				})
			}
			release(t, holder)
			line, err := child.WaitLine(ctx, "acquired ")
			if err != nil {
				t.Fatalf("the child was not woken: %v", err)
			}
			if token, _ := strconv.ParseInt(strings.TrimPrefix(line, "acquired "), 10, 64); token <= holder.Token() {
				t.Fatalf("child's token %d not above %d", token, holder.Token())
			}
		})
	}
}
