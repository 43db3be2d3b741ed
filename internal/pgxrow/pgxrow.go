// Package pgxrow runs sqllock's PostgreSQL statements so that they work
// through a transaction pooler (DB: pgx's exec mode chosen for the path
// to the server), and one-row queries through pgx itself on a *sql.Conn
// whose driver is pgx's database/sql driver (DB.Scan).
//
// Why Scan: database/sql starts a goroutine (Rows.awaitDone) for the rows
// of every query whose context can be canceled, as callers' contexts
// usually can; pgx watches the context with context.AfterFunc instead. On
// the locks' uncontended paths that goroutine cost more than the
// libraries' own work.
package pgxrow

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jackc/pgx/v5"
)

// errNotPgx ends Raw when the driver is not pgx's.
var errNotPgx = errors.New("pgxrow: not a pgx connection")

// Scan runs query with args on conn, a connection of d's pool, through
// pgx in the pool's mode (finding out which on its first call), and scans
// its one row into dest (sql.ErrNoRows when there is none). ok is false,
// and nothing ran, when conn's driver is not pgx's: the caller runs the
// query through database/sql. When conn has a transaction open, the query
// runs in it.
func (d DB) Scan(ctx context.Context, conn *sql.Conn, query string, args []any, dest ...any) (ok bool, err error) {
	err = conn.Raw(func(dc any) error {
		pc, isPgx := dc.(interface{ Conn() *pgx.Conn })
		if !isPgx {
			return errNotPgx
		}
		c := pc.Conn()
		if d.p.begin() {
			d.p.look(ctx, c)
			d.p.end()
		}
		return c.QueryRow(ctx, query, d.p.args(args)...).Scan(dest...)
	})
	if errors.Is(err, errNotPgx) {
		return false, nil
	}
	return true, err
}
