package lockkit

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sqllock/sqllock/dblock"
)

// ErrorClass is what sqllock makes of a driver error.
type ErrorClass int

// Error classes, from ClassifyError.
const (
	// ClassOther is an error sqllock does not expect; it is returned as is.
	ClassOther ErrorClass = iota
	// ClassContention is a serialization failure, deadlock, lock wait
	// timeout or unique violation caused by a concurrent contender: retry
	// the statement, or report "not acquired". Never shown to users.
	ClassContention
	// ClassLockUnavailable is NOWAIT's "could not obtain lock".
	ClassLockUnavailable
	// ClassMissingTable means the lock tables have not been created.
	ClassMissingTable
	// ClassClosed means the *sql.DB was closed.
	ClassClosed
	// ClassReadOnly means the server refused a write because it is
	// read-only (a standby, a replica, read-only mode).
	ClassReadOnly
	// ClassUnavailable means the server could not be reached or ended the
	// connection (see dblock.ErrUnavailable): it may answer again later.
	ClassUnavailable
)

type sqlStater interface{ SQLState() string }

// ClassifyError sorts a driver error into an ErrorClass by PostgreSQL
// SQLSTATE or MySQL error number, then by the network and connection
// errors of the drivers and database/sql. It is the one place where
// sqllock reads driver errors (the CLI's exit codes use it too), so it is
// one flat table of codes: its cyclomatic complexity is the number of
// codes, and splitting it would scatter them.
func ClassifyError(err error) ErrorClass {
	if err == nil {
		return ClassOther
	}
	if errors.Is(err, dblock.ErrUnavailable) {
		return ClassUnavailable // classified once already
	}
	var pgErr sqlStater
	if errors.As(err, &pgErr) {
		switch code := pgErr.SQLState(); code {
		case "40001", "40P01", "23505":
			return ClassContention
		case "55P03":
			return ClassLockUnavailable
		case "42P01":
			return ClassMissingTable
		case "25006": // read_only_sql_transaction: hot standby or default_transaction_read_only
			return ClassReadOnly
		case "57P01", // admin_shutdown: a fast shutdown, or pg_terminate_backend
			"57P02", // crash_shutdown: another backend crashed
			"57P03", // cannot_connect_now: starting up, shutting down, in recovery
			"57P05", // idle_session_timeout: the server ended an idle session
			// idle_in_transaction_session_timeout: the server ended a
			// session idle in its transaction, as forupdate asks it to
			// when a lock's holder goes quiet for its TTL (a process
			// paused mid-acquisition meets it too). A new one may succeed.
			"25P03",
			"53300": // too_many_connections
			return ClassUnavailable
		default:
			if strings.HasPrefix(code, "08") { // connection_exception (also PgBouncer's refusals)
				return ClassUnavailable
			}
		}
		return ClassOther
	}
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) {
		switch myErr.Number {
		case 1213, 1205, 1062,
			3101: // ER_TRANSACTION_ROLLBACK_DURING_COMMIT: Group Replication's failed certification
			return ClassContention
		case 3572: // ER_LOCK_NOWAIT (MySQL 8.0)
			return ClassLockUnavailable
		case 1146:
			return ClassMissingTable
		case 4089: // ER_NOT_SEQUENCE (MariaDB): the schema predates the sequence
			return ClassMissingTable
		case 1792, 1836: // ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION, ER_READ_ONLY_MODE
			return ClassReadOnly
		case 1290:
			// ER_OPTION_PREVENTS_STATEMENT names the option that refused the
			// statement; only --read-only and --super-read-only mean a
			// read-only server.
			if strings.Contains(myErr.Message, "read-only") || strings.Contains(myErr.Message, "read_only") {
				return ClassReadOnly
			}
		case 1040, 1203, 1129:
			// Too many connections (max_connections, max_user_connections),
			// or this host blocked after too many failed connects.
			return ClassUnavailable
		case 1053, 1077, 1078, 1079, 1080:
			// Shutting down: ER_SERVER_SHUTDOWN, ER_NORMAL_SHUTDOWN,
			// ER_GOT_SIGNAL, ER_SHUTDOWN_COMPLETE, ER_FORCING_CLOSE.
			return ClassUnavailable
		case 1081, 1152, 1184, 1158, 1159, 1160, 1161, 1927, 4031:
			// The connection failed or was ended: ER_IPSOCK_ERROR,
			// ER_ABORTING_CONNECTION, ER_NEW_ABORTING_CONNECTION,
			// ER_NET_READ_ERROR, ER_NET_READ_INTERRUPTED,
			// ER_NET_ERROR_ON_WRITE, ER_NET_WRITE_INTERRUPTED,
			// ER_CONNECTION_KILLED (MariaDB), ER_CLIENT_INTERACTION_TIMEOUT
			// (MySQL 8.0.24+: an idle session ended by the server).
			return ClassUnavailable
		case 2002, 2003, 2005, 2006, 2013, 2055:
			// libmysqlclient's codes for a server that cannot be reached or
			// went away (CR_CONNECTION_ERROR, CR_CONN_HOST_ERROR,
			// CR_UNKNOWN_HOST, CR_SERVER_GONE_ERROR, CR_SERVER_LOST,
			// CR_SERVER_LOST_EXTENDED). go-sql-driver reports these cases
			// with Go errors (below), but a proxy may forward the codes.
			return ClassUnavailable
		case 1047:
			// ER_UNKNOWN_COM_ERROR, which a Galera node outside the
			// primary component returns for every statement.
			if strings.Contains(myErr.Message, "WSREP") {
				return ClassUnavailable
			}
		}
		// MariaDB reports NOWAIT as a lock wait timeout (1205) which is
		// contention above: either way the lock was not obtained.
		return ClassOther
	}
	if class, ok := classifySQLite(err); ok {
		return class
	}
	// database/sql does not export its "database is closed" error.
	if strings.Contains(err.Error(), "sql: database is closed") {
		return ClassClosed
	}
	if unreachable(err) {
		return ClassUnavailable
	}
	return ClassOther
}

// unreachable reports an error of the connection rather than of a
// statement: refused, not resolved, timed out while connecting or
// reading, reset, closed under a statement. A cancellation is the
// caller's, whatever the driver made of it; a bare context deadline is
// the caller's too (go-sql-driver returns ctx.Err() for a handshake cut
// short), but pgx reports a connection attempt that ran out of time as a
// ConnectError, and that is the server not answering.
func unreachable(err error) bool {
	if errors.Is(err, context.Canceled) {
		return false
	}
	// *net.OpError (refused, reset, i/o timeout), *net.DNSError; but
	// context.DeadlineExceeded is a net.Error too.
	if netErr, ok := errors.AsType[net.Error](err); ok && netErr != context.DeadlineExceeded {
		return true
	}
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok && pgconn.Timeout(err) {
		return true
	}
	// go-sql-driver says ErrInvalidConn for a connection that broke under a
	// statement (its cause goes to its logger); pgx and lib/pq, an EOF.
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, mysql.ErrInvalidConn) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.Is(err, pgconn.ErrConnClosed)
}

// WrapDBError turns the classes users must act on into sqllock's sentinels
// (dblock.ErrSchemaMissing, dblock.ErrInvalidDB, dblock.ErrReadOnly,
// dblock.ErrUnavailable) while keeping the driver error in the chain; other
// errors are returned with op as context.
func WrapDBError(op string, err error) error {
	if err == nil {
		return nil
	}
	switch ClassifyError(err) {
	case ClassMissingTable:
		return fmt.Errorf("%s: %w: %w", op, dblock.ErrSchemaMissing, err)
	case ClassClosed:
		return fmt.Errorf("%s: %w: %w", op, dblock.ErrInvalidDB, err)
	case ClassReadOnly:
		return fmt.Errorf("%s: %w: %w", op, dblock.ErrReadOnly, err)
	case ClassUnavailable:
		if errors.Is(err, dblock.ErrUnavailable) {
			break // wrapped already, by a call this one wraps
		}
		return fmt.Errorf("%s: %w: %w", op, dblock.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// MarkUnavailable wraps err with dblock.ErrUnavailable when it is
// ClassUnavailable and not wrapped so already, and returns it unchanged
// otherwise: for causes kept inside another error (a lost lock's), where
// WrapDBError's op would say nothing.
func MarkUnavailable(err error) error {
	if ClassifyError(err) != ClassUnavailable || errors.Is(err, dblock.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", dblock.ErrUnavailable, err)
}

// MaxContentionRetries bounds how often RetryContention repeats an operation.
const MaxContentionRetries = 8

// RetryContention runs op, and runs it again (after 1, 2, 3... ms) while it
// fails with a ClassContention error, at most MaxContentionRetries more
// times and never after ctx ends. It returns op's last error: still a
// contention error when the retries ran out, which callers turn into "not
// acquired" or report.
func RetryContention(ctx context.Context, op func() error) error {
	for i := 0; ; i++ {
		err := op()
		if err == nil || ClassifyError(err) != ClassContention || i == MaxContentionRetries || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Duration(i+1) * time.Millisecond)
	}
}

// ContentionPause separates rounds of RetryContention in
// RetryContentionUntilDone.
const ContentionPause = 10 * time.Millisecond

// RetryContentionUntilDone runs op until it succeeds, fails with an error
// that is not contention, or ctx ends: for operations that must not give up
// on contention (a release, a renewal, a sweep, the fair queue's
// bookkeeping). Contention (deadlocks, lock wait timeouts, serialization
// failures, unique violations between contenders) is retried in rounds of
// RetryContention, ContentionPause between rounds, so a budget that runs out
// never turns into an error. When ctx ends first its error is returned,
// with the contention only in the text: callers see a context error, never
// the driver's contention error.
func RetryContentionUntilDone(ctx context.Context, op func() error) error {
	for {
		err := RetryContention(ctx, op)
		if err == nil || ClassifyError(err) != ClassContention {
			return err
		}
		timer := time.NewTimer(ContentionPause)
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("%w (while retrying after contention: %v)", ctx.Err(), err)
		case <-timer.C:
		}
	}
}
