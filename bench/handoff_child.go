package main

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/rowlock"
)

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
	tg, db, err := openChildTarget(dialect)
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

// openChildTarget opens the database of dialect for a child process of the
// bench, from the DSN its parent passed in the target's variable.
func openChildTarget(dialect string) (target, *sql.DB, error) {
	for _, tg := range targets {
		if tg.name == dialect {
			db, err := sql.Open(tg.driver, os.Getenv(tg.env))
			return tg, db, err
		}
	}
	return target{}, nil, fmt.Errorf("unknown dialect %q", dialect)
}
