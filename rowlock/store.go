package rowlock

import (
	"context"
	"database/sql"
	"errors"
	"hash/fnv"
	"math"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/metrics"
	"github.com/sqllock/sqllock/internal/queue"
	"github.com/sqllock/sqllock/internal/rowops"
	"github.com/sqllock/sqllock/internal/wake"
)

// The tables created by package migrations.
const (
	locksTable   = "dblock_locks"
	fencesTable  = "dblock_fences"
	waitersTable = queue.Table
)

// fenceStripes is the number of token counters. It is part of the on-disk
// format: every process must map a name to the same stripe, so it never
// changes.
const fenceStripes = 1024

// stripeOf maps a name to its token counter (FNV-1a 64, mod fenceStripes).
// A lock row carries its token from holder to holder (+1 at each takeover);
// the counter matters only when a name has no row: it is at least every
// token of every deleted row of its stripe, so a fresh row starts above
// them. Names share counters, which keeps the fence table bounded.
func stripeOf(name string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return int64(h.Sum64() % fenceStripes)
}

// holder identifies one hold in the lock table: every statement that renews,
// releases or checks a lock is conditioned on all four, so nobody else can
// touch a lock they do not hold.
type holder struct {
	name    string
	host    string
	ownerID string
	token   int64
}

// attempt is what an acquisition asks for, passed to each of its tries,
// and, while it waits, where it stands.
type attempt struct {
	name    string
	host    string
	ownerID string
	note    string
	ttl     time.Duration
	minHold time.Duration
	// fair: a waiter joins the fair queue (dblock.Fair).
	fair bool
	// waiterID is the caller's row in the fair queue, 0 when not queued.
	waiterID int64
	// polling marks a waiter's repeated try on a dialect without release
	// notifications: a plain read first, and the try only when the lease
	// looks lapsed, keeps frequent polls cheap.
	polling bool
	// nowait: the try does not wait for a row lock that another
	// transaction holds on the name's row (a fenced transaction's
	// CheckHeld, a take or renewal in flight): the store answers not
	// acquired at once instead (TryAcquire). The take may still wait for
	// the short transactions that create a fresh name's row.
	nowait bool
	// sessionKey is the key of the Locker's session marker, recorded in
	// the row the try takes; 0 for none (the lease alone decides).
	sessionKey int64
	// metrics records the hold (of the lock type of the caller); nil for
	// the Locker's own (type mutex).
	metrics *metrics.Instruments
}

// owner is who the attempt takes the lock for.
func (a attempt) owner() dblock.Owner { return dblock.Owner{Host: a.host, ID: a.ownerID} }

// queueID is the id a try compares with the queue: a lapsed lock goes only
// to a contender with no live waiter older than it. Unqueued contenders
// compare as the youngest, so they never pass a live queue.
func (a attempt) queueID() int64 {
	if a.waiterID == 0 {
		return math.MaxInt64
	}
	return a.waiterID
}

// outcome is what a try found.
type outcome struct {
	acquired bool
	token    int64
	// holder is, when not acquired and known, the current holder.
	holder holderInfo
}

// holderInfo is what a waiter learns of the holder of a name.
type holderInfo struct {
	// remaining is how long the holder's lease has left by the database
	// clock (0 when unknown): a waiter need not poll before then unless
	// it is woken.
	remaining time.Duration
	// key is the holder's session marker, trusted (its row's
	// session_token is its token), or 0; token is the row's token.
	key, token int64
	// rings is true when the holder's release was armed to ring bell
	// generation bell of its session (MySQL, bell.go).
	rings bool
	bell  int64
}

// errHoldEnded is wantWake's answer when there was no live hold to arm.
var errHoldEnded = errors.New("rowlock: no live hold to ask a wake-up of")

// store is the SQL of one dialect. Implementations are in postgres.go and
// mysql.go; each method is one statement or one short transaction.
type store interface {
	// tryAcquire takes over the name's row if its lease has lapsed,
	// re-enters it for the same owner, or inserts it for a fresh name.
	tryAcquire(ctx context.Context, a attempt) (outcome, error)
	// release drops one hold; the last one frees the row (it stays, with
	// its token), or with MinHold pending leaves it to lapse at
	// acquired_at+MinHold. ok is false when the row is not held by h.
	release(ctx context.Context, h holder) (ok bool, err error)
	// renew pushes the lease to at least now+ttl by the database clock; it
	// never shortens it, since reentrant holds with different TTLs share
	// the row and the longest must win. ok is false
	// when the row is no longer held by h, or its lease has lapsed: a lapsed
	// lease is never revived, so a renewal that reaches the server late
	// (MySQL keeps running a statement whose client gave up while it waits
	// for a row lock) cannot extend a lock its holder has declared lost.
	renew(ctx context.Context, h holder, ttl time.Duration) (ok bool, err error)
	// dropHolds frees name if o holds it: every hold, at once. It undoes
	// a take whose outcome its caller could not learn (its context ended
	// or its connection failed while the statement ran) and that o did
	// not hold before (Locker.dropHolds).
	dropHolds(ctx context.Context, name string, o dblock.Owner) error
	// checkHeld locks h's row in shared mode inside tx if h still holds it
	// unexpired.
	checkHeld(ctx context.Context, tx *sql.Tx, h holder) (ok bool, err error)
	// sweep looks at the next limit rows after the name after, in name
	// order, and deletes those whose lease lapsed more than grace ago,
	// raising their stripes' counters to their tokens first.
	sweep(ctx context.Context, grace time.Duration, limit int, after string) (sweepBatch, error)
	// locks returns the locks held now, in name order, at most limit.
	locks(ctx context.Context, limit int) ([]rowops.HeldLock, error)
	// held returns name's lock if it is held now.
	held(ctx context.Context, name string) (rowops.HeldLock, bool, error)
	// countLapsed counts the rows whose lease has lapsed.
	countLapsed(ctx context.Context) (int, error)
	// wantWake asks that the release of name, held now (by h, as a try
	// found it), be announced to other processes, and returns the holder
	// as it is now. armed is false when its holder does not ring (MySQL):
	// there will be no announcement. The error is errHoldEnded when there
	// was no live hold to arm (PostgreSQL: none at all; MySQL: not h's):
	// the lock is free, lapsed and kept for fair waiters, or has changed
	// hands since the try.
	wantWake(ctx context.Context, name string, h holderInfo) (armed bool, now holderInfo, err error)
	// WatchStore is what the watcher (internal/wake) asks of the store:
	// waiting on a holder's bell or marker, and shortening the lease of a
	// holder whose session has ended.
	wake.WatchStore
	// notifies reports whether releases are announced to other processes
	// (PostgreSQL NOTIFY).
	notifies() bool
	// close releases what the store keeps (prepared statements); it may
	// still be used afterwards, less efficiently, by locks held across the
	// Locker's Close.
	close()
}

// sweepBatch is what one sweep statement or transaction did.
type sweepBatch struct {
	deleted int
	// scanned rows were looked at; fewer than the limit means the table
	// ends after last.
	scanned int
	last    string
}

func micros(d time.Duration) int64 { return d.Microseconds() }

// execer is what execOne and queryOne run on: the pool, the cache of
// prepared statements, or a transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// querier runs the listing queries: the pool.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// execOne runs a statement that changes at most one row and reports whether
// it did.
func execOne(ctx context.Context, db execer, query string, args ...any) (bool, error) {
	res, err := db.ExecContext(ctx, query, args...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n > 0, err
}

// queryOne runs a query that returns at most one row and reports whether it
// did.
func queryOne(ctx context.Context, db execer, query string, args ...any) (bool, error) {
	var one int
	err := db.QueryRowContext(ctx, query, args...).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// queryHeld runs a query whose rows are name, token, owner_host, owner_id,
// hold_count, note, µs since the lock was acquired and µs until its lease
// ends.
func queryHeld(ctx context.Context, db querier, query string, args ...any) ([]rowops.HeldLock, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	var out []rowops.HeldLock
	for rows.Next() {
		var h rowops.HeldLock
		var heldUs, expiresUs int64
		if err := rows.Scan(&h.Name, &h.Token, &h.OwnerHost, &h.OwnerID, &h.HoldCount, &h.Note, &heldUs, &expiresUs); err != nil {
			_ = rows.Close()
			return nil, err
		}
		h.HeldFor = time.Duration(heldUs) * time.Microsecond
		h.ExpiresIn = time.Duration(expiresUs) * time.Microsecond
		out = append(out, h)
	}
	return out, errors.Join(rows.Err(), rows.Close())
}

// scanHolder scans a row of holderInfo: the lease left in µs, the trusted
// session key, the token.
func scanHolder(row *sql.Row) (holderInfo, error) {
	var h holderInfo
	var us int64
	if err := row.Scan(&us, &h.key, &h.token); err != nil {
		return holderInfo{}, err
	}
	h.remaining = time.Duration(us) * time.Microsecond
	return h, nil
}

// listing is the part of a store that reads the lock table for operators
// (locks, held, countLapsed): one statement each, the dialects differing
// only in their SQL. Each store embeds it.
type listing struct {
	db  listingDB
	sql listingSQL
}

// listingDB runs listing's statements: a *sql.DB, or pgxrow.DB.
type listingDB interface {
	querier
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// listingSQL are a dialect's statements for listing. locks: limit; held:
// name (both rows as queryHeld reads them); countLapsed: none.
type listingSQL struct{ locks, held, countLapsed string }

func (s listing) locks(ctx context.Context, limit int) ([]rowops.HeldLock, error) {
	return queryHeld(ctx, s.db, s.sql.locks, limit)
}

func (s listing) held(ctx context.Context, name string) (rowops.HeldLock, bool, error) {
	return onlyRow(queryHeld(ctx, s.db, s.sql.held, name))
}

func (s listing) countLapsed(ctx context.Context) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, s.sql.countLapsed).Scan(&n)
	return n, err
}

// onlyRow returns the only lock a query by name returns, if any.
func onlyRow(locks []rowops.HeldLock, err error) (rowops.HeldLock, bool, error) {
	if err != nil || len(locks) == 0 {
		return rowops.HeldLock{}, false, err
	}
	return locks[0], true, nil
}

// ignoreDone drops the error of rolling back a transaction that already
// ended (a failed commit, a canceled context).
func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}
