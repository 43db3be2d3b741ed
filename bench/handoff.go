package main

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
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

func handoffs(ctx context.Context, cfg config, e *env, t *table, chart *panel) error {
	var variants []handoffVariant
	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	newRowlock := func() (*rowlock.Locker, error) {
		l, err := rowlock.New(e.db)
		if err == nil {
			closers = append(closers, func() { _ = l.Close() })
		}
		return l, err
	}
	holder, err := newRowlock()
	if err != nil {
		return err
	}
	local, err := newRowlock()
	if err != nil {
		return err
	}
	lockOf := func(l dblock.Locker, name string, opts ...dblock.Option) func() (func() error, error) {
		return func() (func() error, error) {
			k, err := l.Acquire(ctx, name, opts...)
			if err != nil {
				return nil, err
			}
			return func() error { return k.Release(ctx) }, nil
		}
	}
	for _, fair := range []bool{false, true} {
		var opts []dblock.Option
		kind := "rowlock unfair"
		if fair {
			opts, kind = []dblock.Option{dblock.Fair()}, "rowlock fair"
		}
		name := e.newName("h-local", len(variants))
		variants = append(variants, handoffVariant{kind, "same process", kind + ", same process", func(ctx context.Context) (time.Duration, error) {
			return timeHandoff(ctx, roundPause(cfg.pause), lockOf(holder, name), lockOf(local, name, opts...))
		}})
	}
	child, err := startChild(e)
	if err != nil {
		return fmt.Errorf("child process: %w", err)
	}
	closers = append(closers, child.stop)
	for _, fair := range []bool{false, true} {
		kind := "rowlock unfair"
		if fair {
			kind = "rowlock fair"
		}
		name := e.newName("h-child", len(variants))
		variants = append(variants, handoffVariant{kind, "other process", kind + ", other process", func(ctx context.Context) (time.Duration, error) {
			return child.handoff(ctx, roundPause(cfg.pause), lockOf(holder, name), name, fair)
		}})
	}
	if e.fuErr == nil {
		fh, err := forupdate.New(e.db)
		if err != nil {
			return err
		}
		fw, err := forupdate.New(e.db)
		if err != nil {
			return err
		}
		closers = append(closers, func() { _ = fh.Close(); _ = fw.Close() })
		name := e.newName("h-fu")
		e.names.forUpdate(name)
		variants = append(variants, handoffVariant{"forupdate", "same process", "forupdate", func(ctx context.Context) (time.Duration, error) {
			return timeHandoff(ctx, roundPause(cfg.pause), lockOf(fh, name), lockOf(fw, name))
		}})
	}
	naive, err := newNaiveBlocking(ctx, e, e.newName("h-naive"))
	if err != nil {
		return err
	}
	closers = append(closers, naive.close)
	naiveIndex := len(variants)
	variants = append(variants, handoffVariant{"naive INSERT/DELETE (raw)", "same process, " + naive.waiterKind(), "naive INSERT/DELETE (raw)",
		func(ctx context.Context) (time.Duration, error) {
			return timeHandoff(ctx, roundPause(cfg.pause),
				func() (func() error, error) { return naive.hold(ctx) },
				func() (func() error, error) { return naive.wait(ctx) })
		}})
	// The floor of any handoff whose outcome the database keeps: one
	// write committed after the same idle pause as a handoff's, with the
	// log flush the commit waits for (PostgreSQL's WAL, InnoDB's redo log;
	// innodb_flush_log_at_trx_commit is global on MySQL and MariaDB, so no
	// one transaction can do without it). A handoff adds to it at least
	// the wake-up of the waiter, which is all a blocking advisory lock's
	// handoff is.
	// The INSERT is prepared, as rowlock's statements are: one round trip.
	floorName := e.newName("h-floor")
	floorInsert, err := e.db.PrepareContext(ctx, e.sql.naiveInsert)
	if err != nil {
		return err
	}
	closers = append(closers, func() { _ = floorInsert.Close() })
	variants = append(variants, handoffVariant{"floor: one autocommit INSERT (raw)", "—", "floor: one durable commit", func(ctx context.Context) (time.Duration, error) {
		time.Sleep(roundPause(cfg.pause))
		start := time.Now()
		if _, err := floorInsert.ExecContext(ctx, floorName); err != nil {
			return 0, err
		}
		took := time.Since(start)
		_, err := e.db.ExecContext(ctx, e.sql.naiveDelete, floorName)
		return took, err
	}})
	give, err := newGiveInCommit(ctx, e)
	if err != nil {
		return err
	}
	closers = append(closers, give.close)
	variants = append(variants, handoffVariant{"give the row, wake, commit (raw)", "same process", "give the row, wake, commit (raw)", func(ctx context.Context) (time.Duration, error) {
		return timeHandoff(ctx, roundPause(cfg.pause), give.hold, give.wait)
	}})
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
	variants = append(variants, handoffVariant{"BEGIN; SELECT … FOR UPDATE (raw)", "same process", "SELECT … FOR UPDATE (raw)", func(ctx context.Context) (time.Duration, error) {
		return timeHandoff(ctx, roundPause(cfg.pause), rawLock, rawLock)
	}})
	conns, closeConns, err := pinned(ctx, e.db, 2)
	if err != nil {
		return err
	}
	closers = append(closers, closeConns)
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
	variants = append(variants, handoffVariant{advBlocking, "same process", "advisory lock, blocking", func(ctx context.Context) (time.Duration, error) {
		return timeHandoff(ctx, roundPause(cfg.pause), advLock(conns[0]), advLock(conns[1]))
	}})

	ops := make([]op, len(variants))
	res := make([]samples, len(variants))
	for i, v := range variants {
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
	if _, err := interleave(ctx, cfg.handoffs, warmup, ops); err != nil {
		return err
	}
	adv := res[len(res)-1][warmup:]
	raw := res[len(res)-2][warmup:]
	naiveRaw := res[naiveIndex][warmup:]
	for i, v := range variants {
		s := res[i][warmup:]
		vsRaw := "—"
		switch {
		case v.name == "forupdate":
			vsRaw = dratio(s.pct(50), raw.pct(50))
		case strings.HasPrefix(v.name, "rowlock"):
			vsRaw = dratio(s.pct(50), naiveRaw.pct(50))
		}
		t.add(e.target.name, v.name, v.waiter, fmt.Sprint(len(s)), dur(s.pct(50)), dur(s.pct(99)), dur(s.pct(100)),
			vsRaw, dratio(s.pct(50), adv.pct(50)))
		chart.set(v.label, e.target.name, s.pct(50))
	}
	return nil
}

// sessionDSNEnv passes a waiter process the DSN of its session
// connection (the pooler section).
const sessionDSNEnv = "SQLLOCK_BENCH_SESSION_DSN"

// childFlag runs the binary as a waiter for the parent's handoffs: it
// reads "acquire <name> <fair>" lines, says "waiting" before each Acquire,
// "got <unix ns>" when it returns, and "released" after releasing.
const childFlag = "-handoff-child"

type childProcess struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startChild(e *env) (*childProcess, error) { return startChildWith(e, e.dsn, "") }

// startChildWith starts a waiter process whose Locker's pool uses dsn and,
// when sessionDSN is not empty, its session connection that one
// (rowlock.WithSessionDB).
func startChildWith(e *env, dsn, sessionDSN string) (*childProcess, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, childFlag, e.target.name)
	cmd.Env = append(os.Environ(), e.target.env+"="+dsn, sessionDSNEnv+"="+sessionDSN)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &childProcess{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	if _, err := c.expect("ready"); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

func (c *childProcess) stop() {
	_ = c.in.Close() // the child exits at the end of its input
	done := make(chan struct{})
	go func() {
		_ = c.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

// expect reads the child's next line, which must start with word.
func (c *childProcess) expect(word string) (string, error) {
	if !c.out.Scan() {
		return "", fmt.Errorf("child ended before %q: %v", word, c.out.Err())
	}
	line := c.out.Text()
	rest, ok := strings.CutPrefix(line, word)
	if !ok {
		return "", fmt.Errorf("child said %q, want %q", line, word)
	}
	return strings.TrimSpace(rest), nil
}

func (c *childProcess) handoff(ctx context.Context, pause time.Duration, hold func() (func() error, error), name string, fair bool) (time.Duration, error) {
	release, err := hold()
	if err != nil {
		return 0, err
	}
	if _, err := fmt.Fprintf(c.in, "acquire %s %t\n", name, fair); err != nil {
		return 0, errors.Join(err, release())
	}
	if _, err := c.expect("waiting"); err != nil {
		return 0, errors.Join(err, release())
	}
	time.Sleep(pause)
	start := time.Now()
	if err := release(); err != nil {
		return 0, err
	}
	got, err := c.expect("got")
	if err != nil {
		return 0, err
	}
	if _, err := c.expect("released"); err != nil {
		return 0, err
	}
	ns, err := strconv.ParseInt(got, 10, 64)
	if err != nil {
		return 0, err
	}
	// Both clocks are this machine's wall clock.
	return time.Unix(0, ns).Sub(start), nil
}

func runChild(dialect string) error {
	var tg target
	for _, t := range targets {
		if t.name == dialect {
			tg = t
		}
	}
	if tg.name == "" {
		return fmt.Errorf("unknown dialect %q", dialect)
	}
	db, err := sql.Open(tg.driver, os.Getenv(tg.env))
	if err != nil {
		return err
	}
	defer db.Close()
	var opts []rowlock.Option
	if dsn := os.Getenv(sessionDSNEnv); dsn != "" {
		sessions, err := sql.Open(tg.driver, dsn)
		if err != nil {
			return err
		}
		defer sessions.Close()
		opts = append(opts, rowlock.WithSessionDB(sessions))
	}
	l, err := rowlock.New(db, opts...)
	if err != nil {
		return err
	}
	defer l.Close()
	ctx := context.Background()
	out := bufio.NewWriter(os.Stdout)
	say := func(format string, args ...any) {
		fmt.Fprintf(out, format+"\n", args...)
		_ = out.Flush()
	}
	say("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var name string
		var fair bool
		if _, err := fmt.Sscanf(in.Text(), "acquire %s %t", &name, &fair); err != nil {
			return fmt.Errorf("bad command %q: %w", in.Text(), err)
		}
		var opts []dblock.Option
		if fair {
			opts = append(opts, dblock.Fair())
		}
		say("waiting")
		k, err := l.Acquire(ctx, name, opts...)
		at := time.Now()
		if err != nil {
			return err
		}
		say("got %d", at.UnixNano())
		if err := k.Release(ctx); err != nil {
			return err
		}
		say("released")
	}
	return in.Err()
}

// giveInCommit is the fastest handoff of a lock whose token the database
// keeps that SQL allows, as raw statements on two pinned connections: the
// holder holds a named lock (advisory; GET_LOCK) that the waiter blocks
// on. To hand over, the holder, in one transaction, gives the name's row to
// the waiter (token + 1), lets go of the named lock and commits; the
// waiter, woken, reads the row with a shared row lock, which waits for
// that commit. The wake-up runs while the commit flushes, and the waiter
// writes nothing: one durable commit and one wake-up, overlapped, are all
// it costs. (rowlock's handoff commits twice, the release and the take, and
// wakes the waiter after the first; this is what a redesign could reach.)
type giveInCommit struct {
	e           *env
	holder, got *sql.Conn
	name, bell  string
	closeConns  func()
}

func newGiveInCommit(ctx context.Context, e *env) (*giveInCommit, error) {
	name := e.newName("h-give")
	if _, err := e.db.ExecContext(ctx, e.sql.naiveInsert, name); err != nil {
		return nil, err
	}
	conns, closeConns, err := pinned(ctx, e.db, 2)
	if err != nil {
		return nil, err
	}
	return &giveInCommit{e: e, holder: conns[0], got: conns[1], name: name, bell: name + "-bell", closeConns: closeConns}, nil
}

func (g *giveInCommit) close() { g.closeConns() }

// hold takes the row back and the named lock; the release gives the row
// in its commit.
func (g *giveInCommit) hold() (func() error, error) {
	ctx := context.Background()
	if _, err := g.e.db.ExecContext(ctx, g.e.sql.xferHold, g.name); err != nil {
		return nil, err
	}
	if err := g.e.advLock(ctx, g.holder, g.bell); err != nil {
		return nil, err
	}
	return func() error {
		tx, err := g.holder.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		giveStmt, err := g.e.prepared.stmt(ctx, g.holder, g.e.sql.xferGive)
		if err != nil {
			return errors.Join(err, tx.Rollback())
		}
		if _, err := tx.StmtContext(ctx, giveStmt).ExecContext(ctx, g.name); err != nil {
			return errors.Join(err, tx.Rollback())
		}
		unlock, err := g.e.prepared.stmt(ctx, g.holder, g.e.sql.advUnlock)
		if err != nil {
			return errors.Join(err, tx.Rollback())
		}
		var ok sql.NullBool
		if err := tx.StmtContext(ctx, unlock).QueryRowContext(ctx, g.e.advKey(g.bell)).Scan(&ok); err != nil || !ok.Bool {
			return errors.Join(err, tx.Rollback(), fmt.Errorf("named lock %q not held", g.bell))
		}
		return tx.Commit()
	}, nil
}

// wait blocks on the named lock, then reads the row it was given.
func (g *giveInCommit) wait() (func() error, error) {
	ctx := context.Background()
	if err := g.e.advLock(ctx, g.got, g.bell); err != nil {
		return nil, err
	}
	var owner string
	err := g.e.queryRow(ctx, g.got, g.e.sql.xferRead, g.name).Scan(&owner)
	if err == nil && owner != "w" {
		err = fmt.Errorf("woken, the waiter found the row owned by %q, not given to it", owner)
	}
	if err != nil {
		return nil, errors.Join(err, g.e.advUnlock(ctx, g.got, g.bell))
	}
	return func() error { return g.e.advUnlock(ctx, g.got, g.bell) }, nil
}
