package forupdate_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/testdb"
)

func TestMain(m *testing.M) {
	// Every goroutine forupdate starts must be stopped by Release.
	testdb.Main(m)
}

// targets returns the databases under test, migrated (package migrations
// creates forupdate's table and token counters).
func targets(t testing.TB) []testdb.Target {
	t.Helper()
	return testdb.Targets(t)
}

// newLocker returns a Locker on db, closed when the test ends.
func newLocker(t testing.TB, db *sql.DB, opts ...forupdate.Option) *forupdate.Locker {
	t.Helper()
	l, err := forupdate.New(db, opts...)
	if err != nil {
		t.Fatalf("forupdate.New: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// acquire takes name and fails the test on error.
func acquire(t testing.TB, ctx context.Context, l *forupdate.Locker, name string, opts ...dblock.Option) *forupdate.Lock {
	t.Helper()
	k, err := l.Acquire(ctx, name, opts...)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", name, err)
	}
	return k.(*forupdate.Lock)
}

// release releases k and fails the test on error.
func release(t testing.TB, k dblock.Lock) {
	t.Helper()
	if err := k.Release(context.Background()); err != nil {
		t.Fatalf("Release(%q): %v", k.Name(), err)
	}
}

// singleConnDB returns a pool of at most one connection to tg, so that the
// session a Locker uses is the one sessionID reports.
func singleConnDB(t testing.TB, tg testdb.Target) *sql.DB {
	t.Helper()
	db := testdb.Open(t, tg, tg.DSN)
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	return db
}

// twoConnDB returns a pool of two connections whose only idle one, the
// session sessionID reports, is the one a Locker takes first; the second is
// left for the pool's other work (MySQL's KILL QUERY).
func twoConnDB(t testing.TB, tg testdb.Target) *sql.DB {
	t.Helper()
	db := testdb.Open(t, tg, tg.DSN)
	db.SetMaxOpenConns(2)
	db.SetMaxIdleConns(2)
	return db
}

// sessionID is the server's id of db's (single) connection.
func sessionID(t testing.TB, tg testdb.Target, db *sql.DB) int64 {
	t.Helper()
	q := `SELECT pg_backend_pid()`
	if tg.Dialect == dblock.MySQL {
		q = `SELECT CONNECTION_ID()`
	}
	var id int64
	if err := db.QueryRowContext(context.Background(), q).Scan(&id); err != nil {
		t.Fatalf("session id: %v", err)
	}
	return id
}

// sessionState tells what the server says session id is doing: "waiting"
// (for a lock), "idle" (no statement, no transaction), "gone", or "busy".
func sessionState(t testing.TB, tg testdb.Target, id int64) string {
	t.Helper()
	ctx := context.Background()
	if tg.Dialect == dblock.Postgres {
		var state, wait sql.NullString
		err := tg.DB.QueryRowContext(ctx, `SELECT state, wait_event_type FROM pg_stat_activity WHERE pid = $1`, id).Scan(&state, &wait)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return "gone"
		case err != nil:
			t.Fatalf("pg_stat_activity: %v", err)
		case wait.String == "Lock":
			return "waiting"
		case state.String == "idle":
			return "idle"
		}
		return "busy: " + state.String + ": " + wait.String
	}
	var command string
	var info sql.NullString
	err := tg.DB.QueryRowContext(ctx, `SELECT COMMAND, INFO FROM information_schema.PROCESSLIST WHERE ID = ?`, id).Scan(&command, &info)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "gone"
	case err != nil:
		t.Fatalf("processlist: %v", err)
	case info.Valid && len(info.String) > 10 && info.String[:10] == "/* sqllock":
		// Only forupdate's waiting statements carry the marker.
		return "waiting"
	case command == "Sleep" && !info.Valid:
		var inTx int
		if err := tg.DB.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = ?`, id).Scan(&inTx); err != nil {
			t.Fatalf("innodb_trx: %v", err)
		}
		if inTx == 0 {
			return "idle"
		}
		var state, started string
		var query sql.NullString
		_ = tg.DB.QueryRowContext(ctx, `SELECT trx_state, trx_started, trx_query FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = ?`, id).Scan(&state, &started, &query)
		return "idle in transaction (" + state + " since " + started + ", " + query.String + ")"
	}
	return "busy: " + command + ": " + info.String
}

// waitForState polls until session id is in state, failing after a
// generous bound (against hangs; not a timing assertion).
func waitForState(t testing.TB, tg testdb.Target, id int64, state string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := sessionState(t, tg, id)
		if got == state {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %d is %q, want %q", id, got, state)
		}
		// InnoDB refreshes INNODB_TRX only when no one read it for 100ms.
		pause := 5 * time.Millisecond
		if tg.Dialect == dblock.MySQL {
			pause = 150 * time.Millisecond
		}
		time.Sleep(pause)
	}
}

// result is what an Acquire in a goroutine returned.
type result struct {
	lock *forupdate.Lock
	err  error
}

// acquireAsync runs Acquire in a goroutine.
func acquireAsync(ctx context.Context, l *forupdate.Locker, name string, opts ...dblock.Option) <-chan result {
	return acquireAsyncWith(ctx, l, name, opts...)
}

// acquireAsyncWith runs Acquire of any of forupdate's Lockers, whose
// locks are *forupdate.Lock, in a goroutine.
func acquireAsyncWith(ctx context.Context, l dblock.Locker, name string, opts ...dblock.Option) <-chan result {
	out := make(chan result, 1)
	go func() {
		k, err := l.Acquire(ctx, name, opts...)
		r := result{err: err}
		if err == nil {
			r.lock = k.(*forupdate.Lock)
		}
		out <- r
	}()
	return out
}

// await returns the result of acquireAsync, failing after a generous bound.
func await(t testing.TB, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("Acquire did not return")
		return result{}
	}
}

// workTable creates (once per database) a table for work done under locks.
func workTable(t testing.TB, tg testdb.Target) string {
	t.Helper()
	ddl := `CREATE TABLE IF NOT EXISTS forupdate_test_work (name varchar(255) PRIMARY KEY, n bigint NOT NULL)`
	if _, err := tg.DB.ExecContext(context.Background(), ddl); err != nil {
		t.Fatalf("create work table: %v", err)
	}
	return "forupdate_test_work"
}

// freezeProxy forwards TCP connections to a server until Freeze, after
// which it forwards nothing and closes nothing, as a network partition
// would: neither side hears from the other again. With CutAfter, it cuts a
// connection instead once the server has sent one of the given texts.
type freezeProxy struct {
	target string
	ln     net.Listener

	mu     sync.Mutex
	frozen bool
	closed bool
	cutOn  [][]byte
	thaw   *sync.Cond
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func newFreezeProxy(t testing.TB, target string) *freezeProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezeProxy{target: target, ln: ln, conns: make(map[net.Conn]struct{})}
	p.thaw = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *freezeProxy) Addr() string { return p.ln.Addr().String() }

// Freeze stops all traffic for good.
func (p *freezeProxy) Freeze() {
	p.mu.Lock()
	p.frozen = true
	p.mu.Unlock()
}

// CutAfter has the proxy close both ends of a connection once the server
// has sent any of texts on it (forwarded first, so the client reads it).
// The connection must be in plain text.
func (p *freezeProxy) CutAfter(texts ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range texts {
		p.cutOn = append(p.cutOn, []byte(s))
	}
}

func (p *freezeProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.thaw.Broadcast()
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *freezeProxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.mu.Lock()
		p.conns[client], p.conns[server] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(client, server, true)
		go p.pipe(server, client, false)
	}
}

// pipe copies src to dst; frozen, it holds what it read and, when src
// ends, keeps dst open until the proxy closes. From the server, it cuts
// after a text given to CutAfter (one read holds a whole short message).
func (p *freezeProxy) pipe(dst, src net.Conn, fromServer bool) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		for p.frozen && !p.closed {
			p.thaw.Wait()
		}
		closed, cutOn := p.closed, p.cutOn
		p.mu.Unlock()
		if closed {
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
			for _, text := range cutOn {
				if fromServer && bytes.Contains(buf[:n], text) {
					_ = src.Close()
					_ = dst.Close()
					return
				}
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				_ = src.Close()
			}
			_ = dst.Close()
			return
		}
	}
}
