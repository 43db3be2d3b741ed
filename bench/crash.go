package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/rowlock"
)

// crashFlag runs the binary as a holder that the parent kills: it takes
// the lock of the given kind and name, says "held", and waits.
const crashFlag = "-crash-holder"

// crashKinds are the holders the crash section kills, in report order.
var crashKinds = []struct{ kind, label string }{
	{"rowlock", "rowlock (default TTL 30 s, crash grace 1 s)"},
	{"forupdate", "forupdate"},
	{"advisory", "advisory lock (pinned conn)"},
}

// crashes times, per kind of lock, how long after its holder's process is
// SIGKILLed a waiter in this process, blocked in Acquire, gets the lock.
func crashes(ctx context.Context, cfg config, e *env, t *table) error {
	rowL, err := rowlock.New(e.db)
	if err != nil {
		return err
	}
	defer rowL.Close()
	var fuL *forupdate.Locker
	if e.fuErr == nil {
		if fuL, err = forupdate.New(e.db); err != nil {
			return err
		}
		defer fuL.Close()
	}
	conns, closeConns, err := pinned(ctx, e.db, 1)
	if err != nil {
		return err
	}
	defer closeConns()
	for _, k := range crashKinds {
		if k.kind == "forupdate" && fuL == nil {
			continue
		}
		var s samples
		for round := range cfg.crashes {
			name := e.newName("crash-"+k.kind, round)
			var wait func() (release func() error, err error)
			switch k.kind {
			case "rowlock":
				wait = acquireWith(ctx, rowL, name)
			case "forupdate":
				e.names.forUpdate(name)
				wait = acquireWith(ctx, fuL, name)
			case "advisory":
				wait = func() (func() error, error) {
					if err := e.advLock(ctx, conns[0], name); err != nil {
						return nil, err
					}
					return func() error { return e.advUnlock(ctx, conns[0], name) }, nil
				}
			}
			d, err := timeCrash(ctx, e, k.kind, name, wait)
			if err != nil {
				return fmt.Errorf("%s: %w", k.kind, err)
			}
			s = append(s, d)
		}
		t.add(e.target.name, k.label, fmt.Sprint(len(s)), dur(s.pct(50)), dur(s.pct(100)))
	}
	return nil
}

// acquireWith is a blocking acquire of name by l.
func acquireWith(ctx context.Context, l dblock.Locker, name string) func() (func() error, error) {
	return func() (func() error, error) {
		k, err := l.Acquire(ctx, name)
		if err != nil {
			return nil, err
		}
		return func() error { return k.Release(ctx) }, nil
	}
}

// timeCrash starts a holder process, starts wait once it holds, kills the
// holder after the waiter has had time to block, and returns the time from
// the kill to wait's return.
func timeCrash(ctx context.Context, e *env, kind, name string, wait func() (func() error, error)) (time.Duration, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(exe, crashFlag, e.target.name, kind, name)
	cmd.Env = append(os.Environ(), e.target.env+"="+e.dsn)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "held" {
		return 0, fmt.Errorf("holder process said %q, want held (%v)", lines.Text(), lines.Err())
	}
	got := make(chan waited, 1)
	go func() {
		release, err := wait()
		got <- waited{time.Now(), release, err}
	}()
	// Long enough for the waiter to block (and, for rowlock, to read the
	// holder and start watching its marker); it is not part of the time.
	select {
	case w := <-got:
		return 0, fmt.Errorf("the waiter returned while the holder lived: %v", w.err)
	case <-time.After(200 * time.Millisecond):
	}
	killed := time.Now()
	if err := cmd.Process.Kill(); err != nil {
		return 0, err
	}
	select {
	case w := <-got:
		if w.err != nil {
			return 0, w.err
		}
		return w.at.Sub(killed), w.release()
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// runCrashHolder is the holder process: it takes the lock and waits to be
// killed.
func runCrashHolder(dialect, kind, name string) error {
	tg, db, err := openChildTarget(dialect)
	if err != nil {
		return err
	}
	ctx := context.Background()
	switch kind {
	case "rowlock":
		l, err := rowlock.New(db)
		if err != nil {
			return err
		}
		if _, err := l.Acquire(ctx, name); err != nil {
			return err
		}
	case "forupdate":
		l, err := forupdate.New(db)
		if err != nil {
			return err
		}
		if _, err := l.Acquire(ctx, name); err != nil {
			return err
		}
	case "advisory":
		e := &env{target: tg, db: db, sql: dialects[tg.dialect]}
		conn, err := db.Conn(ctx)
		if err != nil {
			return err
		}
		if err := e.advLock(ctx, conn, name); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown kind %q", kind)
	}
	fmt.Println("held")
	select {} // until killed
}
