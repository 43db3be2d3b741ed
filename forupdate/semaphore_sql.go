package forupdate

import (
	"strconv"
	"strings"

	"github.com/sqllock/sqllock/internal/lockkit"
)

// semaphoresTable records each semaphore's limit, created by migration 3
// (package rowlock's semaphores record theirs there too, under their
// plain names; this package's records are named by semKey).
const semaphoresTable = "dblock_semaphores"

// semSQL are the statements of the semaphores in one dialect. The slots'
// statements take the slots' names as arguments, one placeholder each:
// only placeholders are spliced into them.
type semSQL struct {
	// readShared returns the recorded limit of a key and keeps it locked
	// shared to the end of the transaction: every holder and waiter of a
	// permit does, so that the limit cannot change under them.
	readShared string
	// insert records a key's limit unless a limit is recorded.
	insert string
	// readLocked returns the recorded limit locked FOR UPDATE NOWAIT: it
	// fails at once while anyone holds or awaits a permit.
	readLocked string
	// read returns the recorded limit, locking nothing.
	read string
	// update sets the limit of a key (permits, key).
	update string
	// take locks one free slot of n, skipping those locked, and returns
	// its name and its token (0 where the dialect draws it after).
	// ttlArg: its first argument is the session's idle timeout.
	take   func(n int) string
	ttlArg bool
	// pauseArg: its last argument is the failover pause in µs
	// (pauseUS), and a negative token is the pause left (failover.go).
	pauseArg bool
	pauseUS  int64
	// existing returns the names of the slots, of n, that exist.
	existing func(n int) string
	// create inserts n slots unless they exist.
	create func(n int) string
}

// list joins n placeholders made by ph(i), i from first.
func list(n, first int, ph func(i int) string) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(ph(first + i))
	}
	return b.String()
}

func pgPlaceholder(i int) string { return "$" + strconv.Itoa(i) }
func myPlaceholder(int) string   { return "?" }

func pgSemSQL(table, counter string, pauseUS int64) *semSQL {
	return &semSQL{
		pauseUS:    pauseUS,
		readShared: `SELECT permits FROM ` + semaphoresTable + ` WHERE name = $1 FOR SHARE`,
		insert: `INSERT INTO ` + semaphoresTable + ` (name, permits, changed_at) VALUES ($1, $2, now())
ON CONFLICT (name) DO NOTHING`,
		readLocked: `SELECT permits FROM ` + semaphoresTable + ` WHERE name = $1 FOR UPDATE NOWAIT`,
		read:       `SELECT permits FROM ` + semaphoresTable + ` WHERE name = $1`,
		update:     `UPDATE ` + semaphoresTable + ` SET permits = $1, changed_at = now() WHERE name = $2`,
		// As the lock statement: nextval only for the row locked.
		// In the failover pause (failover.go) it draws no token and
		// returns minus the pause left, in µs; P is its last argument.
		take: func(n int) string {
			return `WITH slot AS (SELECT name FROM ` + table + ` WHERE name IN (` + list(n, 2, pgPlaceholder) + `)
LIMIT 1 FOR UPDATE SKIP LOCKED),
cfg AS (SELECT set_config('idle_in_transaction_session_timeout', $1, true)),
` + pgPauseLeftAt(pgPlaceholder(n+2)) + `
SELECT slot.name, CASE WHEN pause.left_us > 0 THEN -pause.left_us
                       ELSE ` + lockkit.PgTimelineBase + ` + nextval('` + counter + `') END
FROM slot, cfg, pause`
		},
		ttlArg:   true,
		pauseArg: true,
		existing: func(n int) string {
			return `SELECT name FROM ` + table + ` WHERE name IN (` + list(n, 1, pgPlaceholder) + `)`
		},
		create: func(n int) string {
			return `INSERT INTO ` + table + ` (name) VALUES ` + list(n, 1, func(i int) string { return "(" + pgPlaceholder(i) + ")" }) +
				` ON CONFLICT (name) DO NOTHING`
		},
	}
}

// buildSemSQL is MySQL's and MariaDB's: LOCK IN SHARE MODE, which both know.
// With a sequence (MariaDB) the SKIP LOCKED statement draws the token, for
// the row it locked only; with a counter table (MySQL 8.0) the token is
// drawn after, as for a lock.
func (m *mysql) buildSemSQL(sequence bool) *semSQL {
	token := `0`
	if sequence {
		token = `NEXTVAL(` + m.counter + `)`
	}
	return &semSQL{
		readShared: `SELECT permits FROM ` + semaphoresTable + ` WHERE name = ? LOCK IN SHARE MODE`,
		insert:     `INSERT IGNORE INTO ` + semaphoresTable + ` (name, permits, changed_at) VALUES (?, ?, UTC_TIMESTAMP(6))`,
		readLocked: `SELECT permits FROM ` + semaphoresTable + ` WHERE name = ? FOR UPDATE NOWAIT`,
		read:       `SELECT permits FROM ` + semaphoresTable + ` WHERE name = ?`,
		update:     `UPDATE ` + semaphoresTable + ` SET permits = ?, changed_at = UTC_TIMESTAMP(6) WHERE name = ?`,
		take: func(n int) string {
			return `SELECT name, ` + token + ` FROM ` + m.table + ` WHERE name IN (` + list(n, 1, myPlaceholder) + `)
LIMIT 1 FOR UPDATE SKIP LOCKED`
		},
		existing: func(n int) string {
			return `SELECT name FROM ` + m.table + ` WHERE name IN (` + list(n, 1, myPlaceholder) + `)`
		},
		// It waits only for a slot another process created and took since
		// this one found it missing.
		create: func(n int) string {
			return `INSERT IGNORE INTO ` + m.table + ` (name) VALUES ` + list(n, 1, func(int) string { return "(?)" })
		},
	}
}
