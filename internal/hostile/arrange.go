package hostile

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sqllock/sqllock/dblock"
)

// hangBound ends an Acquire that should have returned at once: it then
// fails its case with the wrong error instead of hanging the test binary.
// It is a liveness bound, generous for a loaded machine, not a measure.
const hangBound = 30 * time.Second

// TenMB is a 10 MB string, built once: it is expensive to make per case.
var TenMB = sync.OnceValue(func() string { return strings.Repeat("x", 10<<20) })

// NameOf returns the name a case's call uses.
type NameOf func(e *Env) string

// Named is the case's prefix plus suffix.
func Named(suffix string) NameOf { return func(e *Env) string { return e.N(suffix) } }

// Global is name itself, shared by every case (the empty name, say).
func Global(name string) NameOf { return func(*Env) string { return name } }

// GotLock turns a lock wrongly granted into an error, releasing it.
func GotLock(k dblock.Lock, err error) error {
	if k != nil {
		_ = k.Release(context.Background())
		return fmt.Errorf("got a lock (and err %v)", err)
	}
	return err
}

// Try is a TryAcquire of name with opts on the case's Locker.
func Try(name NameOf, opts ...dblock.Option) Arrange {
	return func(e *Env) func(context.Context) error {
		n := name(e)
		e.Watch(n)
		return func(ctx context.Context) error { return GotLock(e.L.TryAcquire(ctx, n, opts...)) }
	}
}

// Acquire is an Acquire of name with opts on the case's Locker.
func Acquire(name NameOf, opts ...dblock.Option) Arrange {
	return func(e *Env) func(context.Context) error {
		n := name(e)
		e.Watch(n)
		return func(ctx context.Context) error { return AcquireOn(opts...)(e.L, n, ctx) }
	}
}

// TryOn is a TryAcquire of name on l.
func TryOn(l dblock.Locker, name string, ctx context.Context) error {
	return GotLock(l.TryAcquire(ctx, name))
}

// AcquireOn returns an Acquire with opts, bounded against hangs.
func AcquireOn(opts ...dblock.Option) func(l dblock.Locker, name string, ctx context.Context) error {
	return func(l dblock.Locker, name string, ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, hangBound)
		defer cancel()
		return GotLock(l.Acquire(ctx, name, opts...))
	}
}

// WithLocker makes the call on the Locker mk returns, with a name of the
// case.
func WithLocker[L any](mk func(e *Env) L, call func(l L, name string, ctx context.Context) error) Arrange {
	return func(e *Env) func(context.Context) error {
		l := mk(e)
		name := e.N("x")
		e.Watch(name)
		return func(ctx context.Context) error { return call(l, name, ctx) }
	}
}

// WithCtx replaces the test's context given to the call.
func WithCtx(mk func(context.Context) context.Context, arrange Arrange) Arrange {
	return func(e *Env) func(context.Context) error {
		call := arrange(e)
		return func(ctx context.Context) error { return call(mk(ctx)) }
	}
}

// NilContext is a nil interface, as a caller's bug passes it.
func NilContext(context.Context) context.Context { return nilCtx }

var nilCtx context.Context

// Canceled returns ctx canceled.
func Canceled(ctx context.Context) context.Context {
	ctx, cancel := context.WithCancel(ctx)
	cancel()
	return ctx
}

// PastDeadline returns ctx with a deadline that has passed.
func PastDeadline(ctx context.Context) context.Context {
	ctx, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	cancel() // done already: its error stays DeadlineExceeded
	return ctx
}

// Owner returns ctx carrying the owner id.
func Owner(id string) func(context.Context) context.Context {
	return func(ctx context.Context) context.Context { return dblock.WithOwner(ctx, id) }
}

// Legal holds a lock of the case and acquires others, names that must
// work and not disturb the held one.
func Legal(held string, others ...string) Arrange {
	return func(e *Env) func(context.Context) error {
		e.Hold(e.N(held))
		e.Watch(e.N(held))
		var names []string
		for _, o := range others {
			names = append(names, e.N(o))
		}
		e.MayWrite(names...)
		return func(ctx context.Context) error { return e.AcquireDistinct(ctx, names...) }
	}
}

// OnHeld holds a lock of the case, lets prep act on it (when not nil),
// and returns the call made with the handle.
func OnHeld(prep func(e *Env, k dblock.Lock), call func(e *Env, k dblock.Lock, ctx context.Context) error) Arrange {
	return func(e *Env) func(context.Context) error {
		name := e.N("held")
		k := e.Hold(name)
		e.Watch(name)
		if prep != nil {
			prep(e, k)
		}
		return func(ctx context.Context) error { return call(e, k, ctx) }
	}
}

// Released releases the held lock before the call.
func Released(e *Env, k dblock.Lock) {
	if err := k.Release(e.T.Context()); err != nil {
		e.T.Fatalf("arrange: first Release: %v", err)
	}
}

// StillHeld checks, after the call, that the lock is still held and can
// be released.
func StillHeld(e *Env, k dblock.Lock) {
	e.AndThen(func() {
		if err := k.Err(); err != nil {
			e.T.Errorf("after the refused call the lock is no longer held: %v", err)
		}
		if err := k.Release(e.T.Context()); err != nil {
			e.T.Errorf("after the refused call, Release: %v", err)
		}
	})
}

// SharedDB is the case's own pool.
func SharedDB(e *Env) *sql.DB { return e.DB }

// OtherDialect is the dialect d is not.
func OtherDialect(d dblock.Dialect) dblock.Dialect {
	if d == dblock.Postgres {
		return dblock.MySQL
	}
	return dblock.Postgres
}

// Connector is a database/sql driver sqllock has never heard of.
type Connector struct{}

// Connect fails: there is no server.
func (Connector) Connect(context.Context) (driver.Conn, error) {
	return nil, errors.New("hostile driver: no server")
}

// Driver returns the connector's driver.
func (Connector) Driver() driver.Driver { return hostileDriver{} }

type hostileDriver struct{}

func (hostileDriver) Open(string) (driver.Conn, error) {
	return nil, errors.New("hostile driver: no server")
}

// ExactLength returns prefix followed by ASCII filler and emoji, total
// bytes long, the last emoji ending exactly at the end.
func ExactLength(prefix string, total int) string {
	const emoji = "😀" // 4 bytes
	room := total - len(prefix)
	return prefix + strings.Repeat("x", room%4) + strings.Repeat(emoji, room/4)
}

// Random returns 64 random bits in hex, for names no other run uses.
func Random() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
