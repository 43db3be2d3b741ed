package wake

import (
	"database/sql"
	"sync"
)

// reserved counts, per pool, the connections that this process's Lockers
// keep checked out for long: session connections and the watcher's waits.
// In a pool with a limit they must leave at least one connection for
// everything else (tries, renewals, releases), or waiters would wait for a
// connection that only a release could free, and the release for one too.
//
// It is the package's one piece of process-wide mutable state, and it
// must be: the pool is shared by Lockers that do not know each other (two
// rowlock.New on one *sql.DB), a *sql.DB has no room for a count of its
// own, and a count per Locker lets two Lockers on a pool of two take both
// connections (TestSmallPool). It holds a pool only while one of its
// connections is reserved, so it keeps no pool alive.
var reserved = struct {
	sync.Mutex
	n map[*sql.DB]int
}{n: make(map[*sql.DB]int)}

// reserveConn counts a long-held connection on db if the pool can spare
// it: no limit (db.SetMaxOpenConns(0), the default) or at least one
// connection left besides the reserved ones.
func reserveConn(db *sql.DB) bool {
	reserved.Lock()
	defer reserved.Unlock()
	if limit := db.Stats().MaxOpenConnections; limit > 0 && limit-reserved.n[db] < 2 {
		return false
	}
	reserved.n[db]++
	return true
}

// releaseConn gives back a reservation of reserveConn.
func releaseConn(db *sql.DB) {
	reserved.Lock()
	defer reserved.Unlock()
	if reserved.n[db]--; reserved.n[db] <= 0 {
		delete(reserved.n, db)
	}
}
