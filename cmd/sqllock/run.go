package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/sqllock/sqllock/admin"
	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/migrations"
	"github.com/sqllock/sqllock/rowlock"
)

var runCommand = &command{
	name:    "run",
	summary: "run a command while holding a lock (for crontabs)",
	usage:   "--name NAME [--limit N] [--ttl D] [--wait D] [--min-hold D] [--note TEXT] [--kill-after D] [-v] -- command [arguments...]",
	help: `
run takes the lock NAME, runs the command, and releases the lock when the
command exits. Run the same line from the crontab of every machine: one of them
runs the command, the others exit 75 at once (or after --wait), printing
nothing, so that cron mails nobody about the replicas that lost the race
(-v says who holds the lock).

The lock has a lease of --ttl, renewed every ttl/3 while the command runs, so
the lock of a machine that dies is free again within --ttl. If the lock is lost
(the database was unreachable for too long), the command gets SIGTERM, and
SIGKILL --kill-after later if it is still running. SIGINT, SIGTERM and SIGHUP
sent to sqllock are passed on to the command.

The command runs in a process group of its own, and these signals go to the
whole group, so that the processes a script starts stop with it. If the
command exits while processes it started still run in its group, they get
SIGTERM (and SIGKILL --kill-after later), and the lock is released only once
they are gone: nothing the command started runs without the lock. (Being in a
group of its own, the command is not the terminal's foreground job: run
commands that read from the terminal without sqllock.) If sqllock itself is
killed (SIGKILL, or it crashes), a watchdog process it leaves beside the group
sends the whole group SIGKILL at once (on Linux the kernel also kills the
command), so that nothing runs on while the lock lapses and the next holder's
command starts.

With --limit N the lock is a counting semaphore: at most N commands run at
once under NAME, across machines (each holds one permit; every caller of NAME
must give the same N, or the one that disagrees exits 78 while others hold
permits).

The command sees in its environment SQLLOCK_NAME and SQLLOCK_TOKEN, the
fencing token: it grows with every new holder of the lock. With --limit, each
of the N permits is a slot of its own, given in SQLLOCK_SLOT (0 to N-1), and
SQLLOCK_TOKEN grows with every new holder of that slot only: commands that
hold permits at the same time have different slots, and may have the same
token.

Durations take a unit: 500ms, 30s, 5m, 1h30m.

Exit codes:
  the command's  once it started (128+N if signal N killed it; 1 if it
                 exited 0 but the lock was lost while it ran)
  75             the lock is held by another process (EX_TEMPFAIL): nothing
                 printed unless -v
  69             the database cannot be reached or is read-only: the command
                 did not run (EX_UNAVAILABLE)
  78             the database refused the DSN, the SQLite file cannot be
                 opened, or there are no lock tables: the command did not
                 run (EX_CONFIG)
  64             usage error
  126, 127       the command cannot be executed, or is not found
  1              any other error`,
	flags: func(fs *flag.FlagSet) func(*invocation) error {
		var o runOptions
		fs.StringVar(&o.name, "name", "", "the lock's `name` (required)")
		fs.IntVar(&o.limit, "limit", 0, "let up to `N` commands hold NAME at once (a counting semaphore; default: one, a plain lock)")
		durationVar(fs, &o.ttl, "ttl", dblock.DefaultTTL, "the lock's lease, a `duration` renewed every ttl/3 while the command runs")
		durationVar(fs, &o.wait, "wait", 0, "wait up to `duration` for the lock if it is held (default: do not wait)")
		durationVar(fs, &o.minHold, "min-hold", 0, "keep the lock taken at least `duration` after it was acquired, even if the command ends sooner")
		fs.StringVar(&o.note, "note", "", "a note stored with the lock, shown by status (default: the command's name)")
		durationVar(fs, &o.killAfter, "kill-after", 10*time.Second, "send SIGKILL to the command's process group if it still runs `duration` after SIGTERM (0: never)")
		fs.BoolVar(&o.verbose, "v", false, "verbose: say who holds the lock when it is held elsewhere (exit 75), and when it is taken, with its token")
		return func(inv *invocation) error { return runLocked(inv, o) }
	},
}

type runOptions struct {
	name      string
	limit     int
	ttl       time.Duration
	wait      time.Duration
	minHold   time.Duration
	note      string
	killAfter time.Duration
	verbose   bool
}

// releaseTimeout bounds the release after the command exits.
const releaseTimeout = 10 * time.Second

func runLocked(inv *invocation, o runOptions) error {
	lockOpts, err := o.lockOptions(inv.args)
	if err != nil {
		return err
	}

	ctx := context.Background()
	db, dialect, err := inv.connect(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	if dialect == dblock.SQLite {
		// An SQLite file is the lock store of this host alone, shared
		// with no other schema owner: run creates (or upgrades) its
		// tables, so the first command on a new file works.
		if err := migrations.Up(ctx, db, migrations.WithDialect(dialect)); err != nil {
			return err
		}
	}
	// Renewal failures and the loss of the lock are worth a line in the
	// crontab's mail.
	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(inv.stderr, &slog.HandlerOptions{Level: level}))
	locker, err := rowlock.New(db, rowlock.WithLogger(logger))
	if err != nil {
		return err
	}
	defer locker.Close()
	var takes dblock.Locker = locker
	if o.limit > 0 {
		if takes, err = locker.Semaphore(o.limit); err != nil {
			return usagef("run", "--limit: %v", err)
		}
	}

	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(signals)

	lock, err := acquire(ctx, takes, o, lockOpts, signals)
	if err != nil {
		return notTaken(ctx, db, o, err)
	}
	if o.verbose {
		fmt.Fprintf(inv.stderr, "sqllock: took lock %s (token %d)\n", o.name, lock.Token())
	}
	release := func() {
		relCtx, cancel := context.WithTimeout(ctx, releaseTimeout)
		defer cancel()
		if err := lock.Release(relCtx); err != nil {
			fmt.Fprintf(inv.stderr, "sqllock: releasing lock %s: %v (it lapses within --ttl)\n", o.name, err)
		}
	}

	cmd := userCommand(inv, o, lock)
	group, err := startGroup(cmd)
	if err != nil {
		release()
		return startError(inv.args[0], err)
	}
	code, lost := supervise(inv, cmd, group, lock, o, signals)
	group.close()
	if lost == nil {
		release()
	} else if code == 0 {
		code = exitError
	}
	return &exitCode{code: code}
}

// notTaken is run's answer when acquire returned err instead of the lock.
func notTaken(ctx context.Context, db *sql.DB, o runOptions, err error) error {
	switch {
	case errors.Is(err, dblock.ErrNotAcquired):
		// The normal case on every replica but one: cron would mail any
		// output, every tick, from each of them.
		if !o.verbose {
			return &exitCode{code: exitTempFail}
		}
		msg := fmt.Sprintf("lock %s is held by another process", o.name)
		if holder := describeHolder(ctx, db, o.name); holder != "" {
			msg += " (" + holder + ")"
		}
		if o.wait > 0 {
			msg += fmt.Sprintf("; waited %v", o.wait)
		}
		return &exitCode{code: exitTempFail, msg: msg}
	case errors.Is(err, dblock.ErrLimitMismatch):
		return &exitCode{code: exitConfig, msg: err.Error()}
	}
	return err
}

// userCommand is the user's command, told the lock it runs under through its
// environment.
func userCommand(inv *invocation, o runOptions, lock dblock.Lock) *exec.Cmd {
	cmd := exec.Command(inv.args[0], inv.args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, inv.stdout, inv.stderr
	cmd.Env = append(os.Environ(), "SQLLOCK_NAME="+o.name, "SQLLOCK_TOKEN="+strconv.FormatInt(lock.Token(), 10))
	if permit, ok := lock.(*rowlock.Permit); ok {
		// A permit's token is its slot's: the pair fences.
		cmd.Env = append(cmd.Env, "SQLLOCK_SLOT="+strconv.Itoa(permit.Slot()))
	}
	return cmd
}

// lockOptions checks the run's flags and command, and returns the options
// of its lock; errors are usage errors.
func (o runOptions) lockOptions(args []string) ([]dblock.Option, error) {
	switch {
	case o.name == "":
		return nil, usagef("run", "--name is required: the name of the lock to hold while the command runs")
	case len(args) == 0:
		return nil, usagef("run", "no command to run: sqllock run --name NAME -- command [arguments...]")
	case o.wait < 0:
		return nil, usagef("run", "--wait must not be negative")
	case o.killAfter < 0:
		return nil, usagef("run", "--kill-after must not be negative")
	case o.limit < 0 || o.limit > rowlock.MaxSemaphoreLimit:
		return nil, usagef("run", "--limit must be 1 to %d (or 0, the default: a plain lock)", rowlock.MaxSemaphoreLimit)
	}
	if err := lockinput.ValidateName(o.name); err != nil {
		return nil, usagef("run", "--name: %v", err)
	}
	note := o.note
	if note == "" {
		note = "sqllock run " + filepath.Base(args[0])
	}
	lockOpts := []dblock.Option{dblock.TTL(o.ttl), dblock.MinHold(o.minHold), dblock.Note(shorten(note, dblock.MaxNoteLength/4))}
	if _, err := lockinput.ResolveOptions(lockOpts...); err != nil {
		return nil, usagef("run", "%v", err)
	}
	return lockOpts, nil
}

// acquire takes the lock, waiting up to o.wait, unless a signal comes first.
func acquire(ctx context.Context, locker dblock.Locker, o runOptions, opts []dblock.Option, signals <-chan os.Signal) (dblock.Lock, error) {
	acqCtx, cancel := context.WithCancel(ctx)
	if o.wait > 0 {
		acqCtx, cancel = context.WithTimeout(ctx, o.wait)
	}
	defer cancel()
	type result struct {
		lock dblock.Lock
		err  error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		if o.wait > 0 {
			r.lock, r.err = locker.Acquire(acqCtx, o.name, opts...)
		} else {
			r.lock, r.err = locker.TryAcquire(acqCtx, o.name, opts...)
		}
		done <- r
	}()
	select {
	case r := <-done:
		return r.lock, r.err
	case sig := <-signals:
		cancel()
		if r := <-done; r.err == nil {
			relCtx, relCancel := context.WithTimeout(ctx, releaseTimeout)
			defer relCancel()
			_ = r.lock.Release(relCtx)
		}
		return nil, &exitCode{code: 128 + signalNumber(sig), msg: fmt.Sprintf("interrupted by %v while waiting for lock %s", sig, o.name)}
	}
}

// leftoverPoll is how often sqllock looks whether the processes the
// command left behind are gone: they are not sqllock's children, so there
// is nothing to wait on.
const leftoverPoll = 25 * time.Millisecond

// supervise waits for the command and then for whatever it left running in
// its process group, passing signals on to the group, and stops the group
// when the lock is lost. It returns the command's exit code and, if the
// lock was lost, why.
func supervise(inv *invocation, cmd *exec.Cmd, group *procGroup, lock dblock.Lock, o runOptions, signals <-chan os.Signal) (code int, lost error) {
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	lockDone := lock.Done()
	var kill, poll <-chan time.Time
	// terminate sends SIGTERM and starts the --kill-after clock, once.
	terminating := false
	terminate := func() {
		group.signal(syscall.SIGTERM)
		if !terminating && o.killAfter > 0 {
			kill = time.After(o.killAfter)
		}
		terminating = true
	}
	for {
		select {
		case err := <-exited:
			exited = nil
			code = exitError
			if cmd.ProcessState == nil {
				fmt.Fprintf(inv.stderr, "sqllock: waiting for the command: %v\n", err)
			} else {
				code = exitStatus(cmd.ProcessState)
			}
			if group.empty() {
				return code, lost
			}
			if !terminating {
				fmt.Fprintf(inv.stderr, "sqllock: the command exited but left processes running in its process group; "+
					"sending them SIGTERM before releasing lock %s\n", o.name)
				terminate()
			}
			poll = time.After(leftoverPoll)
		case <-poll:
			if group.empty() {
				return code, lost
			}
			poll = time.After(leftoverPoll)
		case sig := <-signals:
			if s, ok := sig.(syscall.Signal); ok {
				group.signal(s)
			}
		case <-lockDone:
			// Nothing releases the lock while the command runs: it was lost.
			lockDone = nil
			lost = lock.Err()
			fmt.Fprintf(inv.stderr, "sqllock: lock %s lost (%v); sending SIGTERM to the command's process group\n", o.name, lost)
			terminate()
		case <-kill:
			kill = nil
			fmt.Fprintf(inv.stderr, "sqllock: the command's process group still runs %v after SIGTERM; sending SIGKILL\n", o.killAfter)
			group.signal(syscall.SIGKILL)
		}
	}
}

// exitStatus is the command's exit code, or 128+N when signal N killed it,
// as shells report it.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

func signalNumber(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return 0
}

// startError explains why the command did not start, with a shell's exit
// code.
func startError(name string, err error) error {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return &exitCode{code: exitNotFound, msg: fmt.Sprintf("command not found: %s", name)}
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ENOEXEC):
		return &exitCode{code: exitNoExec, msg: fmt.Sprintf("cannot execute %s: %v", name, err)}
	}
	return fmt.Errorf("starting %s: %w", name, err)
}

// describeHolder says who holds name and for how long, best effort: it is
// only for the message.
func describeHolder(ctx context.Context, db *sql.DB, name string) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	a, err := admin.New(db)
	if err != nil {
		return ""
	}
	defer a.Close()
	h, ok, err := a.Held(ctx, name)
	if err != nil || !ok {
		return ""
	}
	return fmt.Sprintf("by %s for %s", printable(h.OwnerHost), ms(h.HeldFor.Milliseconds()))
}

// interruptible returns a context canceled by SIGINT or SIGTERM.
func interruptible(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
}
