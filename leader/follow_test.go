package leader_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/leader"
	"github.com/sqllock/sqllock/rowlock"
)

// rowlock's Locker tells followers who leads.
var _ leader.HolderTeller = (*rowlock.Locker)(nil)

// hangLimit only stops a hung test; nothing is measured against it.
const hangLimit = 60 * time.Second

// term is one term of a replica, as its function saw it begin.
type term struct {
	r    *replica
	ctx  context.Context
	lock dblock.Lock
}

// replica is a Leader with a Locker of its own, run until the test ends.
// Its function reports each term on elected and leads until its context
// ends, or resigns from inside when told to (once).
type replica struct {
	ld           *leader.Leader
	value        string
	resignFromFn chan struct{}
	resignErr    chan error
	stop         func()     // cancels Run's context
	done         chan error // Run's result
}

func startReplica(t *testing.T, tg testdb.Target, name, value string, elected chan<- term, opts ...leader.Option) *replica {
	t.Helper()
	r := &replica{value: value, resignFromFn: make(chan struct{}, 1), resignErr: make(chan error, 1), done: make(chan error, 1)}
	ld, err := leader.New(newTestLocker(t, tg.DB), name, func(ctx context.Context) error {
		select { // never stuck here, even in a test that has failed
		case elected <- term{r: r, ctx: ctx, lock: r.ld.Lock()}:
		case <-ctx.Done():
			return nil
		}
		select {
		case <-ctx.Done():
		case <-r.resignFromFn:
			r.resignErr <- r.ld.Resign(ctx)
			<-ctx.Done()
		}
		return nil
	}, append([]leader.Option{leader.WithLockOptions(dblock.TTL(time.Second)), leader.WithValue(value)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	r.ld = ld
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	go func() { r.done <- ld.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-r.done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run of %s after stop = %v, want context.Canceled", value, err)
		}
	})
	return r
}

// nextTerm waits for a replica to be elected.
func nextTerm(t *testing.T, elected <-chan term) term {
	t.Helper()
	select {
	case e := <-elected:
		return e
	case <-time.After(hangLimit):
		t.Fatal("no replica was elected")
		return term{}
	}
}

// infoOf is what followers should be told while e leads.
func infoOf(name string, e term) leader.Info {
	return leader.Info{Name: name, Owner: e.lock.Owner(), Token: e.lock.Token(), Value: e.r.value}
}

// observeUntil reads infos until one has want's token, and fails if an
// Info other than a vacancy or one of allowed comes first.
func observeUntil(t *testing.T, infos <-chan leader.Info, want leader.Info, allowed ...leader.Info) {
	t.Helper()
	for {
		select {
		case info, ok := <-infos:
			if !ok {
				t.Fatalf("Observe's channel closed while waiting for %+v", want)
			}
			if info == want {
				return
			}
			known := info.Token == 0 && info == leader.Info{Name: want.Name}
			for _, a := range allowed {
				known = known || info == a
			}
			if !known {
				t.Fatalf("Observe sent %+v while waiting for %+v", info, want)
			}
		case <-time.After(hangLimit):
			t.Fatalf("Observe never sent %+v", want)
		}
	}
}

// observe starts observing with ld until the test ends, then waits for
// Observe's goroutine to close the channel.
func observe(t *testing.T, ld *leader.Leader) <-chan leader.Info {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	infos, err := ld.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		for range infos { // until closed: the goroutine has ended
		}
	})
	return infos
}

// TestFollowersSeeTheLeader: with two or three Leaders on one name, every
// one of them and a follower that never runs are told the same leader:
// the elected replica's owner, token and value.
func TestFollowersSeeTheLeader(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		for _, replicas := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s/%d", tg.Name, replicas), func(t *testing.T) {
				name := testdb.Name(t)
				follower, err := leader.New(newTestLocker(t, tg.DB), name, nil)
				if err != nil {
					t.Fatal(err)
				}
				if info, err := follower.Leader(t.Context()); !errors.Is(err, leader.ErrNoLeader) || info != (leader.Info{Name: name}) {
					t.Fatalf("Leader before any campaign = %+v, %v; want ErrNoLeader", info, err)
				}
				elected := make(chan term, 8)
				var rs []*replica
				for i := range replicas {
					rs = append(rs, startReplica(t, tg, name, fmt.Sprintf("replica-%d", i), elected))
				}
				e := nextTerm(t, elected)
				want := infoOf(name, e)
				for i, asker := range append([]*leader.Leader{follower}, rs[0].ld, rs[1].ld) {
					info, err := asker.Leader(t.Context())
					if err != nil || info != want {
						t.Fatalf("asker %d: Leader = %+v, %v; want %+v", i, info, err, want)
					}
				}
				for _, r := range rs {
					if r.ld.IsLeader() != (r == e.r) {
						t.Fatalf("%s: IsLeader = %v, elected is %s", r.value, r.ld.IsLeader(), e.r.value)
					}
				}
			})
		}
	}
}

// TestResignHandsOver: a leader that resigns (asked from outside, or from
// its own function) ends its term, its Run goes on without leading, and
// another replica takes over, as Observe reports; a lone replica
// campaigns again after its pause.
func TestResignHandsOver(t *testing.T) {
	cases := []struct {
		name     string
		replicas int
		fromFn   bool
		// a replica that resigned sits out for good, or campaigns again
		// at once (then it is alone, so that it must be the next leader)
		sitOut bool
	}{
		{"from outside", 2, false, true},
		{"from the function", 2, true, true},
		{"alone, campaigns again", 1, false, false},
	}
	for _, tg := range testdb.AllTargets(t) {
		for _, c := range cases {
			t.Run(tg.Name+"/"+c.name, func(t *testing.T) {
				name := testdb.Name(t)
				pause := time.Hour // longer than the test: sits out
				if !c.sitOut {
					pause = time.Millisecond
				}
				follower, err := leader.New(newTestLocker(t, tg.DB), name, nil, leader.WithObserveInterval(10*time.Millisecond))
				if err != nil {
					t.Fatal(err)
				}
				infos := observe(t, follower)
				elected := make(chan term, 8)
				var rs []*replica
				for i := range c.replicas {
					rs = append(rs, startReplica(t, tg, name, fmt.Sprintf("replica-%d", i), elected, leader.WithResignPause(pause)))
				}
				first := nextTerm(t, elected)
				observeUntil(t, infos, infoOf(name, first))

				if c.fromFn {
					first.r.resignFromFn <- struct{}{}
					if err := <-first.r.resignErr; err != nil {
						t.Fatalf("Resign from the function = %v", err)
					}
				} else if err := first.r.ld.Resign(t.Context()); err != nil {
					t.Fatalf("Resign = %v", err)
				}
				if cause := context.Cause(first.ctx); !errors.Is(cause, leader.ErrResigned) {
					t.Fatalf("the function's context cause = %v, want ErrResigned", cause)
				}
				if !c.fromFn {
					// Resign returned once the lock was released.
					if err := first.lock.Err(); !errors.Is(err, dblock.ErrReleased) {
						t.Fatalf("lock after Resign: Err = %v, want ErrReleased", err)
					}
				}
				if first.r.ld.IsLeader() {
					t.Fatal("IsLeader after Resign")
				}
				select {
				case err := <-first.r.done:
					t.Fatalf("Run returned %v after Resign", err)
				default:
				}

				next := nextTerm(t, elected)
				if c.sitOut && next.r == first.r {
					t.Fatal("the replica that resigned was elected again during its pause")
				}
				if next.lock.Token() <= first.lock.Token() {
					t.Fatalf("new term's token %d not above the resigned one's %d", next.lock.Token(), first.lock.Token())
				}
				observeUntil(t, infos, infoOf(name, next), infoOf(name, first))
				if err := first.r.ld.Resign(t.Context()); c.sitOut && !errors.Is(err, leader.ErrNotLeader) {
					t.Fatalf("Resign while sitting out = %v, want ErrNotLeader", err)
				}
				if c.sitOut {
					// The resigned replica sits out its pause: when the new
					// leader has stopped, one that starts campaigning only
					// then is elected, not the one that resigned.
					next.r.stop()
					if err := <-next.r.done; !errors.Is(err, context.Canceled) {
						t.Fatalf("Run of the new leader after stop = %v", err)
					}
					next.r.done <- context.Canceled // for its cleanup
					late := startReplica(t, tg, name, "late", elected, leader.WithResignPause(pause))
					third := nextTerm(t, elected)
					if third.r != late {
						t.Fatalf("after the new leader stopped, %s was elected, not the late replica", third.r.value)
					}
					observeUntil(t, infos, infoOf(name, third), infoOf(name, next))
				}
			})
		}
	}
}

// TestObserveKilledLeader: a follower observing sees the leader in another
// process, then, once that process is SIGKILLed, a new leader in this one.
func TestObserveKilledLeader(t *testing.T) {
	const ttl = time.Second
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			name := testdb.Name(t)
			child := testdb.Child(t, "TestLeaderChild", append(tg.ChildEnv(),
				"SQLLOCK_LEADER_NAME="+name, "SQLLOCK_LEADER_DIALECT="+tg.Name, "SQLLOCK_LEADER_TTL="+ttl.String(),
				"SQLLOCK_LEADER_VALUE=the child")...)
			waitCtx, cancel := context.WithTimeout(t.Context(), hangLimit)
			defer cancel()
			if _, err := child.WaitLine(waitCtx, "leader "); err != nil {
				t.Fatalf("child never led: %v", err)
			}
			follower, err := leader.New(newTestLocker(t, tg.DB), name, nil, leader.WithObserveInterval(10*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			infos := observe(t, follower)
			var childInfo leader.Info
			select {
			case childInfo = <-infos:
			case <-time.After(hangLimit):
				t.Fatal("Observe sent nothing")
			}
			if childInfo.Value != "the child" || childInfo.Token == 0 {
				t.Fatalf("Observe first sent %+v, want the child leading", childInfo)
			}

			elected := make(chan term, 8)
			startReplica(t, tg, name, "this process", elected)
			child.Kill()
			next := nextTerm(t, elected)
			if next.lock.Token() <= childInfo.Token {
				t.Fatalf("new leader's token %d not above the dead one's %d", next.lock.Token(), childInfo.Token)
			}
			observeUntil(t, infos, infoOf(name, next), childInfo)
		})
	}
}

// TestFollowErrors: bad input and Lockers that cannot tell who holds a
// lock get typed errors; Observe's channel closes when it has to stop.
func TestFollowErrors(t *testing.T) {
	tg := testdb.AllTargets(t)[0]
	l := newTestLocker(t, tg.DB)
	bad := map[string]leader.Option{
		"no observe interval":  leader.WithObserveInterval(0),
		"negative pause":       leader.WithResignPause(-time.Second),
		"value over MaxNote":   leader.WithValue(strings.Repeat("x", dblock.MaxNoteLength+1)),
		"value with NUL":       leader.WithValue("a\x00b"),
		"value not valid UTF8": leader.WithValue("\xff"),
	}
	for what, opt := range bad {
		if _, err := leader.New(l, "x", nil, opt); !errors.Is(err, dblock.ErrInvalidOption) {
			t.Errorf("%s: New = %v, want ErrInvalidOption", what, err)
		}
	}

	name := testdb.Name(t)
	ld, err := leader.New(l, name, nil)
	if err != nil {
		t.Fatal(err)
	}
	var nilCtx context.Context
	if _, err := ld.Leader(nilCtx); !errors.Is(err, dblock.ErrInvalidOption) {
		t.Errorf("Leader(nil) = %v, want ErrInvalidOption", err)
	}
	if infos, err := ld.Observe(nilCtx); !errors.Is(err, dblock.ErrInvalidOption) || infos != nil {
		t.Errorf("Observe(nil) = %v, %v; want ErrInvalidOption", infos, err)
	}
	if err := ld.Resign(nilCtx); !errors.Is(err, dblock.ErrInvalidOption) {
		t.Errorf("Resign(nil) = %v, want ErrInvalidOption", err)
	}
	if err := ld.Resign(t.Context()); !errors.Is(err, leader.ErrNotLeader) {
		t.Errorf("Resign of a Leader never run = %v, want ErrNotLeader", err)
	}

	// A vacant name is sent as such; the channel closes when ctx ends.
	ctx, cancel := context.WithCancel(t.Context())
	infos, err := ld.Observe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info := <-infos; info != (leader.Info{Name: name}) {
		t.Errorf("Observe of a vacant name sent %+v", info)
	}
	cancel()
	for range infos {
	}

	t.Run("forupdate cannot tell", func(t *testing.T) {
		tg := testdb.Targets(t)[0]
		fl, err := forupdate.New(tg.DB)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = fl.Close() })
		ld, err := leader.New(fl, testdb.Name(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ld.Leader(t.Context()); !errors.Is(err, leader.ErrCannotTell) {
			t.Errorf("Leader over forupdate = %v, want ErrCannotTell", err)
		}
		if infos, err := ld.Observe(t.Context()); !errors.Is(err, leader.ErrCannotTell) || infos != nil {
			t.Errorf("Observe over forupdate = %v, %v; want ErrCannotTell", infos, err)
		}

		// Resign needs no HolderTeller.
		terms := make(chan context.Context, 2)
		resigner, err := leader.New(fl, testdb.Name(t), func(ctx context.Context) error {
			terms <- ctx
			<-ctx.Done()
			return nil
		}, leader.WithResignPause(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		runCtx, stop := context.WithCancel(t.Context())
		ran := make(chan error, 1)
		go func() { ran <- resigner.Run(runCtx) }()
		fnCtx := <-terms
		if err := resigner.Resign(t.Context()); err != nil {
			t.Errorf("Resign over forupdate = %v", err)
		}
		if cause := context.Cause(fnCtx); !errors.Is(cause, leader.ErrResigned) {
			t.Errorf("the function's context cause = %v, want ErrResigned", cause)
		}
		stop()
		if err := <-ran; !errors.Is(err, context.Canceled) {
			t.Errorf("Run after stop = %v", err)
		}
	})

	t.Run("closed database", func(t *testing.T) {
		tg := testdb.Targets(t)[0]
		db := testdb.Open(t, tg, tg.DSN)
		ld, err := leader.New(newTestLocker(t, db), testdb.Name(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		_ = db.Close()
		if _, err := ld.Leader(t.Context()); !errors.Is(err, dblock.ErrInvalidDB) {
			t.Errorf("Leader over a closed *sql.DB = %v, want ErrInvalidDB", err)
		}
		infos, err := ld.Observe(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for info := range infos { // Observe gives up: the channel closes
			t.Errorf("Observe over a closed *sql.DB sent %+v", info)
		}
	})
}

// TestObserveThroughOutage: while the database cannot be reached, Observe
// says so once and keeps polling; once it can be again, it reports the
// leader elected meanwhile.
func TestObserveThroughOutage(t *testing.T) {
	const failed = `msg="leader: observing the leadership failed; retrying"`
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			name := testdb.Name(t)
			proxy := testdb.NewProxy(t, tg.HostPort())
			var logs lockedBuffer
			l, err := rowlock.New(testdb.Open(t, tg, tg.DSNVia(proxy.Addr())),
				rowlock.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			follower, err := leader.New(l, name, nil, leader.WithObserveInterval(10*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			infos := observe(t, follower)
			if info := <-infos; info != (leader.Info{Name: name}) {
				t.Fatalf("Observe first sent %+v, want no leader", info)
			}

			proxy.Cut()
			for i := 0; !strings.Contains(logs.String(), failed); i++ {
				if i == 6000 { // against hangs only
					t.Fatalf("no failure logged while cut off; logs: %s", logs.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			elected := make(chan term, 1)
			startReplica(t, tg, name, "elected while cut off", elected)
			e := nextTerm(t, elected)
			proxy.Restore()
			observeUntil(t, infos, infoOf(name, e))
			if n := strings.Count(logs.String(), failed); n != 1 {
				t.Fatalf("the outage was logged %d times, want once; logs: %s", n, logs.String())
			}
		})
	}
}
