package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/sqllock/sqllock/reaper"
	"github.com/sqllock/sqllock/rowlock"
)

var reapCommand = &command{
	name:    "reap",
	summary: "delete lapsed locks and dead waiters, once",
	usage:   "[--grace D] [--batch N]",
	help: `
reap deletes lock rows whose lease lapsed more than --grace ago (released locks
keep their row until then; semaphores' permits and read/write locks' rows are
lock rows too), the limits recorded for semaphores with no permit held, and
waiters that stopped heartbeating, in batches of
short transactions, so applications keep taking locks meanwhile. It never
deletes a lock that is held. Only one reaper runs at a time; when another one
is sweeping, reap says so and exits 0. Applications can run the same sweep on a
schedule with package reaper instead.`,
	interspersed: true,
	flags: func(fs *flag.FlagSet) func(*invocation) error {
		var grace time.Duration
		durationVar(fs, &grace, "grace", reaper.DefaultGrace, "keep rows lapsed for less than `duration`")
		batch := fs.Int("batch", reaper.DefaultBatchSize, fmt.Sprintf("delete at most `N` rows per transaction (1 to %d)", reaper.MaxBatchSize))
		verbose := fs.Bool("v", false, "log each step to stderr")
		return func(inv *invocation) error { return runReap(inv, grace, *batch, *verbose) }
	},
}

func runReap(inv *invocation, grace time.Duration, batch int, verbose bool) error {
	if len(inv.args) > 0 {
		return usagef("reap", "reap takes no arguments, got %q", inv.args)
	}
	ctx, stop := interruptible(context.Background())
	defer stop()
	db, _, err := inv.connect(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	// The reaper logs a failed sweep that RunOnce returns too, and
	// reported once is enough: its log is for -v.
	logger := slog.New(slog.DiscardHandler)
	if verbose {
		logger = slog.New(slog.NewTextHandler(inv.stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	locker, err := rowlock.New(db, rowlock.WithLogger(logger))
	if err != nil {
		return err
	}
	defer locker.Close()
	r, err := reaper.New(locker, reaper.WithGrace(grace), reaper.WithBatchSize(batch))
	if err != nil {
		return err
	}
	res, err := r.RunOnce(ctx)
	switch {
	case res.Skipped:
		fmt.Fprintln(inv.stdout, "another reaper is sweeping this database now; nothing done")
	case err == nil || res.Locks > 0 || res.Waiters > 0 || res.Semaphores > 0:
		fmt.Fprintf(inv.stdout, "deleted %d lock rows, %d dead waiters and %d semaphore limits\n", res.Locks, res.Waiters, res.Semaphores)
	}
	return err
}
