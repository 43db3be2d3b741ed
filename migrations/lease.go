package migrations

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/golang-migrate/migrate/v4/database"

	"github.com/sqllock/sqllock/internal/lockkit"
)

// # The migration lease on a Galera cluster
//
// GET_LOCK is each node's own on a Galera cluster: Up on node 1 and Up on
// node 2 would both get it and migrate at once. There the migration lock
// is a lease instead, a row of LeaseTable that every node sees:
//
//   - LeaseTable is created with CREATE TABLE IF NOT EXISTS, which Galera
//     runs on every node in one total order (DDL is total-order
//     replicated), so concurrent creations are harmless.
//   - A migrator takes the lease by inserting its row, or by taking over a
//     row whose lease has lapsed. Of two takes on two nodes, at most one
//     commits: the other finds the row, or fails certification (1213) at
//     commit. The loser polls until it can take it.
//   - The holder renews the lease before and after each migration (when
//     golang-migrate records the version), on its own connection: the
//     caller's pool may have no other to give. It deletes the row when
//     done. A migrator that crashed holds it until it lapses, by the clock
//     of the node that judges it (leaseTTL).
//   - A migration that runs longer than leaseTTL lets the lease lapse, and
//     another migrator may take it: that one finds the history dirty and
//     stops, and this one fails at its next renewal. Nothing runs twice.
//   - A take that commits on node 2 after node 1's delete was applied
//     there, and Galera applies commits in one order on every node: the
//     new holder's reads see every migration the last holder committed.
//
// A single server keeps GET_LOCK (MySQL) or its advisory lock
// (PostgreSQL): the lease is only for clusters.

// LeaseTable holds the migration lease on a Galera cluster: one row while
// a migrator runs. Down leaves it, as it leaves MigrationsTable.
const LeaseTable = "sqllock_schema_lease"

const (
	// leaseTTL is how long a migrator that stopped renewing blocks others,
	// and how long one migration may run (sqllock's take milliseconds).
	leaseTTL = time.Minute
	// leasePoll bounds the pause between tries of a waiting migrator.
	leasePoll = 500 * time.Millisecond

	leaseCreate = `CREATE TABLE IF NOT EXISTS ` + LeaseTable + ` (
    id         INT           NOT NULL PRIMARY KEY,
    owner      VARBINARY(64) NOT NULL,
    expires_at DATETIME(6)   NOT NULL
) ENGINE=InnoDB`
	// leaseInsert takes a free lease (no row).
	leaseInsert = `INSERT IGNORE INTO ` + LeaseTable + ` (id, owner, expires_at)
VALUES (1, ?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)`
	// leaseTake takes over a lapsed lease, or renews the caller's own.
	leaseTake = `UPDATE ` + LeaseTable + ` SET owner = ?, expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
WHERE id = 1 AND (owner = ? OR expires_at <= UTC_TIMESTAMP(6))`
	// leaseRenewSQL renews the caller's lease if it has not lapsed.
	leaseRenewSQL = `UPDATE ` + LeaseTable + ` SET expires_at = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND
WHERE id = 1 AND owner = ? AND expires_at > UTC_TIMESTAMP(6)`
	leaseDelete = `DELETE FROM ` + LeaseTable + ` WHERE id = 1 AND owner = ?`
)

// errLeaseLost: a renewal found the lease lapsed or another's.
var errLeaseLost = errors.New("migrations: the migration lease lapsed while migrating (another node's migrator may have taken it)")

// lease is the migration lock of one Up or Down on a Galera node. Its
// statements run on the driver's connection, between migrations.
type lease struct {
	owner string
	held  bool
}

func newLease() (*lease, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	return &lease{owner: hex.EncodeToString(b)}, nil
}

// create makes LeaseTable if it is missing.
func (l *lease) create(ctx context.Context, conn *sql.Conn) error {
	if _, err := conn.ExecContext(ctx, leaseCreate); err != nil {
		return lockkit.WrapDBError("create "+LeaseTable, err)
	}
	return nil
}

// acquire waits until conn's node has given it the lease, or ctx ends.
func (l *lease) acquire(ctx context.Context, conn *sql.Conn) error {
	pause := 50 * time.Millisecond
	for {
		got, err := l.try(ctx, conn)
		if err != nil {
			return &database.Error{OrigErr: err, Err: "lease failed", Query: []byte(leaseTake)}
		}
		if got {
			l.held = true
			return nil
		}
		timer := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			timer.Stop()
			return &database.Error{OrigErr: ctx.Err(), Err: "waiting for the migration lease"}
		case <-timer.C:
		}
		pause = min(2*pause, leasePoll)
	}
}

// try takes the lease once. Losing a certification (1213) or a race to
// the row is not an error: someone else has it.
func (l *lease) try(ctx context.Context, conn *sql.Conn) (bool, error) {
	ttl := leaseTTL.Microseconds()
	for _, step := range []struct {
		query string
		args  []any
	}{
		{leaseTake, []any{l.owner, ttl, l.owner}},
		{leaseInsert, []any{l.owner, ttl}},
	} {
		res, err := conn.ExecContext(ctx, step.query, step.args...)
		if lockkit.ClassifyError(err) == lockkit.ClassContention {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if n, err := res.RowsAffected(); err != nil || n > 0 {
			return n > 0, err
		}
	}
	return false, nil
}

// renew pushes the held lease's end a leaseTTL from now; errLeaseLost if
// it has lapsed or is another's.
func (l *lease) renew(ctx context.Context, conn *sql.Conn) error {
	if !l.held {
		return nil
	}
	res, err := conn.ExecContext(ctx, leaseRenewSQL, leaseTTL.Microseconds(), l.owner)
	if err != nil {
		return lockkit.WrapDBError("renew the migration lease", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return errors.Join(errLeaseLost, err)
	}
	return nil
}

// release deletes the lease if it is the caller's. It runs after ctx may
// have ended: the lease must still go.
func (l *lease) release(ctx context.Context, conn *sql.Conn) error {
	if !l.held {
		return nil
	}
	l.held = false
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if _, err := conn.ExecContext(ctx, leaseDelete, l.owner); err != nil {
		return fmt.Errorf("migrations: release the migration lease: %w", lockkit.WrapDBError("delete "+LeaseTable, err))
	}
	return nil
}
