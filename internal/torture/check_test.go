package torture_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sqllock/sqllock/dblock"
)

// start and end build ledger records for the checker's self-test.
func start(pid int, hold int64, name string, token, at int64) record {
	return record{Kind: "start", Pid: pid, Hold: hold, Name: name, Token: token, At: at}
}

func end(pid int, hold int64, name string, token, at int64) record {
	return record{Kind: "end", Pid: pid, Hold: hold, Name: name, Token: token, At: at}
}

// permit is a semaphore permit's hold of slot, [from, to], by pid.
func permit(pid int, name string, slot int, token, from, to int64) []record {
	s, e := start(pid, 1, name, token, from), end(pid, 1, name, token, to)
	s.Slot, e.Slot = slot, slot
	return []record{s, e}
}

// rwHold is a read/write lock's hold, [from, to], by pid: a write hold
// when write is set.
func rwHold(pid int, name string, write bool, token, from, to int64) []record {
	s, e := start(pid, 1, name, token, from), end(pid, 1, name, token, to)
	s.Write, e.Write = write, write
	return []record{s, e}
}

// multiHold is a multi-lock's hold of names with tokens, [from, to], by
// pid: Name and Token as MultiLock has them.
func multiHold(pid int, names []string, tokens []int64, from, to int64) []record {
	name, token := strings.Join(names, ","), slices.Max(tokens)
	s := start(pid, 1, name, token, from)
	s.Names, s.Tokens = names, tokens
	return []record{s, end(pid, 1, name, token, to)}
}

func concat(parts ...[]record) []record { return slices.Concat(parts...) }

// The checker must catch what it is there to catch, and pass what is
// consistent.
func TestCheckFindsViolations(t *testing.T) {
	for _, tc := range []struct {
		name     string
		recs     []record
		killedAt map[int]int64
		want     []string // one substring per expected error, from intervals then check
	}{
		{
			name: "clean",
			recs: []record{
				start(1, 1, "a", 1, 10), end(1, 1, "a", 1, 20),
				start(2, 1, "a", 2, 21), end(2, 1, "a", 2, 30),
				start(1, 2, "b", 1, 15), end(1, 2, "b", 1, 25),
			},
		},
		{
			name: "overlap",
			recs: []record{start(1, 1, "a", 1, 10), end(1, 1, "a", 1, 20), start(2, 1, "a", 2, 20), end(2, 1, "a", 2, 30)},
			want: []string{"holds overlap"},
		},
		{
			// A long hold overlaps one that does not follow it directly.
			name: "overlap past the next hold",
			recs: []record{
				start(1, 1, "a", 1, 10), end(1, 1, "a", 1, 100),
				start(2, 1, "a", 2, 20), end(2, 1, "a", 2, 30),
				start(3, 1, "a", 3, 40), end(3, 1, "a", 3, 50),
			},
			want: []string{"holds overlap: token 1", "holds overlap: token 1"},
		},
		{
			name: "backwards token",
			recs: []record{start(1, 1, "a", 5, 10), end(1, 1, "a", 5, 20), start(2, 1, "a", 4, 21), end(2, 1, "a", 4, 30)},
			want: []string{"did not grow"},
		},
		{
			name: "repeated token",
			recs: []record{start(1, 1, "a", 5, 10), end(1, 1, "a", 5, 20), start(2, 1, "a", 5, 21), end(2, 1, "a", 5, 30)},
			want: []string{"did not grow"},
		},
		{
			// The holder was killed mid-hold: it believed until its kill
			// time, which is after its successor began.
			name: "killed holder overlaps its successor",
			recs: []record{
				start(1, 1, "a", 1, 10),
				start(2, 1, "a", 2, 40), end(2, 1, "a", 2, 60),
			},
			killedAt: map[int]int64{1: 50},
			want:     []string{"no end record: held until its SIGKILL"},
		},
		{
			name: "killed holder before its successor",
			recs: []record{
				start(1, 1, "a", 1, 10),
				start(2, 1, "a", 2, 51), end(2, 1, "a", 2, 60),
			},
			killedAt: map[int]int64{1: 50},
		},
		{
			// Its start was written after the kill time was read: it
			// believed at least at its start.
			name: "killed holder started after the kill time was read",
			recs: []record{
				start(1, 1, "a", 1, 55),
				start(2, 1, "a", 2, 55), end(2, 1, "a", 2, 60),
			},
			killedAt: map[int]int64{1: 50},
			want:     []string{"holds overlap"},
		},
		{
			name: "start without end from a worker that was not killed",
			recs: []record{start(1, 1, "a", 1, 10)},
			want: []string{"never ended, and the worker was not killed"},
		},
		{
			name:     "end without start",
			recs:     []record{end(1, 1, "a", 1, 10)},
			killedAt: map[int]int64{1: 50},
			want:     []string{"an end without a start"},
		},
		{
			name: "end before start",
			recs: []record{start(1, 1, "a", 1, 10), end(1, 1, "a", 1, 9)},
			want: []string{"before it starts"},
		},
		{
			name: "start and end disagree",
			recs: []record{start(1, 1, "a", 1, 10), end(1, 1, "a", 2, 20)},
			want: []string{"ended as a token 2"},
		},
		// Semaphores (kind semaphore, semLimit permits).
		{
			name: "semaphore: as many holders as permits",
			recs: concat(
				permit(1, "semaphore/a", 0, 1, 10, 50), permit(2, "semaphore/a", 1, 1, 11, 50),
				permit(3, "semaphore/a", 2, 1, 12, 50), permit(4, "semaphore/a", 0, 2, 51, 60),
			),
		},
		{
			name: "semaphore: one holder more than permits",
			recs: concat(
				permit(1, "semaphore/a", 0, 1, 10, 50), permit(2, "semaphore/a", 1, 1, 11, 50),
				permit(3, "semaphore/a", 2, 1, 12, 50), permit(4, "semaphore/a", 0, 2, 50, 60),
			),
			want: []string{"semaphore/a slot 0: holds overlap", "4 holders at 50, more than the limit 3"},
		},
		{
			// Every slot a mutex of its own, and yet too many at once: a
			// holder that believed in a slot beyond the limit.
			name: "semaphore: a slot beyond the limit",
			recs: concat(
				permit(1, "semaphore/a", 0, 1, 10, 50), permit(2, "semaphore/a", 1, 1, 11, 50),
				permit(3, "semaphore/a", 2, 1, 12, 50), permit(4, "semaphore/a", 3, 1, 13, 60),
			),
			want: []string{"in slot 3, beyond the limit 3", "4 holders at 13"},
		},
		{
			name: "semaphore: two holders of one slot",
			recs: concat(permit(1, "semaphore/a", 1, 1, 10, 50), permit(2, "semaphore/a", 1, 2, 40, 60)),
			want: []string{"semaphore/a slot 1: holds overlap"},
		},
		{
			name: "semaphore: a slot's token went back",
			recs: concat(permit(1, "semaphore/a", 1, 5, 10, 20), permit(2, "semaphore/a", 1, 4, 30, 40)),
			want: []string{"semaphore/a slot 1: token 4 (pid 2, from 30) after token 5"},
		},
		{
			// A rowlock permit's token is its slot's: two slots may share one.
			name: "semaphore: two slots with one token",
			recs: concat(permit(1, "semaphore/a", 0, 1, 10, 50), permit(2, "semaphore/a", 1, 1, 11, 50)),
		},
		// forupdate's semaphores (kind forupdate-semaphore): as semaphores,
		// and a token is never handed out twice, in any slot.
		{
			name: "forupdate semaphore: as many holders as permits, tokens distinct",
			recs: concat(
				permit(1, "forupdate-semaphore/a", 0, 1, 10, 50), permit(2, "forupdate-semaphore/a", 1, 2, 11, 50),
				permit(3, "forupdate-semaphore/a", 2, 3, 12, 50), permit(4, "forupdate-semaphore/a", 1, 4, 51, 60),
			),
		},
		{
			name: "forupdate semaphore: one holder more than permits",
			recs: concat(
				permit(1, "forupdate-semaphore/a", 0, 1, 10, 50), permit(2, "forupdate-semaphore/a", 1, 2, 11, 50),
				permit(3, "forupdate-semaphore/a", 2, 3, 12, 50), permit(4, "forupdate-semaphore/a", 3, 4, 13, 60),
			),
			want: []string{"in slot 3, beyond the limit 3", "4 holders at 13"},
		},
		{
			name: "forupdate semaphore: two slots with one token at once",
			recs: concat(permit(1, "forupdate-semaphore/a", 0, 7, 10, 50), permit(2, "forupdate-semaphore/a", 1, 7, 11, 50)),
			want: []string{"forupdate-semaphore/a: token 7 twice: slot 0 (pid 1, from 10) and slot 1 (pid 2, from 11)"},
		},
		{
			// One after the other, in different slots: the later permit's
			// token was drawn after the earlier was released.
			name: "forupdate semaphore: a token handed out again in another slot",
			recs: concat(permit(1, "forupdate-semaphore/a", 0, 7, 10, 20), permit(2, "forupdate-semaphore/a", 2, 7, 30, 40)),
			want: []string{"token 7 twice"},
		},
		{
			name: "forupdate semaphore: a slot's token went back",
			recs: concat(permit(1, "forupdate-semaphore/a", 1, 5, 10, 20), permit(2, "forupdate-semaphore/a", 1, 4, 30, 40)),
			want: []string{"forupdate-semaphore/a slot 1: token 4 (pid 2, from 30) after token 5"},
		},
		// Read/write locks (kind rw).
		{
			name: "rw: readers together, writers alone",
			recs: concat(
				rwHold(1, "rw/a", false, 0, 10, 50), rwHold(2, "rw/a", false, 0, 20, 40),
				rwHold(3, "rw/a", true, 1, 51, 60),
				rwHold(4, "rw/a", false, 1, 61, 70), rwHold(5, "rw/a", false, 1, 62, 80),
			),
		},
		{
			name: "rw: a writer among readers",
			recs: concat(rwHold(1, "rw/a", false, 0, 10, 50), rwHold(2, "rw/a", true, 1, 30, 40)),
			want: []string{"a writer with another holder: reader token 0 (pid 1) believed [10, 50], writer token 1"},
		},
		{
			name: "rw: a reader under a writer",
			recs: concat(rwHold(1, "rw/a", true, 1, 10, 50), rwHold(2, "rw/a", false, 1, 30, 40)),
			want: []string{"a writer with another holder: writer token 1 (pid 1) believed [10, 50], reader token 1"},
		},
		{
			name: "rw: two writers",
			recs: concat(rwHold(1, "rw/a", true, 1, 10, 50), rwHold(2, "rw/a", true, 2, 50, 60)),
			want: []string{"a writer with another holder: writer token 1"},
		},
		{
			name: "rw: a writer's token not above an earlier reader's",
			recs: concat(rwHold(1, "rw/a", false, 7, 10, 20), rwHold(2, "rw/a", true, 7, 30, 40)),
			want: []string{"writer token 7 (pid 2, from 30) not above 7"},
		},
		{
			name: "rw: a reader's token below an earlier writer's",
			recs: concat(rwHold(1, "rw/a", true, 7, 10, 20), rwHold(2, "rw/a", false, 6, 30, 40)),
			want: []string{"reader token 6 (pid 2, from 30) below 7"},
		},
		// forupdate's read/write locks (kind forupdate-rw): as rowlock's.
		{
			// PostgreSQL and MariaDB: readers draw tokens of their own.
			name: "forupdate rw: readers with tokens of their own",
			recs: concat(
				rwHold(1, "forupdate-rw/a", true, 4, 10, 20),
				rwHold(2, "forupdate-rw/a", false, 5, 21, 50), rwHold(3, "forupdate-rw/a", false, 6, 22, 40),
				rwHold(4, "forupdate-rw/a", true, 7, 51, 60),
			),
		},
		{
			// MySQL 8.0: readers share the last writer's token (0 before
			// the first).
			name: "forupdate rw: readers with the last writer's token",
			recs: concat(
				rwHold(1, "forupdate-rw/a", false, 0, 5, 8),
				rwHold(2, "forupdate-rw/a", true, 4, 10, 20),
				rwHold(3, "forupdate-rw/a", false, 4, 21, 50), rwHold(4, "forupdate-rw/a", false, 4, 22, 40),
				rwHold(5, "forupdate-rw/a", true, 7, 51, 60),
			),
		},
		{
			name: "forupdate rw: a writer among readers",
			recs: concat(rwHold(1, "forupdate-rw/a", false, 5, 10, 50), rwHold(2, "forupdate-rw/a", true, 6, 30, 40)),
			want: []string{"forupdate-rw/a: a writer with another holder: reader token 5 (pid 1) believed [10, 50], writer token 6"},
		},
		{
			name: "forupdate rw: a writer's token not above an earlier reader's",
			recs: concat(rwHold(1, "forupdate-rw/a", false, 8, 10, 20), rwHold(2, "forupdate-rw/a", true, 7, 30, 40)),
			want: []string{"writer token 7 (pid 2, from 30) not above 8"},
		},
		{
			name: "forupdate rw: a reader's token below an earlier writer's",
			recs: concat(rwHold(1, "forupdate-rw/a", true, 7, 10, 20), rwHold(2, "forupdate-rw/a", false, 6, 30, 40)),
			want: []string{"reader token 6 (pid 2, from 30) below 7"},
		},
		// Multi-locks (kind multi), among themselves and with plain locks
		// of their names.
		{
			name: "multi: disjoint sets at once, then a set over both",
			recs: concat(
				multiHold(1, []string{"multi/a", "multi/b"}, []int64{1, 1}, 10, 50),
				multiHold(2, []string{"multi/c"}, []int64{1}, 10, 50),
				multiHold(3, []string{"multi/a", "multi/c"}, []int64{2, 2}, 51, 60),
				[]record{start(4, 1, "multi/b", 2, 51), end(4, 1, "multi/b", 2, 60)},
			),
		},
		{
			name: "multi: two sets that share a name at once",
			recs: concat(
				multiHold(1, []string{"multi/a", "multi/b"}, []int64{1, 1}, 10, 50),
				multiHold(2, []string{"multi/b", "multi/c"}, []int64{2, 1}, 40, 60),
			),
			want: []string{"multi/b: holds overlap"},
		},
		{
			name: "multi: a set and a plain lock of one of its names at once",
			recs: concat(
				multiHold(1, []string{"multi/a", "multi/b"}, []int64{1, 1}, 10, 50),
				[]record{start(2, 1, "multi/a", 2, 30), end(2, 1, "multi/a", 2, 60)},
			),
			want: []string{"multi/a: holds overlap"},
		},
		{
			name: "multi: one name's token went back",
			recs: concat(
				multiHold(1, []string{"multi/a", "multi/b"}, []int64{5, 1}, 10, 20),
				multiHold(2, []string{"multi/a", "multi/b"}, []int64{4, 2}, 30, 40),
			),
			want: []string{"multi/a: token 4 (pid 2, from 30) after token 5"},
		},
		{
			name: "duplicate record",
			recs: []record{start(1, 1, "a", 1, 10), end(1, 1, "a", 1, 20), end(1, 1, "a", 1, 20)},
			want: []string{"two end records"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ivs, errs := intervals(tc.recs, tc.killedAt)
			errs = append(errs, check(ivs)...)
			if len(errs) != len(tc.want) {
				t.Fatalf("got %d errors %v, want %d matching %q", len(errs), errs, len(tc.want), tc.want)
			}
			for i, err := range errs {
				if !strings.Contains(err.Error(), tc.want[i]) {
					t.Errorf("error %d: %v, want it to contain %q", i, err, tc.want[i])
				}
			}
		})
	}
}

func TestParseLedger(t *testing.T) {
	const (
		rec1 = `{"kind":"start","hold":1,"pid":7,"name":"a","token":3,"at":100}`
		rec2 = `{"kind":"end","hold":1,"pid":7,"name":"a","token":3,"at":200}`
		torn = `{"kind":"start","hold":2,"pid":7,"na`
	)
	for _, tc := range []struct {
		name    string
		data    string
		killed  bool
		records int
		err     string
	}{
		{name: "empty", data: "", records: 0},
		{name: "complete", data: rec1 + "\n" + rec2 + "\n", records: 2},
		{name: "killed, torn last line", data: rec1 + "\n" + rec2 + "\n" + torn, killed: true, records: 2},
		{name: "killed before the newline", data: rec1 + "\n" + rec2, killed: true, records: 2},
		{name: "not killed, torn last line", data: rec1 + "\n" + torn, err: "was not killed"},
		{name: "killed, torn line in the middle", data: rec1 + "\n" + torn + "\n" + rec2 + "\n", killed: true, err: "line 2"},
		{name: "killed, empty line in the middle", data: rec1 + "\n\n" + rec2 + "\n", killed: true, err: "line 2"},
		{name: "unknown field", data: `{"kind":"start","hold":1,"pid":7,"name":"a","token":3,"at":100,"x":1}` + "\n", err: "unknown field"},
		{name: "unknown kind", data: `{"kind":"middle","hold":1,"pid":7,"name":"a","token":3,"at":100}` + "\n", err: "not a well-formed record"},
		{name: "multi-lock names without their tokens", data: `{"kind":"start","hold":1,"pid":7,"name":"a,b","token":3,"at":100,"names":["a","b"],"tokens":[3]}` + "\n", err: "not a well-formed record"},
		{name: "two records on a line", data: rec1 + rec2 + "\n", err: "more than one record"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs, err := parseLedger([]byte(tc.data), tc.killed)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			case tc.err == "" && len(recs) != tc.records:
				t.Fatalf("%d records, want %d: %+v", len(recs), tc.records, recs)
			}
		})
	}
}

// A worker that failed, recorded nothing or was not skewed as asked must
// fail the run.
func TestVerifyWorker(t *testing.T) {
	const up = "worker up pid=42 offset=1h0m0s skew=1h0m1s"
	for _, tc := range []struct {
		name    string
		lines   []string
		waitErr error
		holds   int
		want    []string
	}{
		{name: "clean", lines: []string{"=== RUN   TestTortureWorker", up, "worker stats holds=5 lost=1 acquire_errors=0", "worker done 5", "--- PASS: TestTortureWorker (9.00s)"}, holds: 5},
		{name: "failed", lines: []string{up, "worker done 5"}, waitErr: errors.New("exit status 1"), holds: 5, want: []string{"exited with exit status 1"}},
		{name: "nothing recorded", lines: []string{up, "worker done 0"}, want: []string{"want worker done N with N > 0"}},
		{name: "no done line", lines: []string{up}, want: []string{`never printed "worker done N"`}},
		{name: "no up line", lines: []string{"worker done 3"}, holds: 3, want: []string{`never printed "worker up"`}},
		{name: "offset not applied", lines: []string{"worker up pid=42 offset=0s skew=0s", "worker done 3"}, holds: 3, want: []string{"want pid=42 offset=1h0m0s"}},
		{name: "offset without skew", lines: []string{"worker up pid=42 offset=1h0m0s skew=-2s", "worker done 3"}, holds: 3, want: []string{"skew within half an hour"}},
		{name: "another process", lines: []string{"worker up pid=43 offset=1h0m0s skew=1h0m0s", "worker done 3"}, holds: 3, want: []string{"want pid=42"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &process{pid: 42, slot: 0, offset: time.Hour, lines: tc.lines, waitErr: tc.waitErr}
			holds, errs := p.verify()
			if holds != tc.holds {
				t.Errorf("holds %d, want %d", holds, tc.holds)
			}
			if len(errs) != len(tc.want) {
				t.Fatalf("got %d errors %v, want %d matching %q", len(errs), errs, len(tc.want), tc.want)
			}
			for i, err := range errs {
				if !strings.Contains(err.Error(), tc.want[i]) {
					t.Errorf("error %d: %v, want it to contain %q", i, err, tc.want[i])
				}
			}
		})
	}
}

// A worker must fail on a server error no fault explains, and only on
// those: errors of restarts, cuts and killed sessions, of the network
// itself, and the read-only switch's refusals reported as ErrReadOnly, are
// the run's faults.
func TestServerSaysBug(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("forupdate: acquire %q: %w", "n", err) }
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"MySQL AUTO-INC lock under NOWAIT", wrap(&mysql.MySQLError{Number: 1467}), true},
		{"MySQL deadlock reaching the caller", wrap(&mysql.MySQLError{Number: 1213}), true},
		{"MySQL lock wait timeout reaching the caller", wrap(&mysql.MySQLError{Number: 1205}), true},
		{"MySQL server shutdown", wrap(&mysql.MySQLError{Number: 1053}), false},
		{"MariaDB connection killed", wrap(&mysql.MySQLError{Number: 1927}), false},
		{"MySQL 8.0 idle session ended", wrap(&mysql.MySQLError{Number: 4031}), false},
		{"PostgreSQL deadlock reaching the caller", wrap(&pgconn.PgError{Code: "40P01"}), true},
		{"PostgreSQL lock not available reaching the caller", wrap(&pgconn.PgError{Code: "55P03"}), true},
		{"PostgreSQL admin shutdown", wrap(&pgconn.PgError{Code: "57P01"}), false},
		{"PostgreSQL starting up", wrap(&pgconn.PgError{Code: "57P03"}), false},
		{"PostgreSQL connection failure", wrap(&pgconn.PgError{Code: "08006"}), false},
		// The acquisition's transaction ended by the server while idle
		// for the lock's TTL, with no stall of the process to explain it.
		{"PostgreSQL idle-in-transaction timeout", wrap(&pgconn.PgError{Code: "25P03"}), true},
		// The read-only switch: refusals the library reports as
		// ErrReadOnly, and only those.
		{"PostgreSQL read-only, as ErrReadOnly", wrap(fmt.Errorf("%w: %w", dblock.ErrReadOnly, &pgconn.PgError{Code: "25006"})), false},
		{"PostgreSQL read-only, unclassified", wrap(&pgconn.PgError{Code: "25006"}), true},
		{"MySQL read_only, as ErrReadOnly", wrap(fmt.Errorf("%w: %w", dblock.ErrReadOnly, &mysql.MySQLError{Number: 1290})), false},
		{"MySQL read_only, unclassified", wrap(&mysql.MySQLError{Number: 1290}), true},
		{"broken connection", wrap(mysql.ErrInvalidConn), false},
		{"refused connection", wrap(errors.New("dial tcp 127.0.0.1:1: connect: connection refused")), false},
	} {
		if got := serverSaysBug(tc.err, false); got != tc.want {
			t.Errorf("%s: serverSaysBug = %v, want %v", tc.name, got, tc.want)
		}
	}
	// A stall of the process mid-acquisition explains the idle timeout,
	// and nothing else.
	if serverSaysBug(wrap(&pgconn.PgError{Code: "25P03"}), true) {
		t.Error("idle-in-transaction timeout in a stall: serverSaysBug = true, want false")
	}
	if !serverSaysBug(wrap(&pgconn.PgError{Code: "40P01"}), true) {
		t.Error("deadlock in a stall: serverSaysBug = false, want true")
	}
}

func TestFailureLines(t *testing.T) {
	for _, c := range []struct {
		name  string
		lines []string
		want  string
	}{
		{"passed", []string{"=== RUN   TestTortureWorker", "worker done 3", "--- PASS: TestTortureWorker (1.00s)"}, ""},
		{"error", []string{"worker done 3", "    worker_test.go:64: worker leaked goroutines: found 1", "--- FAIL: TestTortureWorker (1.00s)"},
			"\n\tworker_test.go:64: worker leaked goroutines: found 1\n\t--- FAIL: TestTortureWorker (1.00s)"},
		{"panic", []string{"panic: boom", "goroutine 1 [running]:"}, "\n\tpanic: boom"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := failureLines(c.lines); got != c.want {
				t.Errorf("failureLines = %q, want %q", got, c.want)
			}
		})
	}
}
