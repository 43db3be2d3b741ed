package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/sqllock/sqllock/migrations"
)

var migrateCommand = &command{
	name:    "migrate",
	summary: "create (up), drop (down) or show the version of the lock tables",
	usage:   "up | down --yes | version",
	help: `
up creates the lock tables, or upgrades them to the latest version; running it
again, or on several machines at once, is safe. down drops the tables and every
lock and waiter in them: stop the applications that use them first. version
prints the schema version (0: no tables); it only reads, so it works on a
read-only connection and creates nothing in a database never migrated.

The migrations keep their history in their own table (` + migrations.MigrationsTable + `),
apart from the application's.`,
	interspersed: true,
	flags: func(fs *flag.FlagSet) func(*invocation) error {
		yes := fs.Bool("yes", false, "confirm migrate down, which drops every lock")
		return func(inv *invocation) error { return runMigrate(inv, *yes) }
	},
}

func runMigrate(inv *invocation, yes bool) error {
	if len(inv.args) != 1 {
		return usagef("migrate", "migrate needs one of up, down, version")
	}
	action := inv.args[0]
	switch action {
	case "up", "version":
	case "down":
		if !yes {
			return usagef("migrate", "migrate down drops the lock tables and every lock in them; pass --yes to confirm")
		}
	default:
		return usagef("migrate", "unknown migrate action %q: want up, down or version", action)
	}
	ctx := context.Background()
	db, dialect, err := inv.connect(ctx)
	if err != nil {
		return err
	}
	defer db.Close()

	switch action {
	case "up":
		if err := migrations.Up(ctx, db, migrations.WithDialect(dialect)); err != nil {
			return err
		}
		fmt.Fprintf(inv.stdout, "schema at version %d\n", migrations.Latest)
	case "down":
		if err := migrations.Down(ctx, db, migrations.WithDialect(dialect)); err != nil {
			return err
		}
		fmt.Fprintln(inv.stdout, "lock tables dropped")
	case "version":
		version, dirty, err := migrations.Version(ctx, db, migrations.WithDialect(dialect))
		if err != nil {
			return err
		}
		fmt.Fprintln(inv.stdout, version)
		switch {
		case dirty:
			return &exitCode{code: exitError, msg: fmt.Sprintf(
				"migration %d failed half-way (dirty): repair the tables by hand, then set the version in %s",
				version, migrations.MigrationsTable)}
		case version < migrations.Latest:
			fmt.Fprintf(inv.stderr, "sqllock: the schema is behind (latest is %d): run 'sqllock migrate up'\n", migrations.Latest)
		}
	}
	return nil
}
