package testdb

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// galeraLockWait bounds the wait for the cluster: the Galera tests of the
// other packages, one after the other, take a few minutes.
const galeraLockWait = 10 * time.Minute

// lockGalera takes the file lock that gives one test at a time the
// cluster, and releases it when the test ends.
func lockGalera(t testing.TB) {
	t.Helper()
	path := filepath.Join(os.TempDir(), "sqllock-galera-tests.lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatalf("testdb: the Galera tests' lock %s: %v", path, err)
	}
	deadline := time.Now().Add(galeraLockWait)
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			_ = f.Close()
			t.Fatalf("testdb: the Galera tests' lock %s: %v (another test has had the cluster for %v)", path, err, galeraLockWait)
		}
		select {
		case <-t.Context().Done():
			_ = f.Close()
			t.Fatalf("testdb: waiting for the Galera tests' lock: %v", t.Context().Err())
		case <-time.After(galeraPoll):
		}
	}
	t.Cleanup(func() { _ = f.Close() }) // closing releases the lock
}
