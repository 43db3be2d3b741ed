package main

import (
	"context"
	"database/sql"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/rowlock"
)

// op is one timed operation of a variant.
type op func(ctx context.Context) error

// interleave runs each op n times, one of each per round, rotating the
// order, after a warm-up, and returns each op's durations.
func interleave(ctx context.Context, n, warmup int, ops []op) ([]samples, error) {
	out := make([]samples, len(ops))
	for i := range out {
		out[i] = make(samples, 0, n)
	}
	for round := range warmup + n {
		for j := range ops {
			k := (round + j) % len(ops)
			start := time.Now()
			if err := ops[k](ctx); err != nil {
				return nil, err
			}
			if round >= warmup {
				out[k] = append(out[k], time.Since(start))
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// uncontended measures each lock beside the raw SQL it is built on, and
// beside the server's own named lock, in two groups interleaved operation
// by operation: rowlock with the naive INSERT+DELETE, forupdate with the
// raw BEGIN; SELECT ... FOR UPDATE; COMMIT. A variant's ratio is taken
// against the baseline it ran beside; one rotation of every variant would
// let each group's idle gaps and connection use tilt the other's.
//
// Its complexity (gocyclo over 15) is the small closures of its variants,
// kept in one list so each variant is read beside its baseline.
func uncontended(ctx context.Context, cfg config, e *env, t *table, chart *panel) error {
	rl, err := rowlock.New(e.db)
	if err != nil {
		return err
	}
	defer rl.Close()
	conn, err := e.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()

	rlName, naiveName, prepName, advName := e.newName("u-rl"), e.newName("u-naive"), e.newName("u-prep"), e.newName("u-adv")
	fuName, rawName := e.newName("u-fu"), e.newName("u-rawfu")
	e.names.forUpdate(fuName)
	if err := e.fuCreate(ctx, rawName); err != nil {
		return err
	}
	advisory := func(ctx context.Context) error {
		if err := e.advTry(ctx, conn, advName); err != nil {
			return err
		}
		return e.advUnlock(ctx, conn, advName)
	}
	rowlockOps := []op{
		func(ctx context.Context) error {
			k, err := rl.TryAcquire(ctx, rlName)
			if err != nil {
				return err
			}
			return k.Release(ctx)
		},
		func(ctx context.Context) error { return e.naive(ctx, naiveName) },
		advisory,
	}
	// MySQL: rowlock runs its statements prepared (one round trip each
	// instead of two); the naive pair prepared is the like-for-like view.
	var closePrepared func()
	if e.dialect == dblock.MySQL {
		naivePrepared, closeStmts, err := e.preparedNaive(ctx)
		if err != nil {
			return err
		}
		closePrepared = closeStmts
		rowlockOps = append(rowlockOps, func(ctx context.Context) error { return naivePrepared(ctx, prepName) })
	}
	if closePrepared != nil {
		defer closePrepared()
	}
	res, err := interleave(ctx, cfg.n, 50, rowlockOps)
	if err != nil {
		return err
	}
	lib, naive, adv := res[0], res[1], res[2]
	row := func(variant, label string, s, base, adv samples) {
		vsRaw := "—"
		if base != nil {
			vsRaw = dratio(s.pct(50), base.pct(50))
		}
		t.add(e.target.name, variant, dur(s.pct(50)), dur(s.pct(99)), dur(s.mean()), vsRaw, dratio(s.pct(50), adv.pct(50)))
		chart.set(label, e.target.name, s.pct(50))
	}
	row("rowlock TryAcquire+Release", "rowlock", lib, naive, adv)
	row("naive INSERT+DELETE (raw)", "naive INSERT+DELETE (raw)", naive, nil, adv)
	if len(res) > 3 {
		row("naive INSERT+DELETE (raw, prepared)", "naive INSERT+DELETE (raw, prepared)", res[3], nil, adv)
	}
	row(advisoryName(e)+" (pinned conn)", "advisory lock (pinned conn)", adv, nil, adv)

	fuOps := []op{func(ctx context.Context) error { return e.rawForUpdate(ctx, rawName) }, advisory}
	fuAt, prepAt := -1, -1
	if e.fuErr == nil {
		fl, err := forupdate.New(e.db)
		if err != nil {
			return err
		}
		defer fl.Close()
		fuAt = len(fuOps)
		fuOps = append(fuOps, func(ctx context.Context) error {
			k, err := fl.Acquire(ctx, fuName)
			if err != nil {
				return err
			}
			return k.Release(ctx)
		})
	}
	// MySQL: as for rowlock, the raw recipe with its SELECT prepared is the
	// like-for-like view of forupdate's prepared statements.
	if e.dialect == dblock.MySQL {
		rawPrepared, closeStmt, err := e.preparedRawForUpdate(ctx)
		if err != nil {
			return err
		}
		defer closeStmt()
		prepAt = len(fuOps)
		fuOps = append(fuOps, func(ctx context.Context) error { return rawPrepared(ctx, rawName) })
	}
	res, err = interleave(ctx, cfg.n, 50, fuOps)
	if err != nil {
		return err
	}
	raw, fuAdv := res[0], res[1]
	if fuAt >= 0 {
		row("forupdate Acquire+Release", "forupdate", res[fuAt], raw, fuAdv)
	}
	row("BEGIN; SELECT … FOR UPDATE; COMMIT (raw)", "BEGIN; SELECT … FOR UPDATE; COMMIT (raw)", raw, nil, fuAdv)
	if prepAt >= 0 {
		row("BEGIN; SELECT … FOR UPDATE; COMMIT (raw, prepared)", "BEGIN; SELECT … FOR UPDATE; COMMIT (raw, prepared)", res[prepAt], nil, fuAdv)
	}
	return nil
}

func advisoryName(e *env) string {
	if e.target.name == "mysql" {
		return "GET_LOCK+RELEASE_LOCK"
	}
	return "pg_try_advisory_lock+unlock"
}

// pinned takes n connections out of the pool for the caller.
func pinned(ctx context.Context, db *sql.DB, n int) ([]*sql.Conn, func(), error) {
	conns := make([]*sql.Conn, 0, n)
	closeAll := func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}
	for range n {
		c, err := db.Conn(ctx)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		conns = append(conns, c)
	}
	return conns, closeAll, nil
}
