package rowlock

import "github.com/sqllock/sqllock/internal/pgxrow"

// runner returns how the Locker runs statements that are not its store's
// own (the lock kinds'): as its store does, through pgxrow, which on
// PostgreSQL with pgx picks the pool's exec mode (never named prepared
// statements through a transaction pooler) and with any other driver runs
// them as given. On PostgreSQL it shares the store's look at the pool.
func (l *Locker) runner() pgxrow.DB {
	if ps, ok := l.store.(postgresStore); ok {
		return ps.db
	}
	return pgxrow.Wrap(l.db)
}
