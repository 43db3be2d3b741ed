package testdb

import (
	"regexp"

	"github.com/sqllock/sqllock/dblock"
)

// pgParam is a PostgreSQL placeholder, $1 to $99.
var pgParam = regexp.MustCompile(`\$[1-9][0-9]?`)

// Q returns query, written with PostgreSQL's placeholders ($1, $2, … in
// the order of the arguments), in tg's dialect: MySQL's ? for each. It
// is for tests' own statements that differ between the dialects only in
// their placeholders.
func (tg Target) Q(query string) string {
	if tg.Dialect != dblock.MySQL {
		return query
	}
	return pgParam.ReplaceAllString(query, "?")
}
