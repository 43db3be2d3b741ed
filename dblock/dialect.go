package dblock

import (
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// Dialect is the SQL dialect of a database.
type Dialect string

// The supported dialects. MySQL covers MySQL 8.0+ and MariaDB 10.6+.
const (
	Postgres Dialect = "postgres"
	MySQL    Dialect = "mysql"
)

// releaseTimeout bounds the clean-up statements sqllock runs with a context
// of its own (release after the caller's context ended).
const releaseTimeout = 10 * time.Second

// Valid reports whether d is a supported dialect.
func (d Dialect) Valid() bool { return d == Postgres || d == MySQL }

// DetectDialect tells the dialect of db from its driver: pgx and lib/pq are
// Postgres, go-sql-driver/mysql is MySQL. Other drivers need the dialect
// given explicitly; they get ErrUnknownDialect here.
func DetectDialect(db *sql.DB) (Dialect, error) {
	if db == nil {
		return "", fmt.Errorf("%w: nil *sql.DB", ErrInvalidDB)
	}
	// The driver's type names the package it comes from; matching on it
	// avoids importing every Postgres driver just to compare types.
	typ := fmt.Sprintf("%T", db.Driver())
	switch {
	case strings.Contains(typ, "stdlib.Driver"), strings.Contains(typ, "pq.Driver"), strings.Contains(typ, "pgx"):
		return Postgres, nil
	case strings.Contains(typ, "mysql."):
		return MySQL, nil
	}
	return "", fmt.Errorf("%w: driver %s (pass the dialect explicitly)", ErrUnknownDialect, typ)
}

// ResolveDialect is the dialect a Locker on db speaks: explicit when given,
// else the one detected from the driver. An explicit dialect that
// contradicts a detected one is ErrUnknownDialect: every statement would
// fail with an untyped syntax error. A driver that cannot be told apart
// needs the explicit dialect.
func ResolveDialect(db *sql.DB, explicit Dialect) (Dialect, error) {
	detected, err := DetectDialect(db)
	switch {
	case explicit == "" && err != nil:
		return "", err
	case explicit == "":
		return detected, nil
	case err == nil && detected != explicit:
		return "", fmt.Errorf("%w: %q given but the driver speaks %s", ErrUnknownDialect, explicit, detected)
	}
	return explicit, nil
}

// ParseDialect turns "postgres"/"postgresql"/"pgx" or "mysql"/"mariadb" into
// a Dialect.
func ParseDialect(s string) (Dialect, error) {
	switch strings.ToLower(s) {
	case "postgres", "postgresql", "pgx":
		return Postgres, nil
	case "mysql", "mariadb":
		return MySQL, nil
	}
	return "", fmt.Errorf("%w: %q (want postgres or mysql)", ErrUnknownDialect, s)
}
