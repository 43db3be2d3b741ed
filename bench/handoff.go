package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/rowlock"
)

// handoffVariant times one handoff per call.
type handoffVariant struct {
	name, waiter string
	label        string // in the chart, the same for both dialects
	round        func(ctx context.Context) (time.Duration, error)
}

// roundPause is how long one round's waiter waits before the release:
// pause, plus up to as much again at random. A waiter that polls does so on
// a schedule that starts with its acquire; with the same pause every round,
// every release would fall at the same point of that schedule and every
// handoff would wait the same part of a polling interval. Holders release
// at any moment, so the release's phase is drawn uniformly.
func roundPause(pause time.Duration) time.Duration {
	return pause + rand.N(pause)
}

// waited is what a waiter goroutine reports: when its acquire returned.
type waited struct {
	at      time.Time
	release func() error
	err     error
}

// timeHandoff runs one round: hold with hold, start wait in a goroutine,
// pause, then time release until wait returns.
func timeHandoff(ctx context.Context, pause time.Duration,
	hold func() (release func() error, err error),
	wait func() (release func() error, err error),
) (time.Duration, error) {
	release, err := hold()
	if err != nil {
		return 0, err
	}
	got := make(chan waited, 1)
	go func() {
		rel, err := wait()
		got <- waited{time.Now(), rel, err}
	}()
	select {
	case <-time.After(pause):
	case r := <-got:
		// The waiter got the lock while it was held: a bug, or an error.
		err := r.err
		if err == nil {
			err = errors.New("waiter acquired a held lock")
			_ = r.release()
		}
		return 0, errors.Join(err, release())
	}
	start := time.Now()
	if err := release(); err != nil {
		return 0, err
	}
	var r waited
	select {
	case r = <-got:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if r.err != nil {
		return 0, r.err
	}
	return r.at.Sub(start), r.release()
}

// handoffSet collects the section's variants and what closes them.
type handoffSet struct {
	ctx      context.Context
	cfg      config
	e        *env
	variants []handoffVariant
	closers  []func()
	naive    int // the index of the naive recipe, rowlock's baseline
}

func (h *handoffSet) add(name, waiter, label string, round func(ctx context.Context) (time.Duration, error)) {
	h.variants = append(h.variants, handoffVariant{name, waiter, label, round})
}

func (h *handoffSet) close() {
	for _, c := range h.closers {
		c()
	}
}

// timed is a variant's round: one handoff from hold to wait after a pause.
func (h *handoffSet) timed(hold, wait func() (func() error, error)) func(ctx context.Context) (time.Duration, error) {
	return func(ctx context.Context) (time.Duration, error) {
		return timeHandoff(ctx, roundPause(h.cfg.pause), hold, wait)
	}
}

// lockOf acquires name from l and returns its release.
func (h *handoffSet) lockOf(l dblock.Locker, name string, opts ...dblock.Option) func() (func() error, error) {
	return func() (func() error, error) {
		k, err := l.Acquire(h.ctx, name, opts...)
		if err != nil {
			return nil, err
		}
		return func() error { return k.Release(h.ctx) }, nil
	}
}

func (h *handoffSet) newRowlock() (*rowlock.Locker, error) {
	l, err := rowlock.New(h.e.db)
	if err == nil {
		h.closers = append(h.closers, func() { _ = l.Close() })
	}
	return l, err
}

func handoffs(ctx context.Context, cfg config, e *env, t *table, chart *panel) error {
	h := &handoffSet{ctx: ctx, cfg: cfg, e: e}
	defer h.close()
	for _, add := range []func() error{h.addRowlock, h.addForUpdate, h.addNaive, h.addFloor, h.addRaw} {
		if err := add(); err != nil {
			return err
		}
	}
	return h.run(t, chart)
}

// addRowlock adds rowlock's handoffs, unfair and fair, to a waiter in the
// same process and to one in another.
func (h *handoffSet) addRowlock() error {
	holder, err := h.newRowlock()
	if err != nil {
		return err
	}
	for _, fair := range []bool{false, true} {
		var opts []dblock.Option
		kind := "rowlock unfair"
		if fair {
			opts, kind = []dblock.Option{dblock.Fair()}, "rowlock fair"
		}
		name := h.e.newName("h-local", len(h.variants))
		h.add(kind, "same process", kind+", same process", h.timed(h.lockOf(holder, name), h.lockOf(holder, name, opts...)))
	}
	child, err := startChild(h.e)
	if err != nil {
		return fmt.Errorf("child process: %w", err)
	}
	h.closers = append(h.closers, child.stop)
	for _, fair := range []bool{false, true} {
		kind := "rowlock unfair"
		if fair {
			kind = "rowlock fair"
		}
		name := h.e.newName("h-child", len(h.variants))
		hold := h.lockOf(holder, name)
		h.add(kind, "other process", kind+", other process", func(ctx context.Context) (time.Duration, error) {
			return child.handoff(ctx, roundPause(h.cfg.pause), hold, name, fair)
		})
	}
	return nil
}

// addForUpdate adds forupdate's handoff, where the server has its table.
func (h *handoffSet) addForUpdate() error {
	if h.e.fuErr != nil {
		return nil
	}
	fh, err := forupdate.New(h.e.db)
	if err != nil {
		return err
	}
	fw, err := forupdate.New(h.e.db)
	if err != nil {
		_ = fh.Close()
		return err
	}
	h.closers = append(h.closers, func() { _ = fh.Close(); _ = fw.Close() })
	name := h.e.newName("h-fu")
	h.e.names.forUpdate(name)
	h.add("forupdate", "same process", "forupdate", h.timed(h.lockOf(fh, name), h.lockOf(fw, name)))
	return nil
}

// addNaive adds the naive INSERT/DELETE recipe, rowlock's baseline.
func (h *handoffSet) addNaive() error {
	naive, err := newNaiveBlocking(h.ctx, h.e, h.e.newName("h-naive"))
	if err != nil {
		return err
	}
	h.closers = append(h.closers, naive.close)
	h.naive = len(h.variants)
	h.add("naive INSERT/DELETE (raw)", "same process, "+naive.waiterKind(), "naive INSERT/DELETE (raw)",
		h.timed(func() (func() error, error) { return naive.hold(h.ctx) },
			func() (func() error, error) { return naive.wait(h.ctx) }))
	return nil
}

// addFloor adds the floor of any handoff whose outcome the database keeps:
// one write committed after the same idle pause as a handoff's, with the
// log flush the commit waits for (PostgreSQL's WAL, InnoDB's redo log;
// innodb_flush_log_at_trx_commit is global on MySQL and MariaDB, so no
// one transaction can do without it). A handoff adds to it at least
// the wake-up of the waiter, which is all a blocking advisory lock's
// handoff is.
// The INSERT is prepared, as rowlock's statements are: one round trip.
func (h *handoffSet) addFloor() error {
	floorName := h.e.newName("h-floor")
	floorInsert, err := h.e.db.PrepareContext(h.ctx, h.e.sql.naiveInsert)
	if err != nil {
		return err
	}
	h.closers = append(h.closers, func() { _ = floorInsert.Close() })
	h.add("floor: one autocommit INSERT (raw)", "—", "floor: one durable commit", func(ctx context.Context) (time.Duration, error) {
		time.Sleep(roundPause(h.cfg.pause))
		start := time.Now()
		if _, err := floorInsert.ExecContext(ctx, floorName); err != nil {
			return 0, err
		}
		took := time.Since(start)
		_, err := h.e.db.ExecContext(ctx, h.e.sql.naiveDelete, floorName)
		return took, err
	})
	return nil
}

// addRaw adds the raw protocols: the row given in the release's commit,
// SELECT … FOR UPDATE (forupdate's baseline, second to last) and a
// blocking advisory lock (every row's second baseline, last).
func (h *handoffSet) addRaw() error {
	ctx, e := h.ctx, h.e
	give, err := newGiveInCommit(ctx, e)
	if err != nil {
		return err
	}
	h.closers = append(h.closers, give.close)
	h.add("give the row, wake, commit (raw)", "same process", "give the row, wake, commit (raw)", h.timed(give.hold, give.wait))
	rawName := e.newName("h-rawfu")
	if err := e.fuCreate(ctx, rawName); err != nil {
		return err
	}
	rawLock := func() (func() error, error) {
		tx, err := e.db.BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		var one int
		if err := tx.QueryRowContext(ctx, e.sql.fuLock, rawName).Scan(&one); err != nil {
			return nil, errors.Join(err, tx.Rollback())
		}
		return tx.Commit, nil
	}
	h.add("BEGIN; SELECT … FOR UPDATE (raw)", "same process", "SELECT … FOR UPDATE (raw)", h.timed(rawLock, rawLock))
	conns, closeConns, err := pinned(ctx, e.db, 2)
	if err != nil {
		return err
	}
	h.closers = append(h.closers, closeConns)
	advName := e.newName("h-adv")
	advLock := func(conn *sql.Conn) func() (func() error, error) {
		return func() (func() error, error) {
			if err := e.advLock(ctx, conn, advName); err != nil {
				return nil, err
			}
			return func() error { return e.advUnlock(ctx, conn, advName) }, nil
		}
	}
	advBlocking := "pg_advisory_lock (blocking)"
	if e.dialect == dblock.MySQL {
		advBlocking = "GET_LOCK(name, 60) (blocking)"
	}
	h.add(advBlocking, "same process", "advisory lock, blocking", h.timed(advLock(conns[0]), advLock(conns[1])))
	return nil
}

// run times every variant, interleaved, and writes their rows.
func (h *handoffSet) run(t *table, chart *panel) error {
	ops := make([]op, len(h.variants))
	res := make([]samples, len(h.variants))
	for i, v := range h.variants {
		ops[i] = func(ctx context.Context) error {
			d, err := v.round(ctx)
			if err != nil {
				return fmt.Errorf("%s (%s): %w", v.name, v.waiter, err)
			}
			res[i] = append(res[i], d)
			return nil
		}
	}
	const warmup = 3
	if _, err := interleave(h.ctx, h.cfg.handoffs, warmup, ops); err != nil {
		return err
	}
	adv := res[len(res)-1][warmup:]
	raw := res[len(res)-2][warmup:]
	naiveRaw := res[h.naive][warmup:]
	for i, v := range h.variants {
		s := res[i][warmup:]
		vsRaw := "—"
		switch {
		case v.name == "forupdate":
			vsRaw = dratio(s.pct(50), raw.pct(50))
		case strings.HasPrefix(v.name, "rowlock"):
			vsRaw = dratio(s.pct(50), naiveRaw.pct(50))
		}
		t.add(h.e.target.name, v.name, v.waiter, fmt.Sprint(len(s)), dur(s.pct(50)), dur(s.pct(99)), dur(s.pct(100)),
			vsRaw, dratio(s.pct(50), adv.pct(50)))
		chart.set(v.label, h.e.target.name, s.pct(50))
	}
	return nil
}
