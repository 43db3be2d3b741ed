package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockkit"
)

// Exit codes (sysexits.h where one fits). A crontab wrapper tells "another
// replica has the lock" (75) from "the database could not be asked" (69,
// 78) from a mistake in the line (64) and from the command's own status.
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 64  // EX_USAGE: a mistake in the command line
	exitUnavailable = 69  // EX_UNAVAILABLE: the database cannot be reached, or is read-only
	exitTempFail    = 75  // EX_TEMPFAIL: the lock is held by another process
	exitConfig      = 78  // EX_CONFIG: the database refuses the DSN, the SQLite file cannot be opened, or there are no (current) lock tables
	exitNoExec      = 126 // the command cannot be executed, as in sh
	exitNotFound    = 127 // the command is not found, as in sh
)

// exitCodesHelp is the table `sqllock --help` shows.
const exitCodesHelp = `Exit codes:
  0         success
  1         any other error (the message says what)
  64        usage error (EX_USAGE)
  69        the database cannot be reached or did not answer, or it is
            read-only (a standby, after a failover) (EX_UNAVAILABLE)
  75        run: the lock is held by another process (EX_TEMPFAIL); silent
            unless -v, since under cron every replica but one gets it
  78        the database refused the DSN's user, password or database, the
            SQLite file cannot be opened, or the lock tables are missing or
            outdated (EX_CONFIG)
  run exits with its command's code once the command started (128+N if
  signal N killed it; 126, 127: it cannot be executed, or is not found).
  69, 75 and 78 come from sqllock only before the command starts.`

// databaseExit sorts a database error into exitConfig (the DSN, the
// credentials or the schema must be fixed: retrying will not help),
// exitUnavailable (the server cannot be reached, or is read-only: it may
// work again later) or 0 (neither: an unexpected error). What counts as
// unreachable is the library's dblock.ErrUnavailable, decided in one place
// (lockkit.ClassifyError) for the library and the CLI alike; the config
// checks come first, so an SQLite file that cannot be opened at the first
// contact is a path to fix here.
func databaseExit(err error) int {
	switch {
	case errors.Is(err, dblock.ErrSchemaMissing), refusedLogin(err), badCertificate(err), badSQLiteFile(err):
		return exitConfig
	case errors.Is(err, dblock.ErrReadOnly), lockkit.ClassifyError(err) == lockkit.ClassUnavailable, connectTimedOut(err):
		return exitUnavailable
	}
	return 0
}

// connectTimedOut reports a first contact that connectTimeout cut short.
// The library leaves a bare context deadline to its caller (go-sql-driver
// returns one for a handshake that never came); here the deadline is the
// CLI's own bound on the server answering, so it means the server did not.
func connectTimedOut(err error) bool {
	_, ok := errors.AsType[*connectError](err)
	return ok && errors.Is(err, context.DeadlineExceeded)
}

// refusedLogin reports a server that refused the user, the password, the
// database or a privilege the DSN needs.
func refusedLogin(err error) bool {
	if pgErr, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch {
		case strings.HasPrefix(pgErr.Code, "28"), // invalid authorization: role, password, pg_hba
			pgErr.Code == "3D000", // database does not exist
			pgErr.Code == "3F000", // schema does not exist
			pgErr.Code == "42501": // insufficient privilege
			return true
		}
		return false
	}
	if myErr, ok := errors.AsType[*mysql.MySQLError](err); ok {
		switch myErr.Number {
		case 1044, // access denied to the database
			1045, // access denied: user or password
			1049, // unknown database
			1142, // command denied on a table
			1698: // access denied (auth_socket and the like)
			return true
		}
		return false
	}
	return errors.Is(err, mysql.ErrNoTLS) || errors.Is(err, mysql.ErrCleartextPassword) ||
		errors.Is(err, mysql.ErrNativePassword) || errors.Is(err, mysql.ErrOldPassword) ||
		errors.Is(err, mysql.ErrUnknownPlugin)
}

// badCertificate reports a TLS connection refused because of the server's
// certificate, which is a matter of the DSN's TLS settings.
func badCertificate(err error) bool {
	_, verify := errors.AsType[*tls.CertificateVerificationError](err)
	_, authority := errors.AsType[x509.UnknownAuthorityError](err)
	_, host := errors.AsType[x509.HostnameError](err)
	_, invalid := errors.AsType[x509.CertificateInvalidError](err)
	return verify || authority || host || invalid
}

// SQLite result codes (the low byte of modernc.org/sqlite's Error.Code)
// that say the file itself is the trouble.
const (
	sqlitePerm     = 3  // SQLITE_PERM
	sqliteCantOpen = 14 // SQLITE_CANTOPEN: no such directory, no permission, a directory
	sqliteAuth     = 23 // SQLITE_AUTH
	sqliteNotADB   = 26 // SQLITE_NOTADB
)

// badSQLiteFile reports an SQLite file that cannot be opened as a
// database: the path, the permissions or the file must be fixed, and no
// server is involved.
func badSQLiteFile(err error) bool {
	connErr, ok := errors.AsType[*connectError](err)
	if !ok || connErr.dialect != dblock.SQLite {
		return false
	}
	coded, ok := errors.AsType[interface {
		error
		Code() int
	}](err)
	if !ok {
		return false
	}
	switch coded.Code() & 0xff {
	case sqlitePerm, sqliteCantOpen, sqliteAuth, sqliteNotADB:
		return true
	}
	return false
}
