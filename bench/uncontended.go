package main

import (
	"context"
	"database/sql"
	"time"

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

	rlName, naiveName, advName := e.newName("u-rl"), e.newName("u-naive"), e.newName("u-adv")
	fuName, rawName := e.newName("u-fu"), e.newName("u-rawfu")
	e.names.forUpdate(fuName)
	if err := e.fuCreate(ctx, rawName); err != nil {
		return err
	}
	ops := []op{
		func(ctx context.Context) error {
			k, err := rl.TryAcquire(ctx, rlName)
			if err != nil {
				return err
			}
			return k.Release(ctx)
		},
		func(ctx context.Context) error { return e.naive(ctx, naiveName) },
		func(ctx context.Context) error {
			if err := e.advTry(ctx, conn, advName); err != nil {
				return err
			}
			return e.advUnlock(ctx, conn, advName)
		},
		func(ctx context.Context) error { return e.rawForUpdate(ctx, rawName) },
	}
	if e.fuErr == nil {
		fl, err := forupdate.New(e.db)
		if err != nil {
			return err
		}
		ops = append(ops, func(ctx context.Context) error {
			k, err := fl.Acquire(ctx, fuName)
			if err != nil {
				return err
			}
			return k.Release(ctx)
		})
	}
	res, err := interleave(ctx, cfg.n, 50, ops)
	if err != nil {
		return err
	}
	lib, naive, adv, raw := res[0], res[1], res[2], res[3]
	row := func(variant, label string, s samples, base samples) {
		vsRaw := "—"
		if base != nil {
			vsRaw = dratio(s.pct(50), base.pct(50))
		}
		t.add(e.target.name, variant, dur(s.pct(50)), dur(s.pct(99)), dur(s.mean()), vsRaw, dratio(s.pct(50), adv.pct(50)))
		chart.set(label, e.target.name, s.pct(50))
	}
	row("rowlock TryAcquire+Release", "rowlock", lib, naive)
	row("naive INSERT+DELETE (raw)", "naive INSERT+DELETE (raw)", naive, nil)
	if e.fuErr == nil {
		row("forupdate Acquire+Release", "forupdate", res[4], raw)
	}
	row("BEGIN; SELECT … FOR UPDATE; COMMIT (raw)", "BEGIN; SELECT … FOR UPDATE; COMMIT (raw)", raw, nil)
	row(advisoryName(e)+" (pinned conn)", "advisory lock (pinned conn)", adv, nil)
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
