package rowlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
)

// liveRowsOf lists the lock rows owned by ownerID whose lease has not
// lapsed by the database clock: what that owner holds now, of any kind.
func liveRowsOf(t testing.TB, tg testdb.Target, ownerID string) []string {
	t.Helper()
	q := `SELECT name FROM dblock_locks WHERE owner_id = $1 AND expires_at > clock_timestamp() ORDER BY name`
	if tg.Dialect == dblock.MySQL {
		q = `SELECT name FROM dblock_locks WHERE owner_id = ? AND expires_at > UTC_TIMESTAMP(6) ORDER BY name`
	}
	rows, err := tg.DB.QueryContext(context.Background(), q, ownerID)
	if err != nil {
		t.Fatalf("rows of owner %q: %v", ownerID, err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return names
}

// ledger checks, from what holders report as they take and give up
// locks, the invariants of the lock kinds. Holders report while they hold,
// so the ledger's order for one name is the order in which its holders
// held it.
type ledger struct {
	t  testing.TB
	mu sync.Mutex
	// holders counts the holders of each name now.
	holders map[string]int
	// lastToken is the last token reported for each name.
	lastToken map[string]int64
	// broke is set by the first broken invariant; it stops the hammer.
	broke bool
	// failedOwners are the owners whose acquisition failed, and phantoms
	// the rows they held right after it (see checkNothingLeft).
	failedOwners []string
	phantoms     int
}

// failed records an owner whose acquisition failed, and how many rows it
// held right after.
func (lg *ledger) failed(owner string, held int) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	lg.failedOwners = append(lg.failedOwners, owner)
	lg.phantoms += held
}

func newLedger(t testing.TB) *ledger {
	return &ledger{t: t, holders: map[string]int{}, lastToken: map[string]int64{}}
}

// errorf records a broken invariant.
func (lg *ledger) errorf(format string, args ...any) {
	lg.t.Helper()
	lg.broke = true
	lg.t.Errorf(format, args...)
}

// broken reports whether an invariant has been broken.
func (lg *ledger) broken() bool {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	return lg.broke
}

// checkNothingLeft checks that the owners whose acquisitions failed hold
// nothing. A row a failed acquisition had taken is released before it
// returns, but a take whose statement its context cut short may still be
// run by the server afterwards (the client gave up; the server does not
// know): nobody renews such a hold, so it must lapse within its lease. So
// a row still held is waited out, by the database clock, and must then be
// free: a row left behind with a live handle would have been renewed.
func checkNothingLeft(t testing.TB, tg testdb.Target, lg *ledger) {
	t.Helper()
	for _, owner := range lg.failedOwners {
		for _, name := range liveRowsOf(t, tg, owner) {
			waitDBClockPast(t, tg, expiresAtMicros(t, tg, name))
		}
		if still := liveRowsOf(t, tg, owner); len(still) != 0 {
			t.Errorf("owner %s, whose acquisition failed, still holds %q after their leases", owner, still)
		}
	}
	t.Logf("%d failed acquisitions, after which %d rows were held by a statement cut short (all lapsed unrenewed)",
		len(lg.failedOwners), lg.phantoms)
}

// waitingFor runs acquire (an Acquire that must wait) in a goroutine. The
// function it returns ends the wait and fails the test unless acquire
// returned dblock.ErrNotAcquired, as a wait cut short does.
func waitingFor(t testing.TB, ctx context.Context, acquire func(context.Context) (dblock.Lock, error)) (stop func()) {
	waitCtx, cancel := context.WithCancel(ctx)
	waited := make(chan error, 1)
	go func() {
		_, err := acquire(waitCtx)
		waited <- err
	}()
	return func() {
		t.Helper()
		cancel()
		if err := <-waited; !errors.Is(err, dblock.ErrNotAcquired) {
			t.Errorf("a wait cut short: %v, want ErrNotAcquired", err)
		}
	}
}
