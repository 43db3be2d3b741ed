package main

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/rowlock"
)

// kindSeparator is the separator rowlock and forupdate put between a name
// and the suffix of the rows a lock kind derives from it (unexported
// there); the bench needs it to delete those rows by exact name.
const kindSeparator = "␟"

// kindsLimit is the semaphores' limit in the kinds section.
const kindsLimit = 4

// rowlockReaders is how many reader rows a rowlock read/write lock has
// (part of its on-disk format).
const rowlockReaders = 64

func kindsTable(cfg config) *table {
	t := &table{
		title:  "Lock kinds: uncontended acquire + release",
		header: []string{"db", "variant", "p50", "p99", "mean", "p50 vs raw SQL"},
		left:   2,
	}
	t.note("%d operations per variant, in two groups each interleaved one by one in a rotating order: rowlock's kinds with the naive recipe, then forupdate's with the raw SQL they lock with; each ratio is against the raw SQL of its row, measured beside it. The latency of one acquire plus one release of a free name, as the caller sees it, with a cancelable context.", cfg.n)
	t.note("rowlock: `Semaphore(%d).TryAcquire` (one look at its slot rows in `dblock_locks`, a free one taken, the limit checked in `dblock_semaphores`), `Readers()`/`Writers().TryAcquire` (a reader row or the writer row, then the other side checked), `AcquireAll` of 2 names (one row each, in order); beside the naive `INSERT`+`DELETE` of one row (the semaphore, readers, writers) or of two rows one after the other (`AcquireAll`).", kindsLimit)
	t.note("forupdate: `Semaphore(%d).TryAcquire` (`BEGIN`, the limit record read shared, one slot locked `FOR UPDATE SKIP LOCKED LIMIT 1` with its token drawn, `COMMIT`) beside raw `BEGIN; SELECT name … WHERE name IN (%d slots) LIMIT 1 FOR UPDATE SKIP LOCKED; COMMIT`; `Readers()`/`Writers().TryAcquire` beside raw `BEGIN; SELECT … FOR SHARE` (`LOCK IN SHARE MODE` on MySQL) / `FOR UPDATE; COMMIT`, as database/sql sends them (on MySQL without interpolateParams: prepare, execute, close) and, on MySQL, with the `SELECT` prepared once, the like-for-like view of forupdate, which prepares its statements; forupdate's MySQL session set-up (`wait_timeout`) is included, as in the uncontended section.", kindsLimit, kindsLimit)
	return t
}

// kinds measures the lock kinds beside the raw SQL they are built on.
func kinds(ctx context.Context, cfg config, e *env, t *table) error {
	rl, err := rowlock.New(e.db)
	if err != nil {
		return err
	}
	defer rl.Close()
	rlSem, err := rl.Semaphore(kindsLimit)
	if err != nil {
		return err
	}
	semName, readName, writeName := e.newName("k-sem"), e.newName("k-r"), e.newName("k-w")
	multi := []string{e.newName("k-m1"), e.newName("k-m2")}
	naive1, naive2, naive3 := e.newName("k-n1"), e.newName("k-n2"), e.newName("k-n3")
	rowlockRows(e, semName, readName, writeName)
	defer e.deleteSemaphoreRecord(context.WithoutCancel(ctx), semName)

	rowlockOps := []op{
		try(rlSem, semName),
		try(rl.Readers(), readName),
		try(rl.Writers(), writeName),
		func(ctx context.Context) error {
			m, err := rl.TryAcquireAll(ctx, multi)
			if err != nil {
				return err
			}
			return m.Release(ctx)
		},
		func(ctx context.Context) error { return e.naive(ctx, naive1) },
		func(ctx context.Context) error {
			if err := e.naive(ctx, naive2); err != nil {
				return err
			}
			return e.naive(ctx, naive3)
		},
	}
	res, err := interleave(ctx, cfg.n, 50, rowlockOps)
	if err != nil {
		return err
	}
	row := func(variant string, s, base samples) {
		vsRaw := "—"
		if base != nil {
			vsRaw = dratio(s.pct(50), base.pct(50))
		}
		t.add(e.target.name, variant, dur(s.pct(50)), dur(s.pct(99)), dur(s.mean()), vsRaw)
	}
	row(fmt.Sprintf("rowlock Semaphore(%d) TryAcquire+Release", kindsLimit), res[0], res[4])
	row("rowlock Readers TryAcquire+Release", res[1], res[4])
	row("rowlock Writers TryAcquire+Release", res[2], res[4])
	row("naive INSERT+DELETE (raw)", res[4], nil)
	row("rowlock TryAcquireAll(2 names)+Release", res[3], res[5])
	row("naive INSERT+DELETE ×2 (raw)", res[5], nil)

	if e.fuErr != nil {
		return nil
	}
	return kindsForUpdate(ctx, cfg, e, row)
}

// kindsForUpdate times forupdate's kinds beside the raw SQL they lock with.
// Its complexity (gocyclo over 15) is the small closures of its variants,
// kept in one list so each variant is read beside its baseline.
func kindsForUpdate(ctx context.Context, cfg config, e *env, row func(string, samples, samples)) error {
	fl, err := forupdate.New(e.db)
	if err != nil {
		return err
	}
	defer fl.Close()
	fuSem, err := fl.Semaphore(kindsLimit)
	if err != nil {
		return err
	}
	semName, readName, writeName := e.newName("k-fsem"), e.newName("k-fr"), e.newName("k-fw")
	slots := make([]string, kindsLimit)
	for i := range slots {
		slots[i] = semName + kindSeparator + "s" + strconv.Itoa(i)
	}
	e.names.forUpdate(slots...)
	e.names.forUpdate(readName+kindSeparator+"rw", writeName+kindSeparator+"rw")
	defer e.deleteSemaphoreRecord(context.WithoutCancel(ctx), semName+kindSeparator+"fu")
	rawSlots := make([]string, kindsLimit)
	for i := range rawSlots {
		rawSlots[i] = e.newName("k-rawslot", i)
	}
	rawShared, rawExclusive := e.newName("k-rawshare"), e.newName("k-rawfu")
	for _, name := range append([]string{rawShared, rawExclusive}, rawSlots...) {
		if err := e.fuCreate(ctx, name); err != nil {
			return err
		}
	}
	skipLocked, share := e.kindsSQL()
	slotArgs := make([]any, len(rawSlots))
	for i, s := range rawSlots {
		slotArgs[i] = s
	}
	// MySQL: as in the uncontended section, the raw statements prepared
	// too, the like-for-like view of forupdate's prepared ones.
	var stmts []*sql.Stmt
	defer func() {
		for _, st := range stmts {
			_ = st.Close()
		}
	}()
	rawTx := func(prepared bool, query string, args ...any) (op, error) {
		var stmt *sql.Stmt
		if prepared {
			var err error
			if stmt, err = e.db.PrepareContext(ctx, query); err != nil {
				return nil, err
			}
			stmts = append(stmts, stmt)
		}
		return func(ctx context.Context) error {
			tx, err := e.db.BeginTx(ctx, nil)
			if err != nil {
				return err
			}
			var v any
			row := tx.QueryRowContext
			if stmt != nil {
				row = func(ctx context.Context, _ string, args ...any) *sql.Row {
					return tx.StmtContext(ctx, stmt).QueryRowContext(ctx, args...)
				}
			}
			if err := row(ctx, query, args...).Scan(&v); err != nil {
				_ = tx.Rollback()
				return err
			}
			return tx.Commit()
		}, nil
	}
	// A variant is forupdate's op beside its raw SQL; lib, raw and prep
	// are their indexes among the ops (prep: -1 when not measured).
	type variant struct {
		libOp          op
		libName        string
		query          string
		args           []any
		rawName        string
		lib, raw, prep int
	}
	variants := []*variant{
		{libOp: try(fuSem, semName), libName: fmt.Sprintf("forupdate Semaphore(%d) TryAcquire+Release", kindsLimit),
			query: skipLocked, args: slotArgs, rawName: "BEGIN; SELECT … FOR UPDATE SKIP LOCKED LIMIT 1; COMMIT"},
		{libOp: try(fl.Readers(), readName), libName: "forupdate Readers TryAcquire+Release",
			query: share, args: []any{rawShared}, rawName: "BEGIN; SELECT … FOR SHARE; COMMIT"},
		{libOp: try(fl.Writers(), writeName), libName: "forupdate Writers TryAcquire+Release",
			query: e.sql.fuLock, args: []any{rawExclusive}, rawName: "BEGIN; SELECT … FOR UPDATE; COMMIT"},
	}
	var ops []op
	for _, v := range variants {
		v.lib = len(ops)
		ops = append(ops, v.libOp)
		raw, err := rawTx(false, v.query, v.args...)
		if err != nil {
			return err
		}
		v.raw, v.prep = len(ops), -1
		ops = append(ops, raw)
		if e.dialect == dblock.MySQL {
			prep, err := rawTx(true, v.query, v.args...)
			if err != nil {
				return err
			}
			v.prep = len(ops)
			ops = append(ops, prep)
		}
	}
	res, err := interleave(ctx, cfg.n, 50, ops)
	if err != nil {
		return err
	}
	for _, v := range variants {
		row(v.libName, res[v.lib], res[v.raw])
		row(v.rawName+" (raw)", res[v.raw], nil)
		if v.prep >= 0 {
			row(v.rawName+" (raw, prepared)", res[v.prep], nil)
		}
	}
	return nil
}

// try is one TryAcquire and Release of name through l.
func try(l dblock.Locker, name string) op {
	return func(ctx context.Context) error {
		k, err := l.TryAcquire(ctx, name)
		if err != nil {
			return err
		}
		return k.Release(ctx)
	}
}

// rowlockRows registers the rows rowlock's kinds derive from their names
// (slots, the writer row, reader rows), for deletion at the end.
func rowlockRows(e *env, sem, read, write string) {
	for i := range kindsLimit {
		e.names.lock(sem + kindSeparator + "s" + strconv.Itoa(i))
	}
	for _, name := range []string{read, write} {
		e.names.lock(name + kindSeparator + "w")
		for i := range rowlockReaders {
			e.names.lock(name + kindSeparator + "r" + strconv.Itoa(i))
		}
	}
}

// kindsSQL are the raw statements forupdate's kinds lock with: one of
// kindsLimit rows FOR UPDATE SKIP LOCKED, and a row shared.
func (e *env) kindsSQL() (skipLocked, share string) {
	ph := make([]string, kindsLimit)
	for i := range ph {
		ph[i] = "?"
		if e.dialect == dblock.Postgres {
			ph[i] = "$" + strconv.Itoa(i+1)
		}
	}
	skipLocked = `SELECT name FROM dblock_forupdate WHERE name IN (` + strings.Join(ph, ", ") + `) LIMIT 1 FOR UPDATE SKIP LOCKED`
	if e.dialect == dblock.Postgres {
		return skipLocked, `SELECT 1 FROM dblock_forupdate WHERE name = $1 FOR SHARE`
	}
	return skipLocked, `SELECT 1 FROM dblock_forupdate WHERE name = ? LOCK IN SHARE MODE`
}

// deleteSemaphoreRecord deletes the limit record a semaphore left in
// dblock_semaphores, by exact name.
func (e *env) deleteSemaphoreRecord(ctx context.Context, name string) {
	q := `DELETE FROM dblock_semaphores WHERE name = $1`
	if e.dialect == dblock.MySQL {
		q = `DELETE FROM dblock_semaphores WHERE name = ?`
	}
	if _, err := e.db.ExecContext(ctx, q, name); err != nil {
		logf("%s: deleting semaphore record %q: %v", e.target.name, name, err)
	}
}
