// Package migrations creates and upgrades sqllock's tables, from
// golang-migrate SQL files embedded in the binary, for PostgreSQL,
// MySQL/MariaDB and SQLite.
//
//	if err := migrations.Up(ctx, db); err != nil { // at start-up, on every replica
//		return err
//	}
//
// ExampleUp runs this against a real database. Up is safe to run on
// every replica at once. It runs on one connection
// borrowed from db and never closes db (golang-migrate's own drivers do).
// It splits MySQL files into statements itself, so the DSN needs no
// multiStatements=true. Its history is kept in its own table
// (MigrationsTable), apart from the application's. Teams that run goose,
// Atlas or Flyway take the same files from Files. Down drops the tables and
// Version tells where a database stands.
//
// On SQLite the migration lock is the file's write lock (BEGIN IMMEDIATE).
// The pool's DSN must set a busy timeout (_pragma=busy_timeout(5000); Up
// fails with dblock.ErrInvalidDB without one), and Up puts the file in WAL
// mode, which stays with the file. The SQLite schema has no forupdate
// tables.
//
// # Versions
//
// Released files are never edited: changes come as new migrations. Before
// the first release the schema grew through nine migrations, which version
// 1 replaced; version 1 creates exactly the schema their version 9 left. A
// database left clean at version 9 is taken to be at version 1. At any
// other of those development versions, Up, Down and Version return a
// *VersionError: drop sqllock's tables and MigrationsTable, then run Up.
package migrations
