// Command bench measures sqllock beside the raw SQL each lock is built on
// and beside the databases' own named locks (PostgreSQL advisory locks,
// MySQL GET_LOCK), on both databases, in one run, and prints the tables.
//
//	go run ./bench                      # about 4 minutes
//	go run ./bench -quick               # about 1 minute, fewer samples
//	go run ./bench -markdown            # the same tables in Markdown
//	go run ./bench -page docs/benchmarks.md  # writes that page whole: how it was made, the tables
//	go run ./bench -svg latency.svg     # also a chart of the p50 latencies
//	go run ./bench -clean sqb-xxxxxxx-  # delete the rows of an interrupted run
//
// Sections, per dialect:
//
//   - uncontended acquire+release: rowlock, the naive INSERT+DELETE on its
//     table, forupdate, the raw BEGIN; SELECT ... FOR UPDATE; COMMIT it wraps,
//     and advisory locks on one pinned connection, interleaved operation by
//     operation so that the machine's noise hits all alike;
//   - handoff: from a holder's release to a blocked waiter returning with
//     the lock, for the same variants that can block, interleaved round by
//     round;
//   - throughput: G goroutines, each cycling over names of its own, for a
//     fixed time per variant, in alternating slices;
//   - memory per held lock and per blocked waiter (Go heap and stacks);
//   - acquire latency with 1k to 100k names held in the lock table;
//   - idle fair waiters: statements per second the process sends for them;
//   - the lock kinds (semaphores, read/write locks, AcquireAll), uncontended,
//     each beside the raw SQL it is built on.
//
// DSNs come from SQLLOCK_POSTGRES_DSN and SQLLOCK_MYSQL_DSN, defaulting to
// the local servers; the tables are created with migrations.Up. Every row
// the run creates is deleted at the end, by exact name; lock rows the way
// rowlock's Sweep deletes them, raising their stripes' token counters first.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/sqllock/sqllock/dblock"
)

type target struct {
	name, driver, env, dsn string
	dialect                dblock.Dialect
}

var targets = []target{
	{"postgres", "pgx", "SQLLOCK_POSTGRES_DSN", "postgres://root@127.0.0.1:5432/test", dblock.Postgres},
	{"mysql", "mysql", "SQLLOCK_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/test", dblock.MySQL},
}

type config struct {
	n          int
	handoffs   int
	pause      time.Duration
	goroutines int
	namesEach  int
	slice      time.Duration
	slices     int
	memN       int
	fuMemN     int
	held       []int
	heldOps    int
	idleWindow time.Duration
	idleCounts []int
	crashes    int
	// pgbouncerDSN is the pooler section's PgBouncer.
	pgbouncerDSN string
	markdown     bool
	page         string
	svg          string
	dialects     []string
	sections     []string
	quick        bool
	clean        string
	cpuProfile   string
	commandLine  string
}

// sectionNames in the order they run and print.
var sectionNames = []string{"uncontended", "handoff", "throughput", "memory", "held", "idle", "crash", "pooler", "kinds"}

func main() {
	if len(os.Args) > 4 && os.Args[1] == crashFlag {
		if err := runCrashHolder(os.Args[2], os.Args[3], os.Args[4]); err != nil {
			fmt.Fprintln(os.Stderr, "bench crash holder:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 2 && os.Args[1] == childFlag {
		if err := runChild(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "bench child:", err)
			os.Exit(1)
		}
		return
	}
	cfg, err := parseFlags()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, cfg)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// parseFlags reads and checks the flags. Its complexity (over 15) is one
// check per flag.
func parseFlags() (config, error) {
	var cfg config
	var held, idleCounts, dialectList, sectionList string
	flag.IntVar(&cfg.n, "n", 2000, "uncontended operations per variant")
	flag.IntVar(&cfg.handoffs, "handoffs", 200, "handoffs timed per variant")
	flag.DurationVar(&cfg.pause, "pause", 20*time.Millisecond, "how long a waiter waits before each timed handoff")
	flag.IntVar(&cfg.goroutines, "goroutines", 16, "throughput: goroutines per variant")
	flag.IntVar(&cfg.namesEach, "names", 64, "throughput: distinct names per goroutine")
	flag.DurationVar(&cfg.slice, "slice", time.Second, "throughput: length of one slice of one variant")
	flag.IntVar(&cfg.slices, "slices", 4, "throughput: slices per variant (alternating between variants)")
	flag.IntVar(&cfg.memN, "mem-n", 1000, "memory: locks held and waiters blocked")
	flag.IntVar(&cfg.fuMemN, "fu-mem-n", 20, "memory: forupdate locks held (one connection each)")
	flag.StringVar(&held, "held", "1000,10000,100000", "held names: levels of names held in the lock table")
	flag.IntVar(&cfg.heldOps, "held-ops", 300, "held names: operations timed per variant and level")
	flag.DurationVar(&cfg.idleWindow, "idle-window", 3*time.Second, "idle waiters: how long to count the server's statements")
	flag.StringVar(&idleCounts, "idle-waiters", "1,16,128", "idle waiters: numbers of fair waiters")
	flag.IntVar(&cfg.crashes, "crashes", 10, "crash: holders killed per kind of lock")
	flag.StringVar(&cfg.pgbouncerDSN, "pgbouncer-dsn", "", "pooler: a PgBouncer in transaction mode in front of the PostgreSQL measured (empty: the section is not measured)")
	flag.BoolVar(&cfg.markdown, "markdown", false, "print Markdown tables")
	flag.StringVar(&cfg.page, "page", "", "write a whole Markdown page (the command, the machine, the tables) to this file instead of printing")
	flag.StringVar(&cfg.svg, "svg", "", "also write an SVG chart of the latencies to this file")
	flag.StringVar(&dialectList, "dialects", "postgres,mysql", "databases to measure")
	flag.StringVar(&sectionList, "sections", strings.Join(sectionNames, ","), "sections to run")
	flag.BoolVar(&cfg.quick, "quick", false, "about a minute: fewer samples and levels (flags given explicitly win)")
	flag.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file")
	flag.StringVar(&cfg.clean, "clean", "", "measure nothing; delete the rows of an interrupted run whose names start with this prefix (sqb-…-)")
	flag.Parse()
	if flag.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	if cfg.quick {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		quick := map[string]string{
			"n": "400", "handoffs": "40", "slice": "500ms", "slices": "2",
			"held": "1000,10000", "held-ops": "100", "idle-window": "1s", "idle-waiters": "1,128",
			"crashes": "3",
		}
		for name, value := range quick {
			if !set[name] {
				if err := flag.Set(name, value); err != nil {
					return cfg, err
				}
			}
		}
		// flag.Set wrote the string flags' variables after they were read.
		held, idleCounts = flag.Lookup("held").Value.String(), flag.Lookup("idle-waiters").Value.String()
	}
	var err error
	if cfg.held, err = ints(held); err != nil {
		return cfg, fmt.Errorf("-held: %w", err)
	}
	slices.Sort(cfg.held)
	if cfg.idleCounts, err = ints(idleCounts); err != nil {
		return cfg, fmt.Errorf("-idle-waiters: %w", err)
	}
	cfg.dialects = strings.Split(dialectList, ",")
	cfg.sections = strings.Split(sectionList, ",")
	for _, s := range cfg.sections {
		if !slices.Contains(sectionNames, s) {
			return cfg, fmt.Errorf("-sections: unknown section %q (want some of %s)", s, strings.Join(sectionNames, ","))
		}
	}
	if cfg.clean != "" && !runPrefix.MatchString(cfg.clean) {
		return cfg, fmt.Errorf("-clean: %q is not a run's prefix (sqb-<letters and digits>-)", cfg.clean)
	}
	switch {
	case cfg.n < 1 || cfg.handoffs < 1 || cfg.goroutines < 1 || cfg.namesEach < 1 || cfg.slices < 1 || cfg.heldOps < 1:
		return cfg, errors.New("counts must be positive")
	case cfg.memN < 1 || cfg.fuMemN < 0:
		return cfg, errors.New("-mem-n must be positive")
	}
	if cfg.page != "" {
		cfg.markdown = true
	}
	cfg.commandLine = strings.Join(append([]string{"go run ./bench"}, os.Args[1:]...), " ")
	return cfg, nil
}

// runPrefix matches the prefix of a run's names.
var runPrefix = regexp.MustCompile(`^sqb-[0-9a-z]+-$`)

func ints(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// run runs the sections asked for on each database. Its complexity (over
// 15) is one branch per section and per database left out.
func run(ctx context.Context, cfg config) error {
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	facts := machineFacts()
	t := newTables(cfg)
	var missing []string
	for _, tg := range targets {
		if !slices.Contains(cfg.dialects, tg.name) {
			continue
		}
		logf("%s: connecting", tg.name)
		e, err := open(ctx, tg)
		if err != nil {
			return fmt.Errorf("%s: %w", tg.name, err)
		}
		if cfg.clean != "" {
			err := e.cleanPrefix(ctx, cfg.clean)
			_ = e.db.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", tg.name, err)
			}
			continue
		}
		logf("%s: this run's names start with %s", tg.name, e.prefix)
		facts = append(facts, [2]string{tg.name + " server", e.version})
		if e.fuErr != nil {
			missing = append(missing, fmt.Sprintf("forupdate on %s not measured: %v", tg.name, e.fuErr))
		}
		err = measure(ctx, cfg, e, t)
		cleanCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
		logf("%s: deleting the run's rows", tg.name)
		cerr := e.cleanup(cleanCtx)
		cancel()
		_ = e.db.Close()
		if err = errors.Join(err, cerr); err != nil {
			return fmt.Errorf("%s: %w", tg.name, err)
		}
	}
	if cfg.clean != "" {
		return nil
	}
	var out io.Writer = os.Stdout
	var page bytes.Buffer
	if cfg.page != "" {
		out = &page
		printPageHead(out, cfg)
	}
	printFacts(out, cfg, facts, missing)
	for _, tb := range t.list() {
		tb.print(out, cfg.markdown)
	}
	if cfg.page != "" {
		if err := os.WriteFile(cfg.page, page.Bytes(), 0o644); err != nil {
			return err
		}
		logf("wrote %s", cfg.page)
	}
	if cfg.svg != "" {
		if err := os.WriteFile(cfg.svg, chart(t), 0o644); err != nil {
			return err
		}
		logf("wrote %s", cfg.svg)
	}
	return nil
}

func measure(ctx context.Context, cfg config, e *env, t *tables) error {
	steps := map[string]func() error{
		"uncontended": func() error { return uncontended(ctx, cfg, e, t.uncontended, t.uncontendedChart) },
		"handoff":     func() error { return handoffs(ctx, cfg, e, t.handoff, t.handoffChart) },
		"throughput":  func() error { return throughput(ctx, cfg, e, t.throughput) },
		"memory":      func() error { return memory(ctx, cfg, e, t.memory) },
		"held":        func() error { return heldNames(ctx, cfg, e, t.held) },
		"idle":        func() error { return idle(ctx, cfg, e, t.idle) },
		"crash":       func() error { return crashes(ctx, cfg, e, t.crash) },
		"pooler":      func() error { return poolers(ctx, cfg, e, t.pooler) },
		"kinds":       func() error { return kinds(ctx, cfg, e, t.kinds) },
	}
	for _, s := range sectionNames {
		if !slices.Contains(cfg.sections, s) {
			continue
		}
		start := time.Now()
		logf("%s: %s", e.target.name, s)
		if err := steps[s](); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
		logf("%s: %s took %v", e.target.name, s, time.Since(start).Round(100*time.Millisecond))
	}
	return nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}
