package failover_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// tokenKind is one kind of lock as TestAsyncFailoverNeverReissuesTokens
// drives it: take takes the lock of name (waiting, at most bound) and
// returns its fencing tokens, each under the key it grows for (the name;
// a semaphore's slot; each name of an AcquireAll), and the lock to
// release.
type tokenKind struct {
	name string
	// newTake returns the take of a Locker on db, closed when the test
	// ends.
	newTake func(t testing.TB, db *sql.DB) take
}

type take func(ctx context.Context, name string) (map[string]int64, dblock.Lock, error)

// tokenKinds: every kind of lock a user can take on PostgreSQL, each
// through a Locker as New makes it.
var tokenKinds = []tokenKind{
	{name: "rowlock/mutex", newTake: func(t testing.TB, db *sql.DB) take {
		l := newRowlock(t, db).(*rowlock.Locker)
		return func(ctx context.Context, name string) (map[string]int64, dblock.Lock, error) {
			k, err := l.Acquire(ctx, name)
			if err != nil {
				return nil, nil, err
			}
			return map[string]int64{name: k.Token()}, k, nil
		}
	}},
	{name: "rowlock/semaphore", newTake: func(t testing.TB, db *sql.DB) take {
		// Two permits: each slot is a lock row with tokens of its own.
		s, err := newRowlock(t, db).(*rowlock.Locker).Semaphore(2)
		if err != nil {
			t.Fatalf("Semaphore: %v", err)
		}
		return func(ctx context.Context, name string) (map[string]int64, dblock.Lock, error) {
			k, err := s.Acquire(ctx, name)
			if err != nil {
				return nil, nil, err
			}
			p := k.(*rowlock.Permit)
			return map[string]int64{fmt.Sprintf("%s slot %d", name, p.Slot()): p.Token()}, k, nil
		}
	}},
	{name: "rowlock/write", newTake: func(t testing.TB, db *sql.DB) take {
		w := newRowlock(t, db).(*rowlock.Locker).Writers()
		return func(ctx context.Context, name string) (map[string]int64, dblock.Lock, error) {
			k, err := w.Acquire(ctx, name)
			if err != nil {
				return nil, nil, err
			}
			return map[string]int64{name: k.Token()}, k, nil
		}
	}},
	{name: "rowlock/all", newTake: func(t testing.TB, db *sql.DB) take {
		l := newRowlock(t, db).(*rowlock.Locker)
		return func(ctx context.Context, name string) (map[string]int64, dblock.Lock, error) {
			m, err := l.AcquireAll(ctx, []string{name, name + "/2"})
			if err != nil {
				return nil, nil, err
			}
			tokens := map[string]int64{}
			for i, n := range m.Names() {
				tokens[n] = m.Tokens()[i]
			}
			return tokens, m, nil
		}
	}},
	{name: "forupdate", newTake: func(t testing.TB, db *sql.DB) take {
		l := newForupdate(t, db)
		return func(ctx context.Context, name string) (map[string]int64, dblock.Lock, error) {
			k, err := l.Acquire(ctx, name)
			if err != nil {
				return nil, nil, err
			}
			return map[string]int64{name: k.Token()}, k, nil
		}
	}},
}

// How many tokens each name gets: before the cut (replicated), between
// the cut and the crash (lost with the old primary), after the promotion.
// Lost is large enough that the lost draws outrun what PostgreSQL writes
// ahead for a sequence (32 values per WAL record): forupdate's tokens come
// from one, and fewer lost draws would all lie below what the standby
// resumes from.
const (
	replicatedTakes = 3
	lostTakes       = 12
	promotedTakes   = 3
)

// TestAsyncFailoverNeverReissuesTokens: an unplanned failover of an
// asynchronous standby (issue 25). Every kind of lock takes tokens on a
// few names on the primary, which the standby replays; then the WAL stops
// reaching the standby (CutReplication), every name gets more tokens on
// the primary, and a fresh name its first ones (its rows never reach the
// standby); then the primary is killed, and the standby, which never saw
// those commits, is promoted. The same Lockers, over the users' pool (both
// servers, target_session_attrs=read-write), take every name again on the
// promoted server: each token must be larger than every token handed out
// for its name before the crash, the lost ones included. A holder of one
// of those lost tokens may still be writing with it.
func TestAsyncFailoverNeverReissuesTokens(t *testing.T) {
	if testdb.LeftOut(t, "postgres") {
		return
	}
	ctx := t.Context()
	r := testdb.NewReplicated(t)
	db := testdb.Open(t, r.Target, r.Target.DSN)

	type side struct {
		tokenKind
		take  take
		names []string // the last one is fresh: first taken after the cut
		// before: every token each key got before the crash.
		before map[string][]int64
	}
	sides := make([]*side, 0, len(tokenKinds))
	for _, kd := range tokenKinds {
		s := &side{tokenKind: kd, take: kd.newTake(t, db), before: map[string][]int64{}}
		for range tokenNames + 1 {
			s.names = append(s.names, testdb.Name(t))
		}
		sides = append(sides, s)
	}
	collect := func(s *side, names []string, n int) {
		t.Helper()
		for _, name := range names {
			for range n {
				tokens := takeOnce(t, ctx, s.take, name, nil)
				for key, token := range tokens {
					s.before[key] = append(s.before[key], token)
				}
			}
		}
	}
	for _, s := range sides {
		collect(s, s.names[:tokenNames], replicatedTakes)
	}
	r.CutReplication(t)
	for _, s := range sides {
		collect(s, s.names, lostTakes)
	}
	if lost := r.Unreplicated(t); lost <= 0 {
		t.Fatalf("the standby has received every commit made after the cut (%d bytes behind): nothing would be lost", lost)
	}
	r.KillPrimary(t)
	sc := staleAfterCrash(db)
	r.Promote(t)

	for _, s := range sides {
		t.Run(s.name, func(t *testing.T) {
			var bad []string
			dups := 0
			for _, name := range s.names {
				after := map[string]int64{}
				for range promotedTakes {
					for key, token := range takeOnce(t, ctx, s.take, name, sc) {
						before := s.before[key]
						switch {
						case slices.Contains(before, token):
							dups++
							bad = append(bad, fmt.Sprintf("%s: token %d handed out again (before the crash: up to %d)", key, token, slices.Max(before)))
						case len(before) > 0 && token <= slices.Max(before):
							bad = append(bad, fmt.Sprintf("%s: token %d, not above %d handed out before the crash", key, token, slices.Max(before)))
						case token <= after[key]:
							bad = append(bad, fmt.Sprintf("%s: token %d after token %d on the promoted server", key, token, after[key]))
						}
						after[key] = max(after[key], token)
					}
				}
			}
			if len(bad) > 0 {
				sort.Strings(bad)
				t.Errorf("%d of the tokens taken after the promotion are not above every token of their name before the crash (%d duplicates):\n\t%s",
					len(bad), dups, strings.Join(bad, "\n\t"))
			}
		})
	}
}

// takeOnce takes name with take, at most bound, releases it, and returns
// its tokens. After the crash (sc not nil), a call may fail on a pooled
// connection to the old primary, as sc allows.
func takeOnce(t testing.TB, ctx context.Context, tk take, name string, sc *crashedConns) map[string]int64 {
	t.Helper()
	var tokens map[string]int64
	var k dblock.Lock
	sc.do(t, "Acquire "+name, func() (err error) {
		waitCtx, cancel := context.WithTimeout(ctx, bound)
		defer cancel()
		tokens, k, err = tk(waitCtx, name)
		return err
	})
	sc.do(t, "Release "+name, func() error { return k.Release(ctx) })
	return tokens
}

// crashedConns accounts for a pool's connections to the old primary after
// it was killed: their sockets are broken, but the pool learns it only by
// using them (pgx pings a connection before reusing it only after a
// second idle), so a call may fail once for each such connection, with a
// broken-connection error, and then succeed on a new one.
type crashedConns struct {
	mu   sync.Mutex
	left int // connections that may still fail one call
}

// staleAfterCrash counts db's connections once the primary is dead: all
// of them are to it (none can be made until the standby is promoted).
func staleAfterCrash(db *sql.DB) *crashedConns {
	return &crashedConns{left: db.Stats().OpenConnections}
}

// do runs op again while it fails on a connection to the killed primary,
// and fails the test if that happens more often than there were such
// connections, or op fails otherwise. With sc nil (no crash yet), any
// error fails the test.
func (sc *crashedConns) do(t testing.TB, what string, op func() error) {
	t.Helper()
	for {
		err := op()
		if err == nil {
			return
		}
		if sc == nil || !brokenByCrash(err) {
			t.Fatalf("%s: %v", what, err)
		}
		sc.mu.Lock()
		sc.left--
		left := sc.left
		sc.mu.Unlock()
		if left < 0 {
			t.Fatalf("%s: %v: more calls failed on connections to the killed primary than the pool had", what, err)
		}
		t.Logf("%s: %v (a pooled connection to the killed primary); again", what, err)
	}
}

// brokenByCrash tells the errors of a connection whose server was killed:
// the socket closed or reset under a call, or the server's own goodbye if
// it had time to say one.
func brokenByCrash(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03"
	}
	var netErr net.Error
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.As(err, &netErr)
}
