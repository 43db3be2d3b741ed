// Package lockkit is the toolkit that sqllock's lock implementations share
// and users never call. It reads driver errors (ClassifyError,
// WrapDBError), retries contention (RetryContention,
// RetryContentionUntilDone), tells the SQL dialect of a *sql.DB
// (DetectDialect, ResolveDialect), and detects Galera (IsGalera) and
// SQLite's set-up (CheckSQLite), and tells once whether a PostgreSQL primary has a
// synchronous standby (ReplicationCheck). Checking acquisition input (names,
// options, contexts, owners) is package lockinput's, which needs no driver.
//
// It is internal on purpose: dblock is the users' contract and stays small,
// and these helpers change with the implementations. A Locker written outside
// this module implements dblock.Locker with its own validation; dblock's
// exported limits (dblock.MinTTL, dblock.MaxNameLength, ...) and error
// types say what to accept.
package lockkit
