package testdb

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sqllock/sqllock/internal/pgxrow"
)

// execMode is one variant BenchExecModes compares.
type execMode struct {
	name string
	mode pgx.QueryExecMode // pgxrow.ForcedMode; 0 is sqllock's own choice
	// direct: the mode fails through a transaction pooler.
	direct bool
}

var execModes = []execMode{
	{name: "sqllock", mode: 0},
	{name: "cache_statement", mode: pgx.QueryExecModeCacheStatement, direct: true}, // pgx's default
	{name: "cache_describe", mode: pgx.QueryExecModeCacheDescribe},
	{name: "exec", mode: pgx.QueryExecModeExec},
	{name: "simple_protocol", mode: pgx.QueryExecModeSimpleProtocol},
}

// modesFor are the variants that work on tg: through PgBouncer, not pgx's
// default.
func modesFor(tg Target) []execMode {
	var out []execMode
	for _, m := range execModes {
		if !m.direct || tg.Name != "pgbouncer" {
			out = append(out, m)
		}
	}
	return out
}

// BenchExecModes runs op once per b.Loop iteration in each of pgx's exec
// modes that work on tg, and in the one sqllock picks ("sqllock"). The
// order rotates so that none always goes first. Each mode's time is
// reported as a "<mode>-ns/op" metric; the default ns/op is their sum and
// means nothing on its own. It sets pgxrow.ForcedMode around each op, so
// no other statement of sqllock may run meanwhile, and restores it. It
// warms op up first: each mode prepares or describes a statement on its
// first run on a connection.
func BenchExecModes(b *testing.B, tg Target, op func() error) {
	saved := pgxrow.ForcedMode
	defer func() { pgxrow.ForcedMode = saved }()
	modes := modesFor(tg)
	for range 20 {
		for _, m := range modes {
			pgxrow.ForcedMode = m.mode
			if err := op(); err != nil {
				b.Fatalf("%s: %v", m.name, err)
			}
		}
	}
	spent := make([]time.Duration, len(modes))
	for i := 0; b.Loop(); i++ {
		for j := range modes {
			k := (i + j) % len(modes)
			pgxrow.ForcedMode = modes[k].mode
			start := time.Now()
			if err := op(); err != nil {
				b.Fatalf("%s: %v", modes[k].name, err)
			}
			spent[k] += time.Since(start)
		}
	}
	for k, m := range modes {
		b.ReportMetric(float64(spent[k].Nanoseconds())/float64(b.N), m.name+"-ns/op")
	}
}
