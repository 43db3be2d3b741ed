package stmtcache_test

import (
	"testing"

	"github.com/sqllock/sqllock/internal/stmtcache"
	"github.com/sqllock/sqllock/internal/testdb"
)

// TestClosesWhenUnused: Close does not close a statement a call is
// using (that call would fail with "statement is closed"); the last call
// to finish closes it, and calls after Close run unprepared.
func TestClosesWhenUnused(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := t.Context()
			p := stmtcache.New(tg.DB)
			const query = `SELECT 1`
			if p.Prepared(query) {
				t.Fatal("Prepared before anything was prepared")
			}
			stmt, done := p.Stmt(ctx, query)
			if stmt == nil {
				t.Fatal("no statement prepared")
			}
			if !p.Prepared(query) || p.Prepared(query, `SELECT 2`) {
				t.Fatal("Prepared does not tell prepared from unprepared queries")
			}
			p.Close()
			if p.Prepared(query) {
				t.Fatal("Prepared after Close")
			}
			if _, err := stmt.ExecContext(ctx); err != nil {
				t.Fatalf("statement in use when Close came: %v", err)
			}
			done()
			if _, err := stmt.ExecContext(ctx); err == nil {
				t.Fatal("the statement is still open after its last use ended")
			}
			if after, _ := p.Stmt(ctx, query); after != nil {
				t.Fatal("a statement was prepared after Close")
			}
			var one int
			if err := p.QueryRowContext(ctx, query).Scan(&one); err != nil || one != 1 {
				t.Fatalf("unprepared query after Close = %d, %v", one, err)
			}
		})
	}
}
