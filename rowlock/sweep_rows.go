package rowlock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// The steps of a sweep that MySQL and SQLite share: a scan of the next
// rows in name order without locking them, then, for the lapsed ones, one
// transaction that picks those still lapsed, raises their stripes'
// counters and deletes them. (PostgreSQL does it all in one statement.)
// Raising the counters first is what keeps tokens from going backwards
// (docs/design.md, "rowlock: why it is safe").

// scanSweep reads the rows of a sweep's scan (name, lapsed): how many and
// up to which name it looked at, and the names of the lapsed ones.
func scanSweep(rows *sql.Rows, err error) (b sweepBatch, lapsed []any, _ error) {
	if err != nil {
		return b, nil, err
	}
	for rows.Next() {
		var name string
		var isLapsed bool
		if err := rows.Scan(&name, &isLapsed); err != nil {
			_ = rows.Close()
			return sweepBatch{}, nil, err
		}
		b.scanned++
		b.last = name
		if isLapsed {
			lapsed = append(lapsed, name)
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return sweepBatch{}, nil, err
	}
	return b, lapsed, nil
}

// inTx runs statements in a transaction (a *sql.Tx, or a *sql.Conn that
// has begun one).
type inTx interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// deleteDoomed deletes, in tx, the rows that pick returns (name, stripe,
// token; run with pickArgs), raising their stripes' counters to their
// tokens first with fenceUpsert, whose %s takes the (stripe, token) value
// list. It returns how many it deleted. Placeholders only: names are never
// spliced into the SQL.
func deleteDoomed(ctx context.Context, tx inTx, pick string, pickArgs []any, fenceUpsert string) (int, error) {
	rows, err := tx.QueryContext(ctx, pick, pickArgs...)
	if err != nil {
		return 0, err
	}
	var doomed []any
	floors := map[int64]int64{}
	for rows.Next() {
		var name string
		var stripe, token int64
		if err := rows.Scan(&name, &stripe, &token); err != nil {
			_ = rows.Close()
			return 0, err
		}
		doomed = append(doomed, name)
		floors[stripe] = max(floors[stripe], token)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil || len(doomed) == 0 {
		return 0, err
	}
	fenceArgs := make([]any, 0, 2*len(floors))
	for stripe, token := range floors {
		fenceArgs = append(fenceArgs, stripe, token)
	}
	values := strings.TrimSuffix(strings.Repeat("(?, ?), ", len(floors)), ", ")
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(fenceUpsert, values), fenceArgs...); err != nil {
		return 0, err
	}
	deleteSQL := `DELETE FROM ` + locksTable + ` WHERE name IN (` + placeholders(len(doomed)) + `)`
	if _, err := tx.ExecContext(ctx, deleteSQL, doomed...); err != nil {
		return 0, err
	}
	return len(doomed), nil
}
