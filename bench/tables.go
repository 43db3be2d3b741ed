package main

import "fmt"

// tables are the report, one per section, filled dialect by dialect.
type tables struct {
	uncontended, handoff, throughput, memory, held, idle, crash, pooler, kinds *table
	// uncontendedChart and handoffChart are the p50s again, for -svg.
	uncontendedChart, handoffChart *panel
}

func (t *tables) list() []*table {
	return []*table{t.uncontended, t.handoff, t.throughput, t.memory, t.held, t.idle, t.crash, t.pooler, t.kinds}
}

func newTables(cfg config) *tables {
	t := &tables{
		uncontended: &table{
			title:  "Uncontended acquire + release",
			header: []string{"db", "variant", "p50", "p99", "mean", "p50 vs raw SQL", "p50 vs advisory"},
			left:   2,
		},
		handoff: &table{
			title:  "Contended handoff: release → blocked waiter returns",
			header: []string{"db", "variant", "waiter", "handoffs", "p50", "p99", "max", "p50 vs raw SQL", "p50 vs advisory"},
			left:   3,
		},
		throughput: &table{
			title: fmt.Sprintf("Throughput: %d goroutines × %d names each, acquire + release in a loop",
				cfg.goroutines, cfg.namesEach),
			header: []string{"db", "variant", "ops/s", "p50", "p99", "ops/s vs raw SQL", "ops/s vs advisory"},
			left:   2,
		},
		memory: &table{
			title:  "Memory in the Go process",
			header: []string{"db", "what", "n", "heap each", "stacks each", "total each", "goroutines each"},
			left:   2,
		},
		held: &table{
			title:  "Acquire latency with many names held",
			header: []string{"db", "names held", "rows in table", "fresh name p50", "p99", "used name p50", "p99", "naive p50", "p99", "fresh p50 vs naive"},
			left:   1,
		},
		idle: &table{
			title:  "Idle fair waiters: statements sent",
			header: []string{"db", "fair waiters", "statements/s sent"},
			left:   1,
		},
		crash: &table{
			title:  "Crashed holder: SIGKILL → blocked waiter returns",
			header: []string{"db", "holder killed", "rounds", "p50", "max"},
			left:   2,
		},
		pooler: &table{
			title:  "Cross-process handoff through a transaction pooler (PostgreSQL)",
			header: []string{"db", "waiter's connections", "handoffs", "p50", "p99", "p50 vs direct"},
			left:   2,
		},
		kinds:            kindsTable(cfg),
		uncontendedChart: &panel{title: "Uncontended acquire + release, p50 (log scale)"},
		handoffChart:     &panel{title: "Handoff: release → blocked waiter returns, p50 (log scale)"},
	}
	t.uncontended.note("%d operations per variant, in two groups each interleaved one by one in a rotating order: rowlock with the naive recipe and the advisory lock, then forupdate with raw `FOR UPDATE` and the advisory lock; each ratio is against the baseline measured beside it. The latency of one acquire plus one release, as the caller sees it, with a cancelable context.", cfg.n)
	t.uncontended.note("rowlock: `TryAcquire`+`Release` of one name (its row exists: the normal case); built on the naive recipe: `INSERT` a row into `dblock_locks`, `DELETE` it, through the pool, as `db.ExecContext` sends them. On MySQL rowlock prepares its statements once per connection (go-sql-driver otherwise prepares, runs and closes each statement with arguments: two round trips); the naive pair prepared the same way is shown too.")
	t.uncontended.note("forupdate: `Acquire`+`Release` (takes a pool connection, `BEGIN`, locks the row, draws a token, `COMMIT`; MySQL also sets `wait_timeout` first, and restores it after `Release` has returned, before the connection goes back to the pool; MariaDB draws the token with `NEXTVAL` in the locking `SELECT`); built on raw `BEGIN; SELECT 1 FROM dblock_forupdate WHERE name = ? FOR UPDATE; COMMIT` through the pool, as database/sql sends it (on MySQL: prepare, execute, close) and, on MySQL, with the `SELECT` prepared once (forupdate prepares its statements too).")
	t.uncontended.note("advisory: PostgreSQL `SELECT pg_try_advisory_lock($1)` + `SELECT pg_advisory_unlock($1)`; MySQL `SELECT GET_LOCK(?, 0)` + `SELECT RELEASE_LOCK(?)`; on one pinned connection (no pool), each statement prepared once on it (one round trip, as rowlock's). No lease, no token, lost with the session.")
	t.handoff.note("%d handoffs per variant, the variants taking turns round by round. Each round: a holder takes the lock, a waiter starts a blocking acquire, %v to %v later (uniformly at random, so that releases fall at any point of a polling waiter's schedule) the holder releases; the time from the start of the release to the waiter's acquire returning.", cfg.handoffs, cfg.pause, 2*cfg.pause)
	t.handoff.note("rowlock, same process: the waiter is another owner on the holder's Locker, woken directly by the release (no database round trip); a second Locker in this process is woken as one in another process is. Other process: a child process, woken by `LISTEN/NOTIFY` on PostgreSQL, and on MySQL by the holder's doorbell (its Locker blocks a connection in `GET_LOCK` on a bell of the holder's session, which the session lets go of when the release asks it to ring: docs/design.md, Waking waiters).")
	t.handoff.note("naive `INSERT`/`DELETE` (raw), the recipe rowlock is built on and the baseline of its rows: the holder `INSERT`s the name's row and `DELETE`s it; the waiter retries `INSERT ... ON CONFLICT DO NOTHING` whenever `NOTIFY` (sent by the holder's `DELETE`) reaches its own `LISTEN`ing connection on PostgreSQL, every %v on MySQL (`INSERT IGNORE`). No lease, owner, token or queue.", naivePoll)
	t.handoff.note("forupdate and raw `FOR UPDATE`: the waiter blocks in the database on the row lock; the holder's `COMMIT` wakes it. Advisory: `pg_advisory_lock($1)` / `GET_LOCK(?, 60)` blocking on a second pinned connection, woken by `pg_advisory_unlock` / `RELEASE_LOCK`, each statement prepared once on its connection.")
	t.handoff.note("floor: one prepared autocommit `INSERT` of a row, after the same idle pause as a handoff's: a commit that waits for the log flush (WAL; InnoDB's redo log, whose flush at every commit, `innodb_flush_log_at_trx_commit`, is a global setting on MySQL and MariaDB that no session can turn off). Every handoff of a lock whose token the database keeps pays at least one. Give the row, wake, commit (raw): the fastest such handoff that SQL allows, two pinned connections; the holder, in one transaction, gives the row to the waiter (token + 1), lets go of an advisory lock / `GET_LOCK` the waiter blocks on, and commits; the waiter, woken, reads the row with a shared lock, which waits for that commit. One durable commit, the wake-up overlapped with its flush.")
	t.throughput.note("Each variant runs %d slices of %v, the variants taking turns slice by slice; ops/s is operations over the slices' total time, p50/p99 the latency of one acquire+release. Names are distinct per goroutine: no contention between goroutines, only for the server. Raw SQL: rowlock beside the naive `INSERT`+`DELETE`, forupdate beside raw `BEGIN; SELECT … FOR UPDATE; COMMIT`.", cfg.slices, cfg.slice)
	t.memory.note("`runtime.ReadMemStats` before and after, each after forced collections (`runtime.GC`, `debug.FreeOSMemory`); the difference in HeapAlloc, StackInuse and goroutines divided by n. The pool is opened to its full size first so that new connections do not count.")
	t.memory.note("Stacks are counted in 32 KiB spans that new goroutines share, so below %d items they cannot be told apart (—): each forupdate lock also has one goroutine (database/sql's watcher of the lock's transaction), at least 2 KiB of stack, and keeps one pool connection (the driver's buffers, not counted here, and a server session).", minStackN)
	t.memory.note("A held rowlock lock is its handle and a timer: its renewal goroutine starts when the first renewal is due (TTL/3, 10 s by default), and from then on adds one goroutine (about 2 KiB of stack, more while it runs a statement).")
	t.memory.note("Waiters block in `Acquire` on one held name; unfair waiters sleep in the process, fair ones also hold a row in `dblock_waiters` (its heartbeat is one goroutine per Locker).")
	t.held.note("Names held: rows inserted in rowlock's shape, held by a live-looking owner with a 15-minute lease, then deleted by name. Rows in table: all of `dblock_locks`, other users' included.")
	t.held.note("%d operations per variant and level, interleaved: `TryAcquire`+`Release` of a fresh name (no row yet: rowlock inserts it), of a name used before, and the naive `INSERT`+`DELETE` of a fresh name.", cfg.heldOps)
	t.idle.note("All waiters queue, in one Locker, behind one holder (TTL 60 s); the statements per second the process sent over %v, the holder's renewals and the queue's heartbeats included, counted in the client (pgx's query tracer; MySQL's `COM_QUERY`/`COM_STMT_EXECUTE` packets) so that other programs' load on the servers does not count. The Locker's session connection is included: on both databases, a heartbeat of its session marker every third of the crash grace (3 a second by default) while it holds a lock.", cfg.idleWindow)
	t.crash.note("%d rounds per kind: a child process takes the lock and the parent blocks in Acquire (200 ms, not counted, so that it waits for good); then the child is SIGKILLed, and the time from the kill to the waiter's Acquire returning is measured. forupdate and the advisory lock are freed by the server when the dead process's connection closes. rowlock, whose lock is a row with a lease (30 s by default), is freed by crash detection: the waiter's Locker, blocked in the database on the holder's session marker, sees it go with the session, cuts the lease to G (the crash grace, 1 s by default) and takes the lock when that has lapsed. Without a session marker (`rowlock.WithCrashGrace(0)`, or no session connection) it would wait out the lease.", cfg.crashes)
	t.pooler.note("%s", poolerNote(cfg))
	return t
}
