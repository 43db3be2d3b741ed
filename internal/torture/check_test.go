package torture_test

import (
	"errors"
	"fmt"
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
		// The read-only switch: refusals the library reports as
		// ErrReadOnly, and only those.
		{"PostgreSQL read-only, as ErrReadOnly", wrap(fmt.Errorf("%w: %w", dblock.ErrReadOnly, &pgconn.PgError{Code: "25006"})), false},
		{"PostgreSQL read-only, unclassified", wrap(&pgconn.PgError{Code: "25006"}), true},
		{"MySQL read_only, as ErrReadOnly", wrap(fmt.Errorf("%w: %w", dblock.ErrReadOnly, &mysql.MySQLError{Number: 1290})), false},
		{"MySQL read_only, unclassified", wrap(&mysql.MySQLError{Number: 1290}), true},
		{"broken connection", wrap(mysql.ErrInvalidConn), false},
		{"refused connection", wrap(errors.New("dial tcp 127.0.0.1:1: connect: connection refused")), false},
	} {
		if got := serverSaysBug(tc.err); got != tc.want {
			t.Errorf("%s: serverSaysBug = %v, want %v", tc.name, got, tc.want)
		}
	}
}
