package forupdate

import (
	"context"
	"database/sql"
	"sync"
	"time"
)

// cleanupTimeout bounds the statements run after the caller's context
// ended: rolling back, restoring the session.
const cleanupTimeout = 10 * time.Second

// endSession returns conn to the pool in the state it was taken in, or has
// it closed when that state is uncertain. With background set (after a
// release), a session to restore (MySQL) is restored after endSession
// returns: the lock is free already, so the caller need not wait for the
// connection's housekeeping, and the connection stays out of the pool
// until it is done. Close waits for the restores under way. A failed
// acquisition restores before it returns: a refused call leaves the pool
// as it found it.
func (l *Locker) endSession(ctx context.Context, conn *sql.Conn, clean, background bool) {
	switch {
	case !clean:
		discard(conn)
		return
	case !l.d.restoresSession():
		_ = conn.Close()
		return
	case !background:
		l.restoreSession(ctx, conn)
		return
	}
	l.restoring.start()
	go func() {
		defer l.restoring.end()
		l.restoreSession(ctx, conn)
	}()
}

// restoreSession undoes openSession and returns conn to the pool, or closes
// it if that fails.
func (l *Locker) restoreSession(ctx context.Context, conn *sql.Conn) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if err := l.d.closeSession(cctx, conn); err != nil {
		l.cfg.logger.Warn("forupdate: restoring the session failed; closing the connection", "error", err)
		discard(conn)
		return
	}
	_ = conn.Close()
}

// tasks counts work under way in the background, so that it can be waited
// for. Unlike a sync.WaitGroup, it may be waited for while tasks start.
type tasks struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to zero; nil while it is zero
}

func (t *tasks) start() {
	t.mu.Lock()
	if t.n == 0 {
		t.idle = make(chan struct{})
	}
	t.n++
	t.mu.Unlock()
}

func (t *tasks) end() {
	t.mu.Lock()
	t.n--
	if t.n == 0 {
		close(t.idle)
		t.idle = nil
	}
	t.mu.Unlock()
}

// wait returns once no task is under way.
func (t *tasks) wait() {
	t.mu.Lock()
	idle := t.idle
	t.mu.Unlock()
	if idle != nil {
		<-idle
	}
}
