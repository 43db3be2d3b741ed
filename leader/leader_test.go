package leader_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/internal/tuning"
	"github.com/sqllock/sqllock/leader"
	"github.com/sqllock/sqllock/rowlock"
)

func TestMain(m *testing.M) {
	// A Leader starts no goroutines that outlive Run; the locks it takes
	// stop theirs on Release.
	testdb.Main(m)
}

// newTestLocker returns a rowlock Locker on db, closed when the test ends.
func newTestLocker(t testing.TB, db *sql.DB) *rowlock.Locker {
	t.Helper()
	l, err := rowlock.New(db)
	if err != nil {
		t.Fatalf("rowlock.New: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// runLeader runs ld.Run in a goroutine until the test ends (or stop is
// called), and waits for it.
func runLeader(t *testing.T, ld *leader.Leader) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ld.Run(ctx) }()
	var err error
	var stopped bool
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			err = <-done
		}
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// TestLeaderChild is the body of the child process of
// TestLeaderFailoverAfterKill and TestObserveKilledLeader; in a normal run
// it returns at once.
func TestLeaderChild(t *testing.T) {
	if !testdb.IsChild() {
		return
	}
	name, dialect := os.Getenv("SQLLOCK_LEADER_NAME"), os.Getenv("SQLLOCK_LEADER_DIALECT")
	ttl, _ := time.ParseDuration(os.Getenv("SQLLOCK_LEADER_TTL"))
	for _, tg := range testdb.AllTargets(t) {
		if tg.Name != dialect {
			continue
		}
		// Without a session marker: this test is about the lease, which
		// decides alone when no marker can be had. (With one, the dead
		// leader's lease is cut short: rowlock's crash tests.)
		l, err := rowlock.New(tg.DB, rowlock.WithCrashGrace(0))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		var ld *leader.Leader
		ld, err = leader.New(l, name, func(ctx context.Context) error {
			fmt.Printf("leader %d\n", ld.Lock().Token())
			<-ctx.Done() // lead until killed
			t.Errorf("child lost the leadership: %v", context.Cause(ctx))
			return nil
		}, leader.WithLockOptions(dblock.TTL(ttl)), leader.WithValue(os.Getenv("SQLLOCK_LEADER_VALUE")))
		if err != nil {
			t.Fatal(err)
		}
		if err := ld.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// failoverPollSlack is how long after the dead leader's lease lapses, by
// the database clock, a campaigning Leader may take to notice and take
// over: its Locker polls at most every failoverMaxPoll (with up to 20%
// jitter), and on a loaded machine a round trip and the scheduling of
// its goroutine come on top. Generous, since the machine is shared; the
// point is that the takeover follows the lapse, not a multiple of the TTL.
const (
	failoverMaxPoll   = 100 * time.Millisecond
	failoverPollSlack = time.Second
)

// leaseRow reads name's lock row: its token, when it was acquired and
// when its lease ends, and the database clock now, in microseconds since
// the Unix epoch by the database clock.
func leaseRow(t *testing.T, tg testdb.Target, name string) (token, acquiredAt, expiresAt, now int64) {
	t.Helper()
	q := `SELECT token, (extract(epoch FROM acquired_at) * 1000000)::bigint, (extract(epoch FROM expires_at) * 1000000)::bigint,
		(extract(epoch FROM clock_timestamp()) * 1000000)::bigint FROM dblock_locks WHERE name = $1`
	switch tg.Dialect {
	case dblock.MySQL:
		q = `SELECT token, TIMESTAMPDIFF(MICROSECOND, '1970-01-01', acquired_at), TIMESTAMPDIFF(MICROSECOND, '1970-01-01', expires_at),
			TIMESTAMPDIFF(MICROSECOND, '1970-01-01', UTC_TIMESTAMP(6)) FROM dblock_locks WHERE name = ?`
	case dblock.SQLite:
		// Times are kept as µs since the epoch already.
		q = `SELECT token, acquired_at, expires_at, CAST(unixepoch('subsec') * 1000000 AS INTEGER) FROM dblock_locks WHERE name = ?`
	}
	if err := tg.DB.QueryRowContext(t.Context(), q, name).Scan(&token, &acquiredAt, &expiresAt, &now); err != nil {
		t.Fatalf("lock row of %q: %v", name, err)
	}
	return token, acquiredAt, expiresAt, now
}

// dbTime formats microseconds since the epoch, for messages.
func dbTime(micros int64) string { return time.UnixMicro(micros).UTC().Format("15:04:05.000000") }

// TestLeaderFailoverAfterKill: the leader's process, whose Locker keeps no
// session marker, is SIGKILLed; a Leader campaigning in this process takes
// over within the TTL, by the database clock: the dead leader's lease ends at most one TTL after its death (it
// renewed no later than that), and the new leader's term begins once the
// lease has lapsed, not before, and within a poll's slack after. The
// generous bounds on the wall clock only stop a hung test.
func TestLeaderFailoverAfterKill(t *testing.T) {
	const ttl = 2 * time.Second
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			name := testdb.Name(t)
			child := testdb.Child(t, "TestLeaderChild", append(tg.ChildEnv(),
				"SQLLOCK_LEADER_NAME="+name, "SQLLOCK_LEADER_DIALECT="+tg.Name, "SQLLOCK_LEADER_TTL="+ttl.String())...)
			waitCtx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			line, err := child.WaitLine(waitCtx, "leader ")
			if err != nil {
				t.Fatalf("child never led: %v", err)
			}
			childToken, err := strconv.ParseInt(strings.TrimPrefix(line, "leader "), 10, 64)
			if err != nil {
				t.Fatalf("child said %q: %v", line, err)
			}
			if _, err := newTestLocker(t, tg.DB).TryAcquire(t.Context(), name); !errors.Is(err, dblock.ErrNotAcquired) {
				t.Fatalf("TryAcquire while the child leads = %v, want ErrNotAcquired", err)
			}
			// Killed after a renewal, so that what is checked is the lease
			// a renewing leader leaves behind, not only its first one.
			_, _, firstExpiry, _ := leaseRow(t, tg, name)
			for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if _, _, expiry, _ := leaseRow(t, tg, name); expiry > firstExpiry {
					break
				}
				if time.Now().After(deadline) { // against hangs only
					t.Fatal("the child leader never renewed its lease")
				}
			}

			child.Kill() // returns once the process is reaped
			// Nobody else campaigns yet: the row is still the dead leader's.
			token, _, deadExpiry, afterDeath := leaseRow(t, tg, name)
			if token != childToken {
				t.Fatalf("lock row has token %d, the dead leader's is %d", token, childToken)
			}
			if limit := afterDeath + ttl.Microseconds(); deadExpiry > limit {
				t.Fatalf("the dead leader's lease ends at %s, more than the TTL %v after its death (before %s)",
					dbTime(deadExpiry), ttl, dbTime(afterDeath))
			}

			l, err := rowlock.New(tg.DB, tuning.PollInterval(5*time.Millisecond, failoverMaxPoll).(rowlock.Option))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			elected := make(chan int64, 1)
			var ld *leader.Leader
			ld, err = leader.New(l, name, func(ctx context.Context) error {
				elected <- ld.Lock().Token()
				<-ctx.Done()
				return nil
			}, leader.WithLockOptions(dblock.TTL(ttl)), leader.WithBackoff(50*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			_, _, _, campaignFrom := leaseRow(t, tg, name)
			stop := runLeader(t, ld)

			var newToken int64
			select {
			case newToken = <-elected:
			case <-time.After(60 * time.Second): // against hangs only
				t.Fatal("no takeover after the leader was killed")
			}
			if newToken <= childToken {
				t.Fatalf("new leader's token %d not above the dead leader's %d", newToken, childToken)
			}
			token, acquiredAt, _, _ := leaseRow(t, tg, name)
			if token != newToken {
				t.Fatalf("lock row has token %d, the new leader's is %d", token, newToken)
			}
			if acquiredAt < deadExpiry {
				t.Fatalf("new leader took over at %s, before the dead leader's lease ended at %s", dbTime(acquiredAt), dbTime(deadExpiry))
			}
			if limit := max(deadExpiry, campaignFrom) + failoverPollSlack.Microseconds(); acquiredAt > limit {
				t.Fatalf("new leader took over at %s: the dead leader's lease ended at %s and it campaigned from %s, "+
					"so it should have by %s", dbTime(acquiredAt), dbTime(deadExpiry), dbTime(campaignFrom), dbTime(limit))
			}
			t.Logf("lease lapsed %s after the death was seen; new term %s after the lapse (database clock)",
				time.Duration(deadExpiry-afterDeath)*time.Microsecond, time.Duration(acquiredAt-max(deadExpiry, campaignFrom))*time.Microsecond)

			if !ld.IsLeader() || ld.Lock() == nil {
				t.Fatal("IsLeader false while leading")
			}
			if err := stop(); !errors.Is(err, context.Canceled) {
				t.Fatalf("Run after stop = %v, want context.Canceled", err)
			}
			if ld.IsLeader() || ld.Lock() != nil {
				t.Fatal("IsLeader true after Run returned")
			}
			// Run released the lock on its way out.
			k, err := newTestLocker(t, tg.DB).TryAcquire(t.Context(), name)
			if err != nil {
				t.Fatalf("lock still held after Run returned: %v", err)
			}
			_ = k.Release(t.Context())
		})
	}
}

// TestLeaderCutOffStepsDown cuts the leader's database connections: its
// function's context is canceled, and by the time another replica leads,
// the cut-off one has stepped down (order of events, not timing).
func TestLeaderCutOffStepsDown(t *testing.T) {
	const ttl = time.Second
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			name := testdb.Name(t)
			proxy := testdb.NewProxy(t, tg.HostPort())
			cutLocker := newTestLocker(t, testdb.Open(t, tg, tg.DSNVia(proxy.Addr())))

			aCtxs := make(chan context.Context, 4)
			aCauses := make(chan error, 4)
			a, err := leader.New(cutLocker, name, func(ctx context.Context) error {
				aCtxs <- ctx
				<-ctx.Done()
				aCauses <- context.Cause(ctx)
				return nil
			}, leader.WithLockOptions(dblock.TTL(ttl)), leader.WithBackoff(50*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			stopA := runLeader(t, a)
			var aCtx context.Context
			select {
			case aCtx = <-aCtxs:
			case <-time.After(30 * time.Second):
				t.Fatal("first leader never elected")
			}

			type sight struct{ aCanceled, aLeads bool }
			bSaw := make(chan sight, 1)
			b, err := leader.New(newTestLocker(t, tg.DB), name, func(ctx context.Context) error {
				bSaw <- sight{aCanceled: aCtx.Err() != nil, aLeads: a.IsLeader()}
				<-ctx.Done()
				return nil
			}, leader.WithLockOptions(dblock.TTL(ttl)), leader.WithBackoff(50*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			stopB := runLeader(t, b)
			if b.IsLeader() {
				t.Fatal("second Leader leads while the first holds the lock")
			}

			proxy.Cut()
			select {
			case s := <-bSaw:
				if !s.aCanceled || s.aLeads {
					t.Fatalf("when the new leader was elected the cut-off one had canceled its function: %v, still claimed to lead: %v", s.aCanceled, s.aLeads)
				}
			case <-time.After(20 * ttl):
				t.Fatal("no takeover after the leader was cut off")
			}
			select {
			case cause := <-aCauses:
				if !errors.Is(cause, dblock.ErrLockLost) {
					t.Fatalf("cut-off leader's context cause = %v, want ErrLockLost", cause)
				}
			case <-time.After(20 * ttl):
				t.Fatal("cut-off leader's function never returned")
			}
			if err := stopA(); !errors.Is(err, context.Canceled) {
				t.Fatalf("cut-off Run after stop = %v", err)
			}
			if !b.IsLeader() {
				t.Fatal("new leader lost the leadership")
			}
			if err := stopB(); !errors.Is(err, context.Canceled) {
				t.Fatalf("Run after stop = %v", err)
			}
		})
	}
}

// TestLeaderStepsDownAndRecampaigns: three Leaders whose functions return
// after a short term take turns, never two at once.
func TestLeaderStepsDownAndRecampaigns(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			name := testdb.Name(t)
			var active, overlaps, terms atomic.Int32
			enough := make(chan struct{})
			var closeOnce atomic.Bool
			var stops []func() error
			for range 3 {
				ld, err := leader.New(newTestLocker(t, tg.DB), name, func(ctx context.Context) error {
					if active.Add(1) > 1 {
						overlaps.Add(1)
					}
					defer active.Add(-1)
					if terms.Add(1) == 6 && closeOnce.CompareAndSwap(false, true) {
						close(enough)
					}
					select {
					case <-ctx.Done():
					case <-time.After(50 * time.Millisecond):
					}
					return errors.New("term over") // logged, then step down
				}, leader.WithLockOptions(dblock.TTL(time.Second)), leader.WithBackoff(20*time.Millisecond))
				if err != nil {
					t.Fatal(err)
				}
				stops = append(stops, runLeader(t, ld))
			}
			select {
			case <-enough:
			case <-time.After(30 * time.Second):
				t.Fatalf("only %d terms", terms.Load())
			}
			for _, stop := range stops {
				if err := stop(); !errors.Is(err, context.Canceled) {
					t.Errorf("Run after stop = %v", err)
				}
			}
			if n := overlaps.Load(); n != 0 {
				t.Fatalf("%d terms overlapped another", n)
			}
		})
	}
}

func TestLeaderErrors(t *testing.T) {
	tg := testdb.AllTargets(t)[0]
	l := newTestLocker(t, tg.DB)
	bad := map[string]func() (*leader.Leader, error){
		"nil locker": func() (*leader.Leader, error) { return leader.New(nil, "x", nil) },
		"empty name": func() (*leader.Leader, error) { return leader.New(l, "", nil) },
		"tiny TTL": func() (*leader.Leader, error) {
			return leader.New(l, "x", nil, leader.WithLockOptions(dblock.TTL(time.Millisecond)))
		},
		"no backoff": func() (*leader.Leader, error) { return leader.New(l, "x", nil, leader.WithBackoff(0)) },
		"nil option": func() (*leader.Leader, error) { return leader.New(l, "x", nil, nil) },
	}
	for what, f := range bad {
		if _, err := f(); !errors.Is(err, dblock.ErrInvalidOption) && !errors.Is(err, dblock.ErrInvalidName) {
			t.Errorf("%s: %v, want ErrInvalidOption or ErrInvalidName", what, err)
		}
	}

	// Without fn the Leader just holds the leadership.
	ld, err := leader.New(l, testdb.Name(t), nil, leader.WithLockOptions(dblock.TTL(time.Second)))
	if err != nil {
		t.Fatal(err)
	}
	stop := runLeader(t, ld)
	for i := 0; !ld.IsLeader(); i++ {
		if i == 1000 {
			t.Fatal("never elected")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := ld.Run(t.Context()); err == nil || errors.Is(err, context.Canceled) {
		t.Fatalf("second concurrent Run = %v, want an error", err)
	}
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run after stop = %v", err)
	}

	// A closed Locker cannot be mended by retrying: Run gives up.
	closed := newTestLocker(t, tg.DB)
	_ = closed.Close()
	gone, err := leader.New(closed, testdb.Name(t), func(context.Context) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := gone.Run(t.Context()); !errors.Is(err, dblock.ErrClosed) {
		t.Fatalf("Run with a closed Locker = %v, want ErrClosed", err)
	}
}
