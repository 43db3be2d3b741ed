package rowlock

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/pgxrow"
)

// kindsStore is the SQL that the lock kinds built from several rows
// (AcquireAll, Semaphore, read/write locks) need beside store's, per
// dialect (kinds_postgres.go, kinds_mysql.go). The rows are taken, renewed
// and released through store, like any lock.
type kindsStore interface {
	// ownerHolds returns which of names o holds now (a live lease, at
	// least one hold).
	ownerHolds(ctx context.Context, names []string, o dblock.Owner) (map[string]bool, error)
	// rows reads those of names that have a row.
	rows(ctx context.Context, names []string) (map[string]kindRow, error)
	// lockRows reads them as rows does, but locked for update, in a
	// statement of its own (see settleRows). With nowait a row that
	// another transaction has locked fails it at once, with an error that
	// rowsBusy recognizes.
	lockRows(ctx context.Context, names []string, nowait bool) (map[string]kindRow, error)
	// limitSQL is the SQL of semaphores' recorded limits.
	limitSQL() limitSQL
	// writer reads the row name, on stripe, of a read/write lock's writer;
	// the token of a name with no row is its stripe's counter (0 if none):
	// the next row of the name starts above it.
	writer(ctx context.Context, name string, stripe int64) (kindRow, error)
}

// kindRow is what the kinds read of a lock row.
type kindRow struct {
	// live: the lease has not lapsed, by the database clock. A live row
	// with no holds is kept taken by MinHold.
	live      bool
	holdCount int
	ownerHost string
	ownerID   string
	// holder is the lease left, the trusted session marker and the token.
	holder holderInfo
}

// heldBy reports whether o holds the row now.
func (r kindRow) heldBy(o dblock.Owner) bool {
	return r.live && r.holdCount > 0 && r.ownerHost == o.Host && r.ownerID == o.ID
}

// limitSQL are the statements on dblock_semaphores. IN lists are %s, to be
// filled with placeholders numbered from the position given.
type limitSQL struct {
	// read, readShared, readForUpdate read a name's permits: plainly,
	// locked in shared mode, locked for update.
	read, readShared, readForUpdate string
	// insert writes a name's permits (name, permits); update changes
	// them (permits, name).
	insert, update string
	// countLive locks for update the rows of the IN list, but the one
	// named by the first parameter (the list starts at the second), and
	// returns whether each is live: see countLive.
	countLive string
	// in returns n placeholders numbered from first.
	in func(first, n int) string
	// scan lists (name, permits) of the next records after a name, in
	// name order, at most a limit; lockIdle locks a name's record, if it
	// was last written more than a grace (µs) ago and no acquirer has it
	// locked (name, grace), returning its permits; remove deletes it.
	scan, lockIdle, remove string
}

// kinds returns the Locker's kindsStore.
func (l *Locker) kinds() kindsStore {
	if l.cfg.dialect == dblock.Postgres {
		return pgKinds{db: l.runner()}
	}
	return myKinds{db: l.runner()}
}

// semaphoresTable records the limits of semaphores (migration 3).
const semaphoresTable = "dblock_semaphores"

// ensureLimit checks, once the caller holds the slot own of semaphore name,
// that its limit is the one recorded. It records the limit when there is
// none, or when no slot of the name is held by anyone else (slotsOf(n) are
// the slots of limit n; those of the larger limit are counted). It runs in
// one READ COMMITTED transaction. The record is read in shared mode, so
// acquirers with the same limit do not wait for one another. It is locked
// for update only to change it. Then the slots are counted by a statement
// of its own, which sees every slot taken before the lock was granted. An acquirer that took its slot later
// reads the record only once the change has committed, and finds it no
// longer agrees. So holders that have passed this check never disagree
// about the limit. It returns the limit recorded and, when that is not
// limit, how many slots others hold.
func ensureLimit(ctx context.Context, db pgxrow.DB, q limitSQL, name string, limit int, slotsOf func(limit int) []string, own string) (recorded, inUse int, err error) {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		if err != nil || recorded != limit {
			err = errors.Join(err, ignoreDone(tx.Rollback()))
		}
	}()
	err = db.On(tx).QueryRowContext(ctx, q.readShared, name).Scan(&recorded)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		// A concurrent insert makes this one a unique violation, which
		// is contention: the caller runs the transaction again.
		if _, err := db.On(tx).ExecContext(ctx, q.insert, name, limit); err != nil {
			return 0, 0, err
		}
		return limit, 0, tx.Commit()
	case err != nil:
		return 0, 0, err
	case recorded == limit:
		return limit, 0, tx.Commit()
	}
	if err := db.On(tx).QueryRowContext(ctx, q.readForUpdate, name).Scan(&recorded); err != nil {
		return 0, 0, err
	}
	if recorded == limit {
		return limit, 0, tx.Commit()
	}
	if inUse, err = countLive(ctx, db.On(tx), q, own, slotsOf(max(limit, recorded))); err != nil {
		return 0, 0, err
	}
	if inUse > 0 {
		return recorded, inUse, nil
	}
	if _, err := db.On(tx).ExecContext(ctx, q.update, limit, name); err != nil {
		return 0, 0, err
	}
	return limit, 0, tx.Commit()
}

// countLive counts the live rows among names, but own, in tx. It locks
// them for update, so it waits for every transaction that holds one in
// shared mode. A holder whose lease lapsed while its fenced transaction
// (CheckHeld) is still open is counted until that transaction has ended.
// Its row is then read again, and by then it can no longer act under the
// hold. A plain read would count it gone and let the limit change under
// it. This is the rule "no takeover under an open fenced transaction"
// (docs/design.md, "rowlock: why it is safe").
func countLive(ctx context.Context, tx pgxrow.Runner, q limitSQL, own string, names []string) (int, error) {
	// Placeholders only are spliced in; the names are arguments.
	query := strings.Replace(q.countLive, "%s", q.in(2, len(names)), 1)
	rows, err := tx.QueryContext(ctx, query, withNames([]any{own}, names)...)
	if err != nil {
		return 0, err
	}
	n := 0
	for rows.Next() {
		var live bool
		if err := rows.Scan(&live); err != nil {
			_ = rows.Close()
			return 0, err
		}
		if live {
			n++
		}
	}
	return n, errors.Join(rows.Err(), rows.Close())
}

// scanNames collects the first column of rows.
func scanNames(rows *sql.Rows, err error) (map[string]bool, error) {
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			_ = rows.Close()
			return nil, err
		}
		out[name] = true
	}
	return out, errors.Join(rows.Err(), rows.Close())
}

// scanWriter scans the row of kindsStore.writer: live, hold_count,
// owner_host, owner_id, µs of lease left, trusted session key, token.
func scanWriter(row *sql.Row) (kindRow, error) {
	var r kindRow
	var us int64
	err := row.Scan(&r.live, &r.holdCount, &r.ownerHost, &r.ownerID, &us, &r.holder.key, &r.holder.token)
	r.holder.remaining = time.Duration(us) * time.Microsecond
	return r, err
}

// scanKindRows collects rows of name, live, hold_count, owner_host,
// owner_id, µs of lease left, trusted session key, token.
func scanKindRows(rows *sql.Rows, err error) (map[string]kindRow, error) {
	if err != nil {
		return nil, err
	}
	out := map[string]kindRow{}
	for rows.Next() {
		var name string
		var r kindRow
		var us int64
		if err := rows.Scan(&name, &r.live, &r.holdCount, &r.ownerHost, &r.ownerID, &us, &r.holder.key, &r.holder.token); err != nil {
			_ = rows.Close()
			return nil, err
		}
		r.holder.remaining = time.Duration(us) * time.Microsecond
		out[name] = r
	}
	return out, errors.Join(rows.Err(), rows.Close())
}

// dropHoldsLocked runs a dropHolds statement (drop: name, host, owner) in a
// transaction that first waits for the owner's takes in flight to end
// (await: owner id; PostgreSQL's pgAwaitTake, none on MySQL), then for the
// row's lock (lockRow: name). Alone, an UPDATE whose WHERE fails on the row
// version it sees waits for nobody (PostgreSQL; InnoDB's semi-consistent
// reads under READ COMMITTED). So a take of the owner's could still wait
// for that row lock after its client gave up. It would commit after the
// drop and be held by nobody. InnoDB grants a row lock to its waiters in
// the order they asked, so on MySQL the row lock is enough; PostgreSQL
// lets a newcomer have it before a woken waiter, hence the await. A take
// whose statement has not reached the server yet (or not the point where
// it marks itself) can still commit after the drop: that hold lapses with
// its lease.
func dropHoldsLocked(ctx context.Context, db pgxrow.DB, await, lockRow, drop, name string, o dblock.Owner) (err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, ignoreDone(tx.Rollback()))
		}
	}()
	r := db.On(tx)
	if await != "" {
		if _, err := r.ExecContext(ctx, await, o.ID); err != nil {
			return err
		}
	}
	rows, err := r.QueryContext(ctx, lockRow, name)
	if err != nil {
		return err
	}
	if err := rows.Close(); err != nil {
		return err
	}
	if _, err := r.ExecContext(ctx, drop, name, o.Host, o.ID); err != nil {
		return err
	}
	return tx.Commit()
}

// rowsBusy reports whether err is lockRows' with nowait finding a row that
// another transaction has locked (PostgreSQL 55P03, MySQL 3572; MariaDB
// reports NOWAIT as a lock wait timeout, 1205).
func rowsBusy(err error) bool {
	if lockkit.ClassifyError(err) == lockkit.ClassLockUnavailable {
		return true
	}
	var myErr *mysql.MySQLError
	return errors.As(err, &myErr) && myErr.Number == 1205
}
