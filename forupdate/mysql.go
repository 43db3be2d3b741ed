package forupdate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/pgxrow"
	"github.com/sqllock/sqllock/internal/stmtcache"
)

// mysql: the server timeout is the session's wait_timeout, set before the
// transaction begins and restored after it ends, before the connection
// returns to the pool (MySQL has no transaction-local variables). The
// restore runs once Release has returned (see Locker.endSession): the
// lock is free by then, and nobody waits for the connection's
// housekeeping.
//
// Tokens come from a counter that no rollback undoes, drawn once the row
// lock is held. On MariaDB the counter is a sequence and the locking
// SELECT draws from it itself: InnoDB locks the row as it reads it,
// before the select list is computed, so NEXTVAL runs only for a row this
// transaction holds (a missing row draws nothing). No row is written, so
// the COMMIT flushes no log. MySQL 8.0 has no sequences: there the counter
// is a table whose AUTO_INCREMENT (kept across restarts) a REPLACE ...
// VALUES draws once the SELECT ... FOR UPDATE has returned, and
// LAST_INSERT_ID hands it back in the OK packet (no RETURNING); that write
// costs the COMMIT a log flush. One REPLACE ... SELECT ... FOR UPDATE would
// do both in one round trip, but InnoDB counts an INSERT ... SELECT as a
// bulk insert, which (innodb_autoinc_lock_mode 1) holds a table-wide
// AUTO-INC lock to the end of the statement: under NOWAIT, an acquisition
// of one name failed with error 1467 while another name's statement held
// that lock. The hot statements are prepared once per connection (stmts).
//
// A waiting statement is stopped with KILL QUERY sent through another
// connection of the pool. When the pool has none to give, the client can
// only cut the statement's connection. The server would then go on
// waiting for the row lock on behalf of nobody, until
// innodb_lock_wait_timeout (50 s by default), and perhaps take it and
// draw a token. So an Acquire first tries NOWAIT, which never waits: an
// uncontended Acquire costs what TryAcquire does. Only when the row is
// taken does it wait, in statements that each wait at most
// myLockWaitSlice (less when the context's deadline is nearer), set as the
// session's innodb_lock_wait_timeout for them and restored before Acquire
// returns, so the user's statements in Tx keep the server's value. A wait
// that runs out is begun again in a new transaction; a wait that cannot
// be interrupted is let run out instead of cut, and the connection stays
// clean.
type mysql struct {
	db        *sql.DB
	stmts     *stmtcache.Cache
	table     string
	counter   string
	insertRow string
	// counterTable draws tokens from a counter table even on MariaDB: the
	// tests of MySQL 8.0's way run on the MariaDB server they have. Set
	// before the first acquisition.
	counterTable bool
	// q is the SQL for the server's kind, known from the first
	// acquisition on.
	q atomic.Pointer[mySQL]
}

// mySQL is the SQL for one kind of server.
type mySQL struct {
	// lockWait and lockTry lock the name's row and return its token (a
	// sequence) or 1 (a counter table).
	lockWait, lockTry string
	// drawToken draws the token from a counter table once the row is
	// locked; empty with a sequence.
	drawToken string
	// shareWait and shareTry lock the row shared (readers), as lockWait
	// and lockTry; shareToken reads a reader's token from a counter
	// table: the last writer's.
	shareWait, shareTry, shareToken string
	// sem are the semaphores' statements.
	sem *semSQL
}

// myIsMariaDB tells the servers with sequences from MySQL's.
const myIsMariaDB = `SELECT VERSION() LIKE '%MariaDB%'`

func newMySQL(db *sql.DB, table, counter string) *mysql {
	return &mysql{
		db:      db,
		stmts:   stmtcache.New(db),
		table:   table,
		counter: counter,
		// IGNORE: no duplicate-key error. It waits for the row lock when the
		// row exists and is held, which happens only when another process
		// created and took the row since this one found it missing.
		insertRow: `INSERT IGNORE INTO ` + table + ` (name) VALUES (?)`,
	}
}

// sqlFor is the SQL for MariaDB or MySQL, drawing tokens from a sequence
// or a counter table. MariaDB knows only LOCK IN SHARE MODE, and MySQL
// 8.0 takes NOWAIT only after FOR SHARE.
func (m *mysql) sqlFor(maria, sequence bool) *mySQL {
	shared, sharedTry := ` FOR SHARE`, ` FOR SHARE NOWAIT`
	if maria {
		shared, sharedTry = ` LOCK IN SHARE MODE`, ` LOCK IN SHARE MODE NOWAIT`
	}
	q := &mySQL{sem: m.buildSemSQL(sequence)}
	if sequence {
		sel := `SELECT NEXTVAL(` + m.counter + `) FROM ` + m.table + ` WHERE name = ?`
		q.lockWait, q.lockTry = sel+` FOR UPDATE`, sel+` FOR UPDATE NOWAIT`
		q.shareWait, q.shareTry = sel+shared, sel+sharedTry
		return q
	}
	sel := `SELECT 1 FROM ` + m.table + ` WHERE name = ?`
	q.lockWait, q.lockTry = sel+` FOR UPDATE`, sel+` FOR UPDATE NOWAIT`
	q.shareWait, q.shareTry = sel+shared, sel+sharedTry
	// Only the holder of a name writes its counter row: no waits there.
	q.drawToken = `REPLACE INTO ` + m.counter + ` (name) VALUES (?)`
	// Readers must not write the counter row, or they would exclude one
	// another until they commit: a reader's token is the last writer's,
	// read (a plain read, once the row is locked) from the counter row.
	q.shareToken = `SELECT COALESCE(MAX(token), 0) FROM ` + m.counter + ` WHERE name = ?`
	return q
}

// forCall are the statements of an attempt: FOR UPDATE or shared, and how
// it draws its token (empty with a sequence, which the locking statement
// draws from).
func (q *mySQL) forCall(c lockCall) (try, wait, draw string) {
	if c.share {
		return q.shareTry, q.shareWait, q.shareToken
	}
	return q.lockTry, q.lockWait, q.drawToken
}

func (m *mysql) close() { m.stmts.Close() }

// warm prepares the lock's statements before the acquisition takes its
// connection, and only with a connection to spare: preparing takes one of
// the pool, and inside the transaction (through Tx.StmtContext) a
// statement prepared elsewhere is prepared again on the transaction's own
// connection without taking another. Without one to spare, or before the
// first acquisition has learnt the server's kind, the acquisition runs its
// statements unprepared.
func (m *mysql) warm(ctx context.Context, bound time.Duration, req request) {
	q := m.q.Load()
	if q == nil {
		return
	}
	var queries []string
	switch req.kind {
	case kindRead:
		queries = []string{q.shareTry, q.shareToken}
	case kindPermit:
		queries = []string{q.sem.readShared, q.sem.take(req.limit), q.drawToken}
	default:
		queries = []string{q.lockTry, q.drawToken}
	}
	queries = slices.DeleteFunc(queries, func(s string) bool { return s == "" })
	// Prepared first: it is the usual answer, and costs only the cache's
	// mutex, where Stats takes the pool's.
	if m.stmts.Prepared(queries...) || m.db.Stats().Idle == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	m.stmts.Warm(ctx, queries...)
}

func (m *mysql) openSession(ctx context.Context, conn *sql.Conn, ttl time.Duration) error {
	if m.q.Load() == nil {
		var maria bool
		if err := conn.QueryRowContext(ctx, myIsMariaDB).Scan(&maria); err != nil {
			return err
		}
		m.q.CompareAndSwap(nil, m.sqlFor(maria, maria && !m.counterTable))
	}
	// Rounded up without adding first: ttl+time.Second-1 overflows for the
	// longest TTLs, which made wait_timeout one second.
	seconds := int64(ttl / time.Second)
	if ttl%time.Second != 0 {
		seconds++
	}
	seconds = min(max(seconds, 1), maxWaitTimeout)
	// An integer computed here, not user input.
	_, err := conn.ExecContext(ctx, mySaveAndSetTimeout+strconv.FormatInt(seconds, 10))
	return err
}

func (*mysql) closeSession(ctx context.Context, conn *sql.Conn) error {
	_, err := conn.ExecContext(ctx, myRestoreTimeout)
	return err
}

// restoresSession: the session's timeouts are set per lock.
func (*mysql) restoresSession() bool { return true }

// The server's default isolation: any level works for locking reads, and
// asking for one costs go-sql-driver an extra statement.
func (*mysql) txOptions() *sql.TxOptions { return nil }

func (m *mysql) lock(ctx context.Context, c lockCall) (token int64, found, interrupted bool, err error) {
	q := m.q.Load() // set by openSession
	try, wait, draw := q.forCall(c)
	switch {
	case !c.wait:
		token, found, err = m.lockRow(ctx, c, try)
	case !c.contended:
		// NOWAIT until the row is found taken (see the type's doc). Not
		// cut short by ctx, which would make the driver close the
		// connection: it returns at once.
		sctx, cancel := shortContext(ctx)
		token, found, err = m.lockRow(sctx, c, try)
		cancel()
	default:
		return m.lockWaiting(ctx, c, wait, draw)
	}
	if err != nil || !found {
		return 0, false, false, err
	}
	if draw != "" {
		token, err = m.drawFor(ctx, c, draw)
	}
	return token, err == nil, false, err
}

// drawFor draws c's token with draw, once the row is locked: a writer's
// from the counter table (draw), a reader's by reading it (readToken).
func (m *mysql) drawFor(ctx context.Context, c lockCall, draw string) (int64, error) {
	if !c.share {
		return m.draw(ctx, c, draw)
	}
	sctx, cancel := shortContext(ctx)
	defer cancel()
	var token int64
	err := m.queryRow(sctx, c.tx, draw, c.name).Scan(&token)
	return token, err
}

// lockRow locks the name's row without waiting (NOWAIT), prepared, and
// returns what the statement returns (see mySQL); found is false when
// there is no row.
func (m *mysql) lockRow(ctx context.Context, c lockCall, query string) (v int64, found bool, err error) {
	stmt, done := m.stmts.Ready(query)
	defer done()
	var row *sql.Row
	if stmt != nil {
		row = c.tx.StmtContext(ctx, stmt).QueryRowContext(ctx, c.name)
	} else {
		row = c.tx.QueryRowContext(ctx, query, c.name)
	}
	err = row.Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return v, err == nil, err
}

// draw gives the name's row in the counter table a new AUTO_INCREMENT
// value, once the row lock is held, and returns it. Not cut short by ctx:
// it waits for nothing (only the holder writes the name's counter row),
// and a canceled statement would cost the connection. Contention here (a
// deadlock the server chose this transaction for) is wrapped in
// errDrawContention: the attempt is started over, even by TryAcquire, since
// the lock itself was free.
func (m *mysql) draw(ctx context.Context, c lockCall, drawToken string) (int64, error) {
	sctx, cancel := shortContext(ctx)
	defer cancel()
	stmt, done := m.stmts.Ready(drawToken)
	defer done()
	var res sql.Result
	var err error
	if stmt != nil {
		res, err = c.tx.StmtContext(sctx, stmt).ExecContext(sctx, c.name)
	} else {
		res, err = c.tx.ExecContext(sctx, drawToken, c.name)
	}
	if err == nil {
		var token int64
		if token, err = res.LastInsertId(); err == nil {
			return token, nil
		}
	}
	if lockkit.ClassifyError(err) == lockkit.ClassContention {
		return 0, fmt.Errorf("%w: %w", errDrawContention, err)
	}
	return 0, err
}

const (
	// The session's innodb_lock_wait_timeout is saved here, with
	// wait_timeout, and restored with it: a canceled Acquire may leave
	// the bound of its waiting statement set.
	mySaveAndSetTimeout = `SET @sqllock_wait_timeout = @@SESSION.wait_timeout, ` +
		`@sqllock_lock_wait_timeout = @@SESSION.innodb_lock_wait_timeout, SESSION wait_timeout = `
	myRestoreTimeout = `SET SESSION wait_timeout = @sqllock_wait_timeout, ` +
		`SESSION innodb_lock_wait_timeout = @sqllock_lock_wait_timeout, ` +
		`@sqllock_wait_timeout = NULL, @sqllock_lock_wait_timeout = NULL`
	myBoundLockWait   = `SET SESSION innodb_lock_wait_timeout = `
	myRestoreLockWait = `SET SESSION innodb_lock_wait_timeout = @sqllock_lock_wait_timeout`
)

func (m *mysql) create(ctx context.Context, conn *sql.Conn, name string) error {
	query, marker := marked(m.insertRow)
	// It waits only in a rare race (see newMySQL); if cut, the orphaned
	// statement inserts nothing the name lacks, draws no token and, in
	// autocommit, leaves no transaction behind.
	_, err := runInterruptible(ctx, m.killer(marker), interruptGrace, func(ctx context.Context) error {
		_, err := conn.ExecContext(ctx, query, name)
		return err
	})
	return err
}

func (*mysql) ping(ctx context.Context, dc any) (pingOutcome, error) {
	// go-sql-driver's IsValid is false while unread result data is
	// buffered; COM_PING answers without touching the transaction.
	return pingDriver(ctx, dc)
}

func (*mysql) rolledBack(error) bool { return false }

func (m *mysql) semSQL() *semSQL { return m.q.Load().sem } // set by openSession

func (*mysql) on(q pgxrow.Querier) pgxrow.Querier { return q }

// queryRow runs query in tx through its prepared statement if warm has
// prepared it; database/sql keeps the row readable after done.
func (m *mysql) queryRow(ctx context.Context, tx *sql.Tx, query string, args ...any) *sql.Row {
	stmt, done := m.stmts.Ready(query)
	defer done()
	if stmt == nil {
		return tx.QueryRowContext(ctx, query, args...)
	}
	return tx.StmtContext(ctx, stmt).QueryRowContext(ctx, args...)
}

// semTook draws a permit's token from the counter table (MySQL 8.0), and
// gives the user's statements in Tx the session's lock wait timeout back
// after a bounded wait (c.contended).
func (m *mysql) semTook(ctx context.Context, c lockCall, token int64) (int64, error) {
	q := m.q.Load()
	if q.drawToken != "" {
		var err error
		if token, err = m.draw(ctx, c, q.drawToken); err != nil {
			return 0, err
		}
	}
	if c.contended {
		sctx, cancel := shortContext(ctx)
		defer cancel()
		if _, err := c.tx.ExecContext(sctx, myRestoreLockWait); err != nil {
			return 0, err
		}
	}
	return token, nil
}
