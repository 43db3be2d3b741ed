package dblock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

func TestMain(m *testing.M) {
	if testdb.IsChild() {
		os.Exit(m.Run())
	}
	// The cron guard and Leader start no goroutines that outlive a run;
	// the locks they take stop theirs on Release.
	goleak.VerifyTestMain(m,
		// database/sql's connection opener lives as long as a *sql.DB, and
		// the harness keeps its pools for the whole test binary.
		goleak.IgnoreTopFunction("database/sql.(*DB).connectionOpener"),
		goleak.IgnoreAnyFunction("github.com/go-sql-driver/mysql.(*mysqlConn).startWatcher.func1"),
	)
}

// runLeader runs ld.Run in a goroutine until the test ends (or stop is
// called), and waits for it.
func runLeader(t *testing.T, ld *dblock.Leader) (stop func() error) {
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
// TestLeaderFailoverAfterKill; in a normal run it returns at once.
func TestLeaderChild(t *testing.T) {
	if !testdb.IsChild() {
		return
	}
	name, dialect := os.Getenv("SQLLOCK_LEADER_NAME"), os.Getenv("SQLLOCK_LEADER_DIALECT")
	ttl, _ := time.ParseDuration(os.Getenv("SQLLOCK_LEADER_TTL"))
	for _, tg := range testdb.Targets(t) {
		if tg.Name != dialect {
			continue
		}
		var ld *dblock.Leader
		ld, err := dblock.NewLeader(newTestLocker(t, tg.DB), name, func(ctx context.Context) error {
			fmt.Printf("leader %d\n", ld.Lock().Token())
			<-ctx.Done() // lead until killed
			t.Errorf("child lost the leadership: %v", context.Cause(ctx))
			return nil
		}, dblock.LeaderTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		if err := ld.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLeaderFailoverAfterKill: the leader's process is SIGKILLed; a Leader
// campaigning in this process takes over once the dead one's lease lapses.
func TestLeaderFailoverAfterKill(t *testing.T) {
	const ttl = time.Second
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			name := testdb.Name(t)
			child := testdb.Child(t, "TestLeaderChild",
				"SQLLOCK_LEADER_NAME="+name, "SQLLOCK_LEADER_DIALECT="+tg.Name, "SQLLOCK_LEADER_TTL="+ttl.String())
			waitCtx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			line, err := child.WaitLine(waitCtx, "leader ")
			if err != nil {
				t.Fatalf("child never led: %v", err)
			}
			childToken, err := strconv.ParseInt(strings.TrimPrefix(line, "leader "), 10, 64)
			if err != nil {
				t.Fatalf("child said %q: %v", line, err)
			}

			elected := make(chan int64, 1)
			var ld *dblock.Leader
			ld, err = dblock.NewLeader(newTestLocker(t, tg.DB), name, func(ctx context.Context) error {
				elected <- ld.Lock().Token()
				<-ctx.Done()
				return nil
			}, dblock.LeaderTTL(ttl), dblock.LeaderBackoff(50*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			stop := runLeader(t, ld)
			if ld.IsLeader() {
				t.Fatal("IsLeader while the child leads")
			}
			child.Kill()

			// Bounded generously against hangs; the takeover needs one TTL.
			select {
			case token := <-elected:
				if token <= childToken {
					t.Fatalf("new leader's token %d not above the dead leader's %d", token, childToken)
				}
			case <-time.After(20 * ttl):
				t.Fatal("no takeover after the leader was killed")
			}
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
			a, err := dblock.NewLeader(cutLocker, name, func(ctx context.Context) error {
				aCtxs <- ctx
				<-ctx.Done()
				aCauses <- context.Cause(ctx)
				return nil
			}, dblock.LeaderTTL(ttl), dblock.LeaderBackoff(50*time.Millisecond))
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
			b, err := dblock.NewLeader(newTestLocker(t, tg.DB), name, func(ctx context.Context) error {
				bSaw <- sight{aCanceled: aCtx.Err() != nil, aLeads: a.IsLeader()}
				<-ctx.Done()
				return nil
			}, dblock.LeaderTTL(ttl), dblock.LeaderBackoff(50*time.Millisecond))
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
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			name := testdb.Name(t)
			var active, overlaps, terms atomic.Int32
			enough := make(chan struct{})
			var closeOnce atomic.Bool
			var stops []func() error
			for range 3 {
				ld, err := dblock.NewLeader(newTestLocker(t, tg.DB), name, func(ctx context.Context) error {
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
				}, dblock.LeaderTTL(time.Second), dblock.LeaderBackoff(20*time.Millisecond))
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
	tg := testdb.Targets(t)[0]
	l := newTestLocker(t, tg.DB)
	bad := map[string]func() (*dblock.Leader, error){
		"nil locker": func() (*dblock.Leader, error) { return dblock.NewLeader(nil, "x", nil) },
		"empty name": func() (*dblock.Leader, error) { return dblock.NewLeader(l, "", nil) },
		"tiny TTL": func() (*dblock.Leader, error) {
			return dblock.NewLeader(l, "x", nil, dblock.LeaderTTL(time.Millisecond))
		},
		"no backoff": func() (*dblock.Leader, error) { return dblock.NewLeader(l, "x", nil, dblock.LeaderBackoff(0)) },
		"nil logger": func() (*dblock.Leader, error) { return dblock.NewLeader(l, "x", nil, dblock.LeaderLogger(nil)) },
		"nil option": func() (*dblock.Leader, error) { return dblock.NewLeader(l, "x", nil, nil) },
	}
	for what, f := range bad {
		if _, err := f(); !errors.Is(err, dblock.ErrInvalidOption) && !errors.Is(err, dblock.ErrInvalidName) {
			t.Errorf("%s: %v, want ErrInvalidOption or ErrInvalidName", what, err)
		}
	}

	// Without fn the Leader just holds the leadership.
	ld, err := dblock.NewLeader(l, testdb.Name(t), nil, dblock.LeaderTTL(time.Second))
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
	err = dblock.Campaign(t.Context(), closed, testdb.Name(t), func(context.Context) error { return nil })
	if !errors.Is(err, dblock.ErrClosed) {
		t.Fatalf("Campaign with a closed Locker = %v, want ErrClosed", err)
	}
}

// A Leader runs its function on one replica at a time, and campaigns again
// when it loses the leadership.
func ExampleLeader() {
	ctx, stop := context.WithCancel(context.Background())
	db := openExampleDB(ctx)
	defer db.Close()
	locker, err := rowlock.New(db)
	if err != nil {
		panic(err)
	}
	defer locker.Close()

	var leader *dblock.Leader
	leader, err = dblock.NewLeader(locker, fmt.Sprintf("example/leader-%d", time.Now().UnixNano()),
		func(ctx context.Context) error {
			fmt.Println("leading:", leader.IsLeader(), "with a fencing token:", leader.Lock().Token() > 0)
			stop() // a real leader works until ctx is canceled
			<-ctx.Done()
			return nil
		}, dblock.LeaderTTL(10*time.Second))
	if err != nil {
		panic(err)
	}
	err = leader.Run(ctx)
	fmt.Println("stopped:", err, "leading:", leader.IsLeader())
	// Output:
	// leading: true with a fencing token: true
	// stopped: context canceled leading: false
}
