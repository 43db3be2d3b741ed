package testdb

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy forwards TCP connections to a database server and can cut them all
// at once: the way to test what a lock holder does when its connection
// dies, without stopping a server other tests share.
type Proxy struct {
	target string
	ln     net.Listener
	wg     sync.WaitGroup // the accept loop and every connection's goroutines

	mu      sync.Mutex
	cut     bool
	holed   bool                  // Blackhole: clients' ends stay open and silent
	conns   map[net.Conn]struct{} // both ends of every forwarded connection
	servers map[net.Conn]struct{} // the server ends among them
	stall   *stall                // armed by StallOn, until it catches a write
	closing chan struct{}         // closed when the test ends: stalls give up
}

// stall holds back the first client write that contains pattern.
type stall struct {
	pattern []byte
	caught  chan struct{} // closed when a write is held back
	resume  chan struct{} // closed to forward it
}

// dialTimeout bounds the connect to the target, so that a dead target
// makes the client's connection fail instead of hang.
const dialTimeout = 5 * time.Second

// NewProxy listens on 127.0.0.1 (a free port) and forwards to target. When
// the test ends it closes the listener and every connection, and waits for
// all its goroutines.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testdb: proxy listen: %v", err)
	}
	p := &Proxy{target: target, ln: ln, conns: make(map[net.Conn]struct{}), servers: make(map[net.Conn]struct{}),
		closing: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's host:port, for Target.DSNVia.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every open connection, both towards the client and towards
// the server, and closes new ones as soon as they are accepted, until
// Restore. Clients see their connections fail; servers see their clients
// vanish (and end their sessions, rolling back transactions).
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

// Blackhole ends every open connection towards the server, so the server
// sees its clients vanish and ends their sessions, while the clients' ends
// stay open and silent: what clients write goes nowhere and nothing
// answers, as when a network path drops packets without resetting
// anything. A client learns of it only by its own timeouts. New
// connections are closed as by Cut, until Restore.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut, p.holed = true, true
	for c := range p.servers {
		_ = c.Close()
		delete(p.conns, c)
		delete(p.servers, c)
	}
}

// Restore forwards new connections again. Connections closed by Cut stay
// closed: the client's pool must open fresh ones.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.cut, p.holed = false, false
	p.mu.Unlock()
}

// StallOn holds back the next write of any client towards the server that
// contains pattern (a COMMIT, a statement's text) until resume is called:
// a statement or commit the server receives late, as when a synchronous
// standby has gone away or a Galera cluster's membership changes. caught
// is closed once a write is held back. Only one write is held; StallOn
// arms it again. resume may be called more than once; the proxy's close
// resumes too.
func (p *Proxy) StallOn(pattern []byte) (caught <-chan struct{}, resume func()) {
	st := &stall{pattern: pattern, caught: make(chan struct{}), resume: make(chan struct{})}
	p.mu.Lock()
	p.stall = st
	p.mu.Unlock()
	var once sync.Once
	return st.caught, func() { once.Do(func() { close(st.resume) }) }
}

// hold waits, if chunk is the write the armed stall is for, until the
// stall is resumed or the proxy closes.
func (p *Proxy) hold(chunk []byte) {
	p.mu.Lock()
	st := p.stall
	if st == nil || !bytes.Contains(chunk, st.pattern) {
		p.mu.Unlock()
		return
	}
	p.stall = nil
	p.mu.Unlock()
	close(st.caught)
	select {
	case <-st.resume:
	case <-p.closing:
	}
}

// copyUp copies what the client writes to the server, holding back the
// write a stall is armed for.
func (p *Proxy) copyUp(server, client net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			p.hold(buf[:n])
			if _, werr := server.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) close() {
	close(p.closing)
	_ = p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// Transient (too many open files, aborted handshake): keep
			// serving, or later clients would hang in the backlog.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if !p.track(client) {
			_ = client.Close()
			continue
		}
		// The accept loop's own count keeps the WaitGroup above zero
		// here, so this Add cannot race with close's Wait.
		p.wg.Add(1)
		go p.forward(client)
	}
}

// forward dials the target for client, in its own goroutine so that one
// slow dial does not hold up other connections, then copies both ways.
func (p *Proxy) forward(client net.Conn) {
	defer p.wg.Done()
	server, err := net.DialTimeout("tcp", p.target, dialTimeout)
	if err != nil {
		p.drop(client)
		return
	}
	// A Cut during the dial must not let this connection through.
	if !p.track(server) {
		_ = server.Close()
		p.drop(client)
		return
	}
	p.mu.Lock()
	p.servers[server] = struct{}{}
	p.mu.Unlock()
	upstreamDone := make(chan struct{})
	go func() {
		defer close(upstreamDone)
		p.copyUp(server, client)
		if p.blackholed() {
			// Swallow what the client writes until it gives up (or
			// the proxy closes).
			_, _ = io.Copy(io.Discard, client)
		}
		p.drop(server)
		p.drop(client)
	}()
	_, _ = io.Copy(client, server)
	if !p.blackholed() {
		// Either direction ending ends both, as a broken network path
		// would, so that neither peer is left half-connected.
		p.drop(client)
	}
	p.drop(server)
	<-upstreamDone
}

func (p *Proxy) blackholed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.holed
}

// track registers c so that Cut can close it, unless the proxy is cut.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) drop(c net.Conn) {
	_ = c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.servers, c)
	p.mu.Unlock()
}
