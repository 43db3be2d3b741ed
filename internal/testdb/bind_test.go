package testdb

import (
	"testing"

	"github.com/sqllock/sqllock/dblock"
)

func TestQ(t *testing.T) {
	const q = `SELECT token FROM dblock_locks WHERE name = $1 AND owner_id = $2 AND expires_at > $10`
	cases := []struct {
		d    dblock.Dialect
		want string
	}{
		{dblock.Postgres, q},
		{dblock.MySQL, `SELECT token FROM dblock_locks WHERE name = ? AND owner_id = ? AND expires_at > ?`},
	}
	for _, c := range cases {
		if got := (Target{Dialect: c.d}).Q(q); got != c.want {
			t.Errorf("%s: Q = %q, want %q", c.d, got, c.want)
		}
	}
}
