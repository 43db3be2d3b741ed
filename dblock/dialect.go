package dblock

// Dialect is the SQL dialect of a database. The constructors detect it from
// the *sql.DB's driver (pgx, lib/pq, go-sql-driver/mysql); pass it with their
// WithDialect option only for another driver.
type Dialect string

// The supported dialects. MySQL covers MySQL 8.0+ and MariaDB 10.6+.
const (
	Postgres Dialect = "postgres"
	MySQL    Dialect = "mysql"
)

// Valid reports whether d is a supported dialect.
func (d Dialect) Valid() bool { return d == Postgres || d == MySQL }
