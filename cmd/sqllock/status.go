package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/sqllock/sqllock/admin"
	"github.com/sqllock/sqllock/queue"
	"github.com/sqllock/sqllock/reaper"
)

var statusCommand = &command{
	name:    "status",
	summary: "show held locks and waiting processes",
	usage:   "[--json] [--limit N]",
	help: `
status lists the locks that are taken now, by the database clock: their name,
holder (host:pid and owner id), fencing token, hold count (0 for a lock
released early that stays taken until its --min-hold has passed), how long it
has been held and when its lease runs out unless renewed. Then the semaphores
with permits held (held/limit), the read/write locks taken (readers, and
whether a writer holds the lock or waits for the readers to leave), and the
processes waiting in line for fair locks. --json prints the same as one JSON
object (durations in milliseconds).`,
	interspersed: true,
	flags: func(fs *flag.FlagSet) func(*invocation) error {
		asJSON := fs.Bool("json", false, "print JSON instead of tables")
		limit := fs.Int("limit", 1000, "show at most `N` locks and N waiters")
		return func(inv *invocation) error { return runStatus(inv, *asJSON, *limit) }
	},
}

// statusLock is a taken lock, as status shows it.
type statusLock struct {
	Name        string `json:"name"`
	OwnerHost   string `json:"owner_host"`
	OwnerID     string `json:"owner_id"`
	Token       int64  `json:"token"`
	HoldCount   int    `json:"hold_count"`
	Note        string `json:"note"`
	HeldForMS   int64  `json:"held_for_ms"`
	ExpiresInMS int64  `json:"expires_in_ms"`
}

// statusWaiter is a live waiter of a fair lock.
type statusWaiter struct {
	ID           int64  `json:"id"`
	Name         string `json:"name"`
	OwnerHost    string `json:"owner_host"`
	OwnerID      string `json:"owner_id"`
	WaitingForMS int64  `json:"waiting_for_ms"`
}

// statusSemaphore is a semaphore with permits held.
type statusSemaphore struct {
	Name string `json:"name"`
	Held int    `json:"held"`
	// Limit is 0 when none is recorded (reaped as the last permit lapsed).
	Limit int `json:"limit"`
}

// statusRWLock is a read/write lock taken.
type statusRWLock struct {
	Name    string `json:"name"`
	Readers int    `json:"readers"`
	// Writer is "holding", "waiting" (for the readers to leave) or "".
	Writer string `json:"writer"`
}

type statusReport struct {
	Locks      []statusLock      `json:"locks"`
	Semaphores []statusSemaphore `json:"semaphores"`
	RWLocks    []statusRWLock    `json:"rw_locks"`
	Waiters    []statusWaiter    `json:"waiters"`
	// Reapable counts what `sqllock reap --grace 0` would delete.
	LapsedLocks int `json:"lapsed_locks"`
	DeadWaiters int `json:"dead_waiters"`
}

func runStatus(inv *invocation, asJSON bool, limit int) error {
	if len(inv.args) > 0 {
		return usagef("status", "status takes no arguments, got %q", inv.args)
	}
	if limit < 1 {
		return usagef("status", "--limit must be at least 1")
	}
	ctx := context.Background()
	db, _, err := inv.connect(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	a, err := admin.New(db)
	if err != nil {
		return err
	}
	defer a.Close()
	q, err := queue.New(db)
	if err != nil {
		return err
	}
	rep, err := readStatus(ctx, a, q, limit)
	if err != nil {
		return fmt.Errorf("status: %w", err)
	}
	if asJSON {
		enc := json.NewEncoder(inv.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printStatus(inv.stdout, rep, limit)
	return nil
}

func readStatus(ctx context.Context, a *admin.Admin, q *queue.Queue, limit int) (statusReport, error) {
	rep := statusReport{Locks: []statusLock{}, Semaphores: []statusSemaphore{}, RWLocks: []statusRWLock{}, Waiters: []statusWaiter{}}
	locks, err := a.Locks(ctx, limit)
	if err != nil {
		return rep, err
	}
	sems, rws, err := a.HeldKinds(ctx, locks)
	if err != nil {
		return rep, err
	}
	for _, s := range sems {
		rep.Semaphores = append(rep.Semaphores, statusSemaphore(s))
	}
	for _, rw := range rws {
		writer := ""
		switch {
		case rw.Writer && rw.Readers > 0:
			writer = "waiting"
		case rw.Writer:
			writer = "holding"
		}
		rep.RWLocks = append(rep.RWLocks, statusRWLock{Name: rw.Name, Readers: rw.Readers, Writer: writer})
	}
	for _, l := range locks {
		rep.Locks = append(rep.Locks, statusLock{
			Name: l.Name, OwnerHost: l.OwnerHost, OwnerID: l.OwnerID, Token: l.Token, HoldCount: l.HoldCount, Note: l.Note,
			HeldForMS: l.HeldFor.Milliseconds(), ExpiresInMS: l.ExpiresIn.Milliseconds(),
		})
	}
	waiters, err := q.AllWaiters(ctx, limit)
	if err != nil {
		return rep, err
	}
	for _, w := range waiters {
		rep.Waiters = append(rep.Waiters, statusWaiter{
			ID: w.ID, Name: w.Name, OwnerHost: w.OwnerHost, OwnerID: w.OwnerID, WaitingForMS: w.Waited.Milliseconds(),
		})
	}
	rep.LapsedLocks, rep.DeadWaiters, err = a.Lapsed(ctx)
	return rep, err
}

// printStatus writes the report as tables, one per section.
// Its complexity (over 15) is each section's empty and overflow cases,
// kept in the order the output reads.
func printStatus(w io.Writer, rep statusReport, limit int) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if len(rep.Locks) == 0 {
		fmt.Fprintln(tw, "No locks held.")
	} else {
		fmt.Fprintln(tw, "NAME\tOWNER HOST\tOWNER ID\tTOKEN\tHOLDS\tHELD FOR\tEXPIRES IN\tNOTE")
		for _, l := range rep.Locks {
			holds := fmt.Sprint(l.HoldCount)
			if l.HoldCount == 0 {
				holds = "0 (min-hold)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", printable(l.Name), printable(l.OwnerHost), printable(l.OwnerID),
				l.Token, holds, ms(l.HeldForMS), ms(l.ExpiresInMS), printable(shorten(l.Note, 40)))
		}
		if len(rep.Locks) == limit {
			fmt.Fprintf(tw, "(the first %d; pass --limit for more)\n", limit)
		}
	}
	if len(rep.Semaphores) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "SEMAPHORE\tPERMITS HELD")
		for _, sem := range rep.Semaphores {
			limit := "?"
			if sem.Limit > 0 {
				limit = fmt.Sprint(sem.Limit)
			}
			fmt.Fprintf(tw, "%s\t%d/%s\n", printable(sem.Name), sem.Held, limit)
		}
	}
	if len(rep.RWLocks) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "READ/WRITE LOCK\tREADERS\tWRITER")
		for _, rw := range rep.RWLocks {
			writer := rw.Writer
			if writer == "waiting" {
				writer = "waiting for the readers"
			} else if writer == "" {
				writer = "-"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\n", printable(rw.Name), rw.Readers, writer)
		}
	}
	if len(rep.Semaphores) > 0 || len(rep.RWLocks) > 0 {
		if len(rep.Locks) == limit {
			fmt.Fprintf(tw, "(counted over the first %d lock rows; pass --limit for more)\n", limit)
		}
	}
	fmt.Fprintln(tw)
	if len(rep.Waiters) == 0 {
		fmt.Fprintln(tw, "No waiters.")
	} else {
		fmt.Fprintln(tw, "WAITING FOR\tQUEUE ID\tOWNER HOST\tOWNER ID\tWAITING")
		for _, wt := range rep.Waiters {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", printable(wt.Name), wt.ID, printable(wt.OwnerHost), printable(wt.OwnerID), ms(wt.WaitingForMS))
		}
		if len(rep.Waiters) == limit {
			fmt.Fprintf(tw, "(the first %d; pass --limit for more)\n", limit)
		}
	}
	if rep.LapsedLocks > 0 || rep.DeadWaiters > 0 {
		fmt.Fprintf(tw, "\n%d lapsed lock rows and %d dead waiters: 'sqllock reap' deletes them once lapsed for longer than its --grace (default %v).\n",
			rep.LapsedLocks, rep.DeadWaiters, reaper.DefaultGrace)
	}
	_ = tw.Flush()
}

// shorten cuts s to at most n runes.
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-3]) + "..."
}

// ms formats a duration given in milliseconds for people: to the
// millisecond under a minute, to the second above.
func ms(n int64) string {
	d := time.Duration(n) * time.Millisecond
	if d >= time.Minute || d <= -time.Minute {
		d = d.Round(time.Second)
	}
	return d.String()
}

// printable keeps names and notes from breaking the table (or the
// terminal): control characters are escaped.
func printable(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return r < ' ' || r == 0x7f }) < 0 {
		return s
	}
	q := fmt.Sprintf("%q", s)
	return q[1 : len(q)-1]
}
