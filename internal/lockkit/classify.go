package lockkit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

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
)

type sqlStater interface{ SQLState() string }

// ClassifyError sorts a driver error into an ErrorClass by PostgreSQL
// SQLSTATE or MySQL error number. It is the one place where sqllock reads
// driver errors, so it is one flat table of codes: its cyclomatic
// complexity is the number of codes, and splitting it would scatter them.
func ClassifyError(err error) ErrorClass {
	if err == nil {
		return ClassOther
	}
	var pgErr sqlStater
	if errors.As(err, &pgErr) {
		switch pgErr.SQLState() {
		case "40001", "40P01", "23505":
			return ClassContention
		case "55P03":
			return ClassLockUnavailable
		case "42P01":
			return ClassMissingTable
		case "25006": // read_only_sql_transaction: hot standby or default_transaction_read_only
			return ClassReadOnly
		}
		return ClassOther
	}
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) {
		switch myErr.Number {
		case 1213, 1205, 1062:
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
	return ClassOther
}

// WrapDBError turns the classes users must act on into sqllock's sentinels
// (dblock.ErrSchemaMissing, dblock.ErrInvalidDB, dblock.ErrReadOnly) while
// keeping the driver error in the chain; other errors are returned with op
// as context.
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
	}
	return fmt.Errorf("%s: %w", op, err)
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
