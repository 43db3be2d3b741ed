package forupdate

import "github.com/sqllock/sqllock/dblock"

// WaitRestored waits for the sessions of l's released locks to be restored
// and their connections back in the pool.
func WaitRestored(l *Locker) { l.restoring.wait() }

// DrawFromCounterTable has l draw tokens from a counter table, as on MySQL
// 8.0, even on MariaDB. Call it before l's first acquisition.
func DrawFromCounterTable(l *Locker) {
	if m, ok := l.d.(*mysql); ok {
		m.counterTable = true
	}
}

// SemaphoreLocker is the Locker of s, a semaphore of Locker.Semaphore.
func SemaphoreLocker(s dblock.Semaphore) *Locker { return s.(*semaphore).l }
