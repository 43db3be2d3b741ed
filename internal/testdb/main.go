package testdb

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Main runs a test binary's tests, closes the harness's shared pools, and
// then fails the binary if any goroutine is left running. Closing the
// pools first ends what they keep on purpose, for the whole binary:
//   - database/sql's connection opener;
//   - go-sql-driver's watcher of each open connection;
//   - the background reader pgx starts on a connection whose write was
//     slow (a loaded machine), parked until the server next speaks.
//
// Main also waits for the pgx connections still closing after a query was
// canceled (pgxConns). So nothing of theirs needs ignoring, and
// a goroutine left behind is the code's. extra adds what a package knows
// it may leave. A child process (IsChild) runs its test without the
// check: the parent judges it.
func Main(m *testing.M, extra ...goleak.Option) {
	if IsChild() {
		os.Exit(m.Run())
	}
	code := m.Run()
	if err := closeShared(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(extra...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines left after the tests passed: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// closeShared closes the pools Targets and PgBouncer opened, and waits until their
// connections and those of the examples' pools have closed.
func closeShared() error {
	var errs []error
	for _, s := range sources {
		// Targets ran (or never will: m.Run has returned).
		s.once.Do(func() {})
		if s.target.DB != nil {
			_ = s.target.DB.Close()
			errs = append(errs, s.conns.wait())
		}
	}
	pooler.once.Do(func() {})
	if pooler.target.DB != nil {
		_ = pooler.target.DB.Close()
		errs = append(errs, pooler.conns.wait())
	}
	return errors.Join(append(errs, exampleConns.wait())...)
}
