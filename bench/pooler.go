package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/rowlock"
)

// poolers times cross-process rowlock handoffs on PostgreSQL with the
// waiter's pool going through a transaction pooler (-pgbouncer-dsn), with
// and without a direct session connection, beside the same handoff
// without the pooler. MySQL has no section: nothing there needs a session
// through a pooler to be woken (its waiters poll).
func poolers(ctx context.Context, cfg config, e *env, t *table) error {
	if e.dialect != dblock.Postgres {
		return nil
	}
	if cfg.pgbouncerDSN == "" {
		t.note("postgres: not measured: give -pgbouncer-dsn (for example postgres://root@127.0.0.1:6432/test, .ci/pgbouncer start)")
		return nil
	}
	holder, err := rowlock.New(e.db)
	if err != nil {
		return err
	}
	defer holder.Close()
	variants := []struct{ label, dsn, session string }{
		{"direct", e.dsn, ""},
		{"through PgBouncer, session connection direct (WithSessionDB)", cfg.pgbouncerDSN, e.dsn},
		{"through PgBouncer, no session DSN (polls)", cfg.pgbouncerDSN, ""},
	}
	res := make([]samples, len(variants))
	ops := make([]op, len(variants))
	for i, v := range variants {
		child, err := startChildWith(e, v.dsn, v.session)
		if err != nil {
			return fmt.Errorf("%s: child process: %w", v.label, err)
		}
		defer child.stop()
		name := e.newName("pooler", i)
		ops[i] = func(ctx context.Context) error {
			d, err := child.handoff(ctx, roundPause(cfg.pause), func() (func() error, error) {
				k, err := holder.Acquire(ctx, name)
				if err != nil {
					return nil, err
				}
				return func() error { return k.Release(ctx) }, nil
			}, name, false)
			if err != nil {
				return fmt.Errorf("%s: %w", v.label, err)
			}
			res[i] = append(res[i], d)
			return nil
		}
	}
	const warmup = 3
	if _, err := interleave(ctx, cfg.handoffs, warmup, ops); err != nil {
		return err
	}
	direct := res[0][warmup:]
	for i, v := range variants {
		s := res[i][warmup:]
		t.add(e.target.name, v.label, fmt.Sprint(len(s)), dur(s.pct(50)), dur(s.pct(99)), dratio(s.pct(50), direct.pct(50)))
	}
	return nil
}

// poolerNote says what the pooler section measures.
func poolerNote(cfg config) string {
	return strings.TrimSpace(fmt.Sprintf(`%d handoffs per variant, taking turns round by round: a holder in this process (direct connection) releases, and a waiter in a child process, blocked in Acquire, returns; the child's pool goes directly to the server, or through the PgBouncer at -pgbouncer-dsn in transaction mode, with its session connection (LISTEN, the session marker) given a direct connection or not. Without one the child's Locker finds, by a NOTIFY round trip, that notifications do not come back, and its waiters poll every %v at most.`,
		cfg.handoffs, 10*time.Millisecond))
}
