package galera_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"

	"github.com/sqllock/sqllock/rowlock"
)

// ledger is the fenced ledger: a table with one row per resource holding
// the token of the last fenced write and the number of writes. A holder
// writes in a transaction that proves its hold first (CheckHeld, or
// forupdate's own transaction). It breaks on a write whose token is not
// above the row's (a token going backwards, or an old holder writing after
// a newer one), and on a lost update: the rows' write counts must be the
// commits the holders saw succeed, plus at most the commits whose outcome
// they could not learn.
type ledger struct {
	mu         sync.Mutex
	committed  map[string]int64
	uncertain  map[string]int64
	conflicts  int
	violations []string
}

// ledgerTable is created once; rows are per resource, and resources are
// named after the test.
const ledgerTable = `CREATE TABLE IF NOT EXISTS galera_ledger (
    resource VARBINARY(255) NOT NULL PRIMARY KEY,
    token    BIGINT         NOT NULL,
    writes   BIGINT         NOT NULL
) ENGINE=InnoDB`

func newLedger() *ledger {
	return &ledger{committed: map[string]int64{}, uncertain: map[string]int64{}}
}

// item is one fenced write: resource written with token.
type item struct {
	resource string
	token    int64
}

// add creates the resources' rows, before the workers start.
func (lg *ledger) add(ctx context.Context, db *sql.DB, resources ...string) error {
	for _, r := range resources {
		if _, err := db.ExecContext(ctx, `INSERT INTO galera_ledger (resource, token, writes) VALUES (?, 0, 0)`, r); err != nil {
			return err
		}
	}
	return nil
}

// errBackwards: the ledger holds a newer token than the writer's.
var errBackwards = errors.New("ledger: a newer token wrote first")

// apply writes items in tx, or reads them when read is set (a reader's
// fenced read: the ledger's token, the last writer's, must not be above
// the reader's).
func (lg *ledger) apply(ctx context.Context, tx *sql.Tx, who string, items []item, read bool) error {
	for _, it := range items {
		var last int64
		if err := tx.QueryRowContext(ctx, `SELECT token FROM galera_ledger WHERE resource = ? FOR UPDATE`, it.resource).Scan(&last); err != nil {
			return err
		}
		if last > it.token || (!read && last == it.token) {
			lg.violate(fmt.Sprintf("fenced %s of %s by %s with token %d after token %d wrote", map[bool]string{true: "read", false: "write"}[read],
				it.resource, who, it.token, last))
			return errBackwards
		}
		if read {
			continue
		}
		if _, err := tx.ExecContext(ctx, `UPDATE galera_ledger SET token = ?, writes = writes + 1 WHERE resource = ?`, it.token, it.resource); err != nil {
			return err
		}
	}
	return nil
}

// settle records the outcome of the COMMIT of a transaction that wrote
// items.
func (lg *ledger) settle(items []item, err error) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	switch {
	case err == nil:
		for _, it := range items {
			lg.committed[it.resource]++
		}
	case rowlock.IsConflict(err):
		lg.conflicts++ // rolled back: nothing written
	default:
		for _, it := range items {
			lg.uncertain[it.resource]++
		}
	}
}

func (lg *ledger) violate(v string) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	lg.violations = append(lg.violations, v)
}

// fence runs one fenced transaction on db: check proves the hold, then
// items are written (or read). A transaction that lost a conflict (1213:
// certification on Galera) is run again while the hold is alive, as the
// docs tell users to. Other errors (the hold is lost, the node is away)
// end it: the write is skipped.
func (lg *ledger) fence(ctx context.Context, db *sql.DB, who string, check func(context.Context, *sql.Tx) error,
	alive func() bool, items []item, read bool) {
	for range 5 {
		if !alive() {
			return
		}
		err := lg.fenceOnce(ctx, db, who, check, items, read)
		if err == nil || !rowlock.IsConflict(err) {
			return
		}
	}
}

func (lg *ledger) fenceOnce(ctx context.Context, db *sql.DB, who string, check func(context.Context, *sql.Tx) error, items []item, read bool) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := check(ctx, tx); err != nil {
		return err
	}
	if err := lg.apply(ctx, tx, who, items, read); err != nil {
		return err
	}
	err = tx.Commit()
	if !read {
		lg.settle(items, err)
	}
	return err
}

// check compares the ledger's rows, read through db (which must see every
// node's commits), with the commits the holders saw.
func (lg *ledger) check(ctx context.Context, db *sql.DB, resources []string) []string {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	out := append([]string(nil), lg.violations...)
	for _, r := range resources {
		var writes int64
		if err := db.QueryRowContext(ctx, `SELECT writes FROM galera_ledger WHERE resource = ?`, r).Scan(&writes); err != nil {
			out = append(out, fmt.Sprintf("ledger row %s: %v", r, err))
			continue
		}
		if c, u := lg.committed[r], lg.uncertain[r]; writes < c || writes > c+u {
			out = append(out, fmt.Sprintf("lost update on %s: %d writes in the ledger, %d commits seen (and %d unknown)", r, writes, c, u))
		}
	}
	return out
}

func (lg *ledger) commits() (n int64) {
	lg.mu.Lock()
	defer lg.mu.Unlock()
	for _, c := range lg.committed {
		n += c
	}
	return n
}
