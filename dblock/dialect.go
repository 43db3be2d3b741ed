package dblock

// Dialect is the SQL dialect of a database. The constructors detect it from
// the *sql.DB's driver (pgx, lib/pq, go-sql-driver/mysql, modernc.org/sqlite);
// pass it with their WithDialect option only for another driver.
type Dialect string

// The supported dialects. MySQL covers MySQL 8.0+ and MariaDB 10.6+.
// SQLite (through modernc.org/sqlite) coordinates the processes of one
// host that share a database file; it has no row locks and no sessions
// (see package rowlock, SQLite).
const (
	Postgres Dialect = "postgres"
	MySQL    Dialect = "mysql"
	SQLite   Dialect = "sqlite"
)

// Valid reports whether d is a supported dialect.
func (d Dialect) Valid() bool { return d == Postgres || d == MySQL || d == SQLite }
