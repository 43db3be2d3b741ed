package rowlock_test

import (
	"testing"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/testdb"
)

// TestTokensCarryTheTimeline: on PostgreSQL a token, of a fresh name or of
// a takeover, lies in the server's current WAL timeline
// (lockkit.PgTimelineBase), so that a promoted standby's tokens stay above
// the old primary's (internal/failover tests the promotion itself).
func TestTokensCarryTheTimeline(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		if tg.Dialect != dblock.Postgres {
			continue
		}
		t.Run(tg.Name, func(t *testing.T) {
			var base int64
			if err := tg.DB.QueryRowContext(t.Context(), `SELECT `+lockkit.PgTimelineBase).Scan(&base); err != nil {
				t.Fatal(err)
			}
			if base < 1<<lockkit.TimelineShift {
				t.Fatalf("timeline base %d: the server's timeline is below 1", base)
			}
			l := newLocker(t, tg.DB)
			name := testdb.Name(t)
			var last int64
			for i := range 3 { // a fresh name, then takeovers
				k := mustTry(t, l, name)
				if k.Token() <= base || k.Token() >= base+1<<lockkit.TimelineShift || k.Token() <= last {
					t.Fatalf("token %d of acquisition %d: want in (%d, %d) and above %d", k.Token(), i, base, base+1<<lockkit.TimelineShift, last)
				}
				last = k.Token()
				release(t, k)
			}
			// A row written before tokens carried the timeline: its next
			// takeover jumps to the timeline's base, still growing.
			if _, err := tg.DB.ExecContext(t.Context(), `UPDATE dblock_locks SET token = 7, session_token = 7 WHERE name = $1`, name); err != nil {
				t.Fatal(err)
			}
			k := mustTry(t, l, name)
			defer release(t, k)
			if k.Token() <= base {
				t.Fatalf("takeover of a row of token 7: token %d, want above the timeline's base %d", k.Token(), base)
			}
		})
	}
}
