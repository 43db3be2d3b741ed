package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/rowlock"
)

// poolSize is the memory section's pool: small, so that a thousand waiters
// do not open a thousand connections, and warmed to its size beforehand.
const poolSize = 16

type memSnapshot struct {
	heap, stack int64
	goroutines  int
}

func snapshot() memSnapshot {
	// Stacks of exited goroutines and shrinkable ones are given back over
	// a few cycles; FreeOSMemory also forces one.
	for range 3 {
		runtime.GC()
	}
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memSnapshot{heap: int64(ms.HeapAlloc), stack: int64(ms.StackInuse), goroutines: runtime.NumGoroutine()}
}

// minStackN is the fewest items whose stacks can be told apart: stacks
// come in 32 KiB spans, and new goroutines fill free room in spans that are
// already counted.
const minStackN = 200

func (t *table) addMem(db, what string, n int, before, after memSnapshot) {
	heap, stack := after.heap-before.heap, after.stack-before.stack
	if after.goroutines <= before.goroutines {
		// No goroutine was started for the items: what StackInuse moved by
		// is other goroutines' stacks growing and shrinking, not theirs.
		stack = 0
	}
	stacks, total := bytesEach(stack, n), bytesEach(heap+stack, n)
	if n < minStackN {
		stacks, total = "—", "—"
	}
	t.add(db, what, fmt.Sprint(n), bytesEach(heap, n), stacks, total,
		fmt.Sprintf("%.2f", float64(after.goroutines-before.goroutines)/float64(n)))
}

func memory(ctx context.Context, cfg config, e *env, t *table) error {
	db, err := smallPool(ctx, e, max(poolSize, cfg.fuMemN+4))
	if err != nil {
		return err
	}
	defer db.Close()

	l, err := rowlock.New(db)
	if err != nil {
		return err
	}
	defer l.Close()

	// Fill every pooled connection's statement cache before measuring.
	var wg sync.WaitGroup
	var warmErr error
	var warmMu sync.Mutex
	for g := range poolSize {
		wg.Go(func() {
			for i := range 4 {
				k, err := l.TryAcquire(ctx, e.newName("m-warm", g, i))
				if err == nil {
					err = k.Release(ctx)
				}
				warmMu.Lock()
				warmErr = errors.Join(warmErr, err)
				warmMu.Unlock()
			}
		})
	}
	wg.Wait()
	if warmErr != nil {
		return warmErr
	}

	// Held locks: each has its handle; its renewal goroutine starts only
	// when the first renewal is due (TTL/3), after the measurement.
	names := make([]string, cfg.memN)
	for i := range names {
		names[i] = e.newName("m-held", i)
	}
	before, after, err := holdAll(ctx, l, names)
	if err != nil {
		return err
	}
	t.addMem(e.target.name, "rowlock held lock", cfg.memN, before, after)

	if e.fuErr == nil && cfg.fuMemN > 0 {
		if err := memForUpdate(ctx, cfg, e, db, t); err != nil {
			return err
		}
	}
	for _, fair := range []bool{false, true} {
		what, opts := "rowlock unfair waiter", []dblock.Option(nil)
		if fair {
			what, opts = "rowlock fair waiter", []dblock.Option{dblock.Fair()}
		}
		before, after, err := waiters(ctx, db, l, e.newName("m-wait", len(opts)), cfg.memN, opts)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		t.addMem(e.target.name, what, cfg.memN, before, after)
	}

	return nil
}

// memForUpdate measures forupdate held locks; each keeps a pool connection.
func memForUpdate(ctx context.Context, cfg config, e *env, db *sql.DB, t *table) error {
	fl, err := forupdate.New(db)
	if err != nil {
		return err
	}
	defer fl.Close()
	fuNames := make([]string, cfg.fuMemN)
	for i := range fuNames {
		fuNames[i] = e.newName("m-fu", i)
		e.names.forUpdate(fuNames[i])
		// Create the row (outside the timed part).
		k, err := fl.TryAcquire(ctx, fuNames[i])
		if err != nil {
			return err
		}
		if err := k.Release(ctx); err != nil {
			return err
		}
	}
	before, after, err := holdAll(ctx, fl, fuNames)
	if err != nil {
		return err
	}
	t.addMem(e.target.name, "forupdate held lock (+1 pooled conn each)", cfg.fuMemN, before, after)
	return nil
}

// smallPool opens a pool of at most size connections, all opened now, so
// that opening them later is not counted as the measured thing's cost.
func smallPool(ctx context.Context, e *env, size int) (*sql.DB, error) {
	db, err := sql.Open(e.target.driver, e.dsn)
	if err != nil {
		return nil, err
	}
	if err := fillPool(ctx, db, size); err != nil {
		_ = db.Close()
		return nil, err
	}
	return db, nil
}

func releaseAll(ctx context.Context, locks []dblock.Lock) error {
	var errs []error
	for _, k := range locks {
		errs = append(errs, k.Release(ctx))
	}
	return errors.Join(errs...)
}

// waiters blocks n goroutines in Acquire on a held name and returns the
// memory before they started and once they all sleep.
func waiters(ctx context.Context, db *sql.DB, l *rowlock.Locker, name string, n int, opts []dblock.Option) (before, after memSnapshot, err error) {
	holder, err := l.Acquire(ctx, name, dblock.TTL(5*time.Minute))
	if err != nil {
		return before, after, err
	}
	defer func() { err = errors.Join(err, holder.Release(ctx)) }()
	waitCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	var mu sync.Mutex
	var errs []error
	before = snapshot()
	for range n {
		wg.Go(func() {
			k, err := l.Acquire(waitCtx, name, opts...)
			if err == nil {
				err = errors.Join(errors.New("a waiter acquired a held lock"), k.Release(ctx))
			}
			if waitCtx.Err() == nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	// Settled: every waiter started and the pool quiet (at most the
	// listener's connection and one poll in use) for half a second.
	deadline := time.Now().Add(2 * time.Minute)
	quiet := 0
	lastWaits := int64(-1)
	for quiet < 5 {
		if time.Now().After(deadline) {
			return before, after, errors.New("waiters did not settle in 2 minutes")
		}
		time.Sleep(100 * time.Millisecond)
		mu.Lock()
		failed := errors.Join(errs...)
		mu.Unlock()
		if failed != nil {
			return before, after, failed
		}
		s := db.Stats()
		if runtime.NumGoroutine() >= before.goroutines+n && s.InUse <= 2 && s.WaitCount == lastWaits {
			quiet++
		} else {
			quiet = 0
		}
		lastWaits = s.WaitCount
	}
	after = snapshot()
	return before, after, nil
}

// holdAll takes every name with l and reads the memory before and after,
// then releases them all.
func holdAll(ctx context.Context, l dblock.Locker, names []string) (before, after memSnapshot, err error) {
	locks := make([]dblock.Lock, 0, len(names))
	before = snapshot()
	for _, n := range names {
		k, err := l.TryAcquire(ctx, n)
		if err != nil {
			return before, after, errors.Join(err, releaseAll(ctx, locks))
		}
		locks = append(locks, k)
	}
	after = snapshot()
	return before, after, releaseAll(ctx, locks)
}
