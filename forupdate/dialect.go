package forupdate

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"time"

	"github.com/sqllock/sqllock/internal/pgxrow"
)

// dialect is the SQL and driver knowledge of one database family.
// Implementations are in postgres.go and mysql.go.
type dialect interface {
	// openSession prepares the holding connection before its transaction
	// begins, so that the server ends the session of a holder that falls
	// silent for ttl. closeSession undoes it before the connection returns
	// to the pool.
	openSession(ctx context.Context, conn *sql.Conn, ttl time.Duration) error
	closeSession(ctx context.Context, conn *sql.Conn) error
	// restoresSession tells whether closeSession has anything to undo.
	restoresSession() bool
	// txOptions are the options of the lock's transaction.
	txOptions() *sql.TxOptions
	// lock locks the row of c.name in c.tx. It waits in the database when
	// c.wait is set, and fails at once otherwise (a lock-not-available
	// error). Then it draws the token from a counter that no rollback
	// undoes. Drawn after the row lock is won, the token is larger than
	// every earlier holder's, even of holders whose transactions rolled
	// back. found is false when the row does not exist. interrupted reports
	// that ctx ended while the statement ran.
	lock(ctx context.Context, c lockCall) (token int64, found, interrupted bool, err error)
	// create inserts the row of name unless it exists, outside any
	// transaction, without waiting for row locks where it can and without
	// raising (and logging) duplicate-key errors.
	create(ctx context.Context, conn *sql.Conn, name string) error
	// ping checks the holding connection through its driver connection,
	// which database/sql keeps locked for the duration: no statement of the
	// lock's user runs meanwhile.
	ping(ctx context.Context, driverConn any) (pingOutcome, error)
	// rolledBack tells whether a Commit error means the database rolled
	// the transaction back.
	rolledBack(commitErr error) bool
	// warm gets what the dialect keeps ready (prepared statements) before
	// an acquisition takes its connection, waiting at most bound.
	warm(ctx context.Context, bound time.Duration, req request)
	// close releases what the dialect keeps (prepared statements); it may
	// still be used afterwards, by locks held across the Locker's Close.
	close()
	// semSQL are the semaphores' statements (on MySQL, known once
	// openSession has run).
	semSQL() *semSQL
	// queryRow runs query in tx, prepared where the dialect keeps it so.
	queryRow(ctx context.Context, tx *sql.Tx, query string, args ...any) *sql.Row
	// on runs statements on q (the lock's connection or a transaction on
	// it) as the dialect must: on PostgreSQL in the exec mode that works
	// through a transaction pooler.
	on(q pgxrow.Querier) pgxrow.Querier
	// semTook finishes taking slot c.name, which semSQL.take locked and
	// returned token for: it draws the token where the take could not
	// (MySQL 8.0), and undoes in the session what an earlier bounded wait
	// of the acquisition (c.contended) changed.
	semTook(ctx context.Context, c lockCall, token int64) (int64, error)
}

// errDrawContention marks contention while drawing a token once the row
// lock was won: the lock was free, so the attempt is started over rather
// than reported as not acquired.
var errDrawContention = errors.New("forupdate: contention while drawing the token")

// lockCall is one attempt to lock a row.
type lockCall struct {
	conn *sql.Conn
	tx   *sql.Tx
	name string
	ttl  time.Duration
	wait bool
	// share locks the row FOR SHARE (a reader) rather than FOR UPDATE.
	share bool
	// bound, when positive, bounds how long a waiting statement waits for
	// the row lock before it fails as contended (a semaphore's waiter,
	// which then looks at the other slots again).
	bound time.Duration
	// contended is set when an earlier attempt of this acquisition, in a
	// transaction of its own, found the row locked or hit contention.
	contended bool
}

// pingOutcome is what a ping found besides errors.
type pingOutcome int

const (
	// pingAlive: the server answered.
	pingAlive pingOutcome = iota
	// pingBusy: a result set of the lock's user is open on the connection;
	// a ping now would interleave with it, so none was sent.
	pingBusy
	// pingTxEnded: the lock's transaction was committed or rolled back by
	// someone else than Release (through Tx): the row lock is gone.
	pingTxEnded
	// pingTxAborted: a statement failed in the transaction and the database
	// aborted all of it, not just a savepoint (PostgreSQL), which released
	// the row lock at once.
	pingTxAborted
)

// Bounds of the work done after the caller's context ended.
const (
	// interruptTimeout bounds one attempt to tell the server to stop a
	// waiting statement (a cancel request, KILL QUERY).
	interruptTimeout = 2 * time.Second
	// interruptGrace is how long the waiting statement may take to return
	// after the context ended, before the connection is cut.
	interruptGrace = 2 * time.Second
	// interruptRetry is the pause between attempts: an attempt made before
	// the statement reached the server finds nothing to stop.
	interruptRetry = 20 * time.Millisecond
)

// runInterruptible runs a statement that may wait in the database for a
// row lock. Ending ctx stops the wait on the server too, not only in the
// client. Otherwise the driver would close the connection, and the server
// would go on waiting for the lock on behalf of nobody. interrupt asks the
// server to stop the statement if it runs; it is nil when the driver does
// so itself. It is repeated until the statement returns, and the context
// it gets ends then. If an attempt fails, or the
// statement does not return within grace after ctx ended, the statement's
// context is canceled and the driver cuts the connection. interrupted
// reports whether ctx ended while the statement ran.
func runInterruptible(ctx context.Context, interrupt func(context.Context) error, grace time.Duration, run func(context.Context) error) (interrupted bool, err error) {
	if interrupt == nil || ctx.Done() == nil {
		err = run(ctx)
		return ctx.Err() != nil, err
	}
	stmtCtx, hardStop := context.WithCancel(context.WithoutCancel(ctx))
	defer hardStop()
	// An interrupt waiting for something (a pool connection the statement
	// itself may be keeping) gives up once the statement has returned.
	running, returned := context.WithCancel(stmtCtx)
	defer returned()
	finished := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(finished)
		deadline := time.NewTimer(grace)
		defer deadline.Stop()
		retry := time.NewTimer(0)
		defer retry.Stop()
		for {
			select {
			case <-running.Done():
				return
			case <-deadline.C:
				hardStop()
				return
			case <-retry.C:
			}
			ictx, cancel := context.WithTimeout(running, interruptTimeout)
			ierr := interrupt(ictx)
			cancel()
			if ierr != nil {
				hardStop()
				return
			}
			retry.Reset(interruptRetry)
		}
	})
	err = run(stmtCtx)
	returned()
	if !stop() {
		// The interrupt ran (or runs): wait for it, so that nothing it does
		// reaches the server after this function returns.
		<-finished
		return true, err
	}
	return false, err
}

// discard makes database/sql close conn's driver connection instead of
// returning it to the pool: used when its session state is uncertain.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = conn.Close()
}

// pingDriver pings through database/sql/driver interfaces, for drivers
// this package has no special knowledge of.
func pingDriver(ctx context.Context, dc any) (pingOutcome, error) {
	if v, ok := dc.(driver.Validator); ok && !v.IsValid() {
		return pingBusy, nil
	}
	if p, ok := dc.(driver.Pinger); ok {
		return pingAlive, p.Ping(ctx)
	}
	return pingAlive, nil
}
