package rowlock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/clock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/metrics"
)

var _ dblock.Lock = (*Lock)(nil)

// Lock is one hold of a lock taken by a Locker. It is safe for concurrent
// use.
type Lock struct {
	l *Locker
	h holder
	// name and token are what the hold shows its user: its row's, or, for
	// a hold of a lock kind, the kind's name and token (see Permit and
	// RWLock). The SQL always uses h.
	name  string
	token int64
	ttl   time.Duration
	// belief is how long after a successful take or renewal the hold
	// trusts it without another: the TTL, or less on PostgreSQL (see
	// Locker.belief). The deadline and the renewals' pace follow it.
	belief time.Duration
	owner  dblock.Owner

	ctx      context.Context
	cancel   context.CancelCauseFunc
	acquired time.Time // by the local clock, for the hold-time metric
	// metrics records the hold's measurements, with its lock type.
	metrics *metrics.Instruments

	mu       sync.Mutex
	deadline time.Time // by the local monotonic clock: lost unless renewed before
	err      error     // nil while held
	released bool
	// releasing: a Release is running; a second one says ErrNotHeld.
	releasing bool
	// renewStopped: a Release stopped the renewal; loopStarted is whether
	// its loop had started (renewDone is then closed once it has ended).
	renewStopped, loopStarted bool
	// lapse declares the lock lost at its deadline after a failed
	// Release, the renewal loop having stopped.
	lapse *time.Timer
	// lostWhileReleasing is a loss met while a Release ran: it counts
	// only if the release fails.
	lostWhileReleasing error
	// givenBack: released by a failed acquisition of a lock kind, never
	// handed to a caller, so its hold is not measured.
	givenBack bool

	// stopRenew cancels the renewal loop and any renewal in flight.
	stopRenew context.CancelFunc
	renewCtx  context.Context
	// renewStart starts the renewal loop when the first renewal is due;
	// renewDone is closed when the loop, once started, has ended.
	renewStart *time.Timer
	renewDone  chan struct{}
}

var (
	_ dblock.Lock   = (*Lock)(nil)
	_ dblock.Fencer = (*Lock)(nil)
)

// safetyMargin is how long before the database could consider the lease
// expired a holder that failed to renew declares the lock lost: a tenth of
// the TTL, time for the holder to stop working and for clocks that run at
// slightly different rates.
func safetyMargin(ttl time.Duration) time.Duration { return ttl / 10 }

// won is the hold a won, with token, by a try sent at sent; nil when the
// answer came back after the hold's deadline (a commit the server held up:
// a synchronous standby away, a Galera membership change). Its lease may
// then have lapsed by the database clock, and someone else may hold the
// lock already: it is given back, and the try counts as not acquired.
func (l *Locker) won(ctx context.Context, a attempt, token int64, sent time.Time) *Lock {
	k := l.newLock(ctx, a, token, sent)
	k.mu.Lock()
	deadline := k.deadline
	k.mu.Unlock()
	if clock.Now().Before(deadline) {
		return k
	}
	l.cfg.logger.Warn("rowlock: an acquisition answered after its lease's deadline; giving it back", "name", a.name, "token", token)
	l.giveBack(ctx, []*Lock{k})
	return nil
}

// newLock is the hold a won, with token, by a try sent at sent.
func (l *Locker) newLock(acquireCtx context.Context, a attempt, token int64, sent time.Time) *Lock {
	// The lock outlives Acquire's context (often a timeout), but keeps its
	// values, and carries the owner so that acquiring with it re-enters.
	base := dblock.WithOwner(context.WithoutCancel(acquireCtx), a.ownerID)
	ctx, cancel := context.WithCancelCause(base)
	renewCtx, stopRenew := context.WithCancel(context.Background())
	in := a.metrics
	if in == nil {
		in = l.metrics
	}
	belief := l.belief(a.ttl)
	k := &Lock{
		l:         l,
		metrics:   in,
		h:         holder{name: a.name, host: a.host, ownerID: a.ownerID, token: token},
		name:      a.name,
		token:     token,
		ttl:       a.ttl,
		belief:    belief,
		owner:     a.owner(),
		ctx:       ctx,
		cancel:    cancel,
		deadline:  sent.Add(belief - safetyMargin(belief)),
		acquired:  sent,
		renewCtx:  renewCtx,
		stopRenew: stopRenew,
		renewDone: make(chan struct{}),
	}
	// The loop starts when the first renewal is due, not now: most holds
	// end before that, and a goroutine started (and woken to end) for each
	// of them cost an uncontended acquire and release several percent on
	// a machine whose other threads were idle.
	firstRenewal := clock.Now().Add(k.belief / 3)
	k.renewStart = time.AfterFunc(k.belief/3, func() { k.renewLoop(firstRenewal) })
	if a.sessionKey != 0 {
		l.sess.Register(marked{k}, a.sessionKey)
	}
	return k
}

// Name is the lock's name (a Permit's or RWLock's: the semaphore's or the
// read/write lock's name).
func (k *Lock) Name() string { return k.name }

// Token is the fencing token; reentrant holds share it. See Permit and
// RWLock for the tokens of their holds.
func (k *Lock) Token() int64 { return k.token }

// Owner is who holds the lock.
func (k *Lock) Owner() dblock.Owner { return k.owner }

// Context carries the owner and is canceled when the lock is released or
// lost; context.Cause tells which.
func (k *Lock) Context() context.Context { return k.ctx }

// Done is closed when the lock is released or lost.
func (k *Lock) Done() <-chan struct{} { return k.ctx.Done() }

// Err is nil while held, then dblock.ErrReleased or an error wrapping
// dblock.ErrLockLost. It compares the renewal deadline with the clock
// itself, so it turns to ErrLockLost on time even when the renewal goroutine
// has not run yet (a paused process): check it right before acting on the
// lock, or better, fence the action with CheckHeld.
//
// The same holds for the lock's session marker (docs/design.md, Crash
// detection): past the marker's deadline Err reports the lock lost even if
// the session's goroutine has not run yet.
func (k *Lock) Err() error {
	k.mu.Lock()
	err, deadline, done := k.err, k.deadline, k.released || k.releasing
	k.mu.Unlock()
	if err != nil || done {
		// While a Release runs the hold counts as held: if it fails,
		// releaseFailed declares any loss met meanwhile.
		return err
	}
	now := clock.Now()
	if !now.Before(deadline) {
		k.lose(errors.New("lease deadline passed before a renewal succeeded"))
		return k.Err()
	}
	if d, marked := k.l.sess.Deadline(marked{k}); marked && !now.Before(d) {
		k.lose(fmt.Errorf("%w: its deadline passed before a heartbeat succeeded", errSessionEnded))
		return k.Err()
	}
	return nil
}

// TTL is how much of the hold's lease is sure to be left (redislock's TTL):
// the time until the deadline at which, unless a renewal succeeds first,
// the hold declares itself lost (Done, Err). It is measured as that
// deadline is, on the local monotonic clock: from when the last successful
// renewal (or the acquisition) was sent, the lease less a tenth. The
// database, whose clock alone judges the lease, counts from when it ran
// that statement, later: so by the database clock too the row stays this
// hold's for at least TTL. The background renewal moves the deadline on
// every lease/3, so while held TTL stays between about 0.57 and 0.9 of the
// lease. On PostgreSQL a lease longer than the failover pause counts as
// the pause here (see WithFailoverPause). It does not count the session marker (see Crash detection): a
// hold whose session connection fails is lost sooner, within the crash
// grace, and Done says so. It is 0 once the hold is released or lost. It
// does no I/O.
func (k *Lock) TTL() time.Duration {
	if k.Err() != nil {
		return 0
	}
	k.mu.Lock()
	deadline := k.deadline
	k.mu.Unlock()
	return max(deadline.Sub(clock.Now()), 0)
}

// CheckHeld proves, inside tx (a transaction on the lock's database), that
// this hold is still current: the row has this owner and token and an
// unexpired lease by the database clock. It locks the row in shared mode,
// so nobody can take the lock over until tx ends: writes made in tx before
// commit are fenced. Errors: an error wrapping dblock.ErrLockLost, or a
// driver error. Contention (tx lost a deadlock, or waited too long for the
// row) is not retried, since it may have aborted tx; it means the hold could
// not be proven, and is reported as ErrLockLost: roll tx back, and retry it
// if Err is still nil. Keep tx short: while it is open the holder's renewals wait
// for it too. On PostgreSQL use READ COMMITTED transactions: under
// REPEATABLE READ a renewal after tx began makes the check fail with a
// serialization error. On MySQL a failed check still holds a shared lock on
// the row of whoever holds the lock now; roll tx back promptly.
//
// On a Galera cluster row locks are each node's own, so there CheckHeld
// writes the row instead of locking it in shared mode: a takeover of the
// lock on another node and tx cannot both commit. The one that commits
// second fails with error 1213, often at tx's COMMIT: IsConflict reports
// it. It is retryable: roll back and run tx again, CheckHeld first, while
// Err is nil (docs/galera.md). There tx must not be READ ONLY.
func (k *Lock) CheckHeld(ctx context.Context, tx *sql.Tx) error {
	if err := lockinput.CheckContext(ctx); err != nil {
		return fmt.Errorf("rowlock: CheckHeld: %w", err)
	}
	if tx == nil {
		return fmt.Errorf("rowlock: CheckHeld: %w: nil *sql.Tx", dblock.ErrInvalidOption)
	}
	ok, err := k.l.store.checkHeld(ctx, tx, k.h)
	if lockkit.ClassifyError(err) == lockkit.ClassContention {
		// The cause is text only: contention errors never reach callers.
		return fmt.Errorf("%w: %q: hold not proven, the transaction met contention (%v)", dblock.ErrLockLost, k.h.name, err)
	}
	if err != nil {
		return lockkit.WrapDBError("rowlock: check "+fmt.Sprintf("%q", k.h.name), err)
	}
	if !ok {
		// A definite answer, on the lock's database: the hold is over.
		// Done says so now, not at the next renewal.
		k.lose(errNotHeld)
		return fmt.Errorf("%w: %q: not held with token %d", dblock.ErrLockLost, k.h.name, k.h.token)
	}
	return nil
}
