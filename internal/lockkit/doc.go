// Package lockkit is the toolkit that sqllock's lock implementations share
// and users never call: reading driver errors (ClassifyError, WrapDBError),
// retrying contention (RetryContention, RetryContentionUntilDone), resolving
// and validating acquisition input (ResolveOptions, ValidateName,
// CheckContext, OwnerFor) and telling the SQL dialect of a *sql.DB.
//
// It is internal on purpose: dblock is the users' contract and stays small,
// and these helpers change with the implementations. A Locker written outside
// this module implements dblock.Locker with its own validation; dblock's
// exported limits (MinTTL, MaxNameLength, ...) and error types say what to
// accept.
package lockkit
