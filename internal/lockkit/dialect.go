package lockkit

import (
	"database/sql"
	"fmt"
	"strings"

	"github.com/sqllock/sqllock/dblock"
)

// DetectDialect tells the dialect of db from its driver: pgx and lib/pq are
// Postgres, go-sql-driver/mysql is MySQL, modernc.org/sqlite (*sqlite.Driver)
// is SQLite. Other drivers need the dialect
// given explicitly; they get dblock.ErrUnknownDialect here.
func DetectDialect(db *sql.DB) (dblock.Dialect, error) {
	if db == nil {
		return "", fmt.Errorf("%w: nil *sql.DB", dblock.ErrInvalidDB)
	}
	// The driver's type names the package it comes from; matching on it
	// avoids importing every Postgres driver just to compare types.
	typ := fmt.Sprintf("%T", db.Driver())
	switch {
	case strings.Contains(typ, "stdlib.Driver"), strings.Contains(typ, "pq.Driver"), strings.Contains(typ, "pgx"):
		return dblock.Postgres, nil
	case strings.Contains(typ, "mysql."):
		return dblock.MySQL, nil
	case typ == "*sqlite.Driver":
		return dblock.SQLite, nil
	}
	return "", fmt.Errorf("%w: driver %s (pass the dialect explicitly)", dblock.ErrUnknownDialect, typ)
}

// ResolveDialect is the dialect a component on db speaks: explicit when
// given, else the one detected from the driver. An explicit dialect that
// contradicts a detected one is dblock.ErrUnknownDialect: every statement
// would fail with an untyped syntax error. A driver that cannot be told
// apart needs the explicit dialect.
func ResolveDialect(db *sql.DB, explicit dblock.Dialect) (dblock.Dialect, error) {
	detected, err := DetectDialect(db)
	switch {
	case explicit == "" && err != nil:
		return "", err
	case explicit == "":
		return detected, nil
	case !explicit.Valid():
		return "", fmt.Errorf("%w: %q (want %q, %q or %q)", dblock.ErrUnknownDialect, explicit, dblock.Postgres, dblock.MySQL, dblock.SQLite)
	case err == nil && detected != explicit:
		return "", fmt.Errorf("%w: %q given but the driver speaks %s", dblock.ErrUnknownDialect, explicit, detected)
	}
	return explicit, nil
}

// ParseDialect turns "postgres"/"postgresql"/"pgx", "mysql"/"mariadb" or
// "sqlite"/"sqlite3" into a Dialect.
func ParseDialect(s string) (dblock.Dialect, error) {
	switch strings.ToLower(s) {
	case "postgres", "postgresql", "pgx":
		return dblock.Postgres, nil
	case "mysql", "mariadb":
		return dblock.MySQL, nil
	case "sqlite", "sqlite3":
		return dblock.SQLite, nil
	}
	return "", fmt.Errorf("%w: %q (want postgres, mysql or sqlite)", dblock.ErrUnknownDialect, s)
}
