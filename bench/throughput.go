package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/rowlock"
)

// tpVariant is one contender of the throughput section. worker prepares
// goroutine g (pinning a connection, say) and returns its operation on
// name k of its own, and what to undo after the slice.
type tpVariant struct {
	name   string
	worker func(ctx context.Context, g int) (run func(ctx context.Context, k int) error, done func(), err error)
}

type tpResult struct {
	ops     int
	elapsed time.Duration
	lat     samples
}

// throughput times many goroutines each cycling over names of their own.
// Its complexity (gocyclo over 15) is the small closures of its variants,
// kept in one list so each variant is read beside its baseline.
func throughput(ctx context.Context, cfg config, e *env, t *table) error {
	// Each variant has names of its own: rowlock and the naive recipe
	// share a table, and rows left by one must not fail the other.
	nameSet := func(kind string) [][]string {
		names := make([][]string, cfg.goroutines)
		for g := range names {
			for k := range cfg.namesEach {
				names[g] = append(names[g], e.newName(kind, g, k))
			}
		}
		return names
	}
	rlNames, naiveNames, advNames, rawNames, fuNames := nameSet("tp-rl"), nameSet("tp-naive"), nameSet("tp-adv"), nameSet("tp-raw"), nameSet("tp-fu")
	rl, err := rowlock.New(e.db)
	if err != nil {
		return err
	}
	defer rl.Close()
	noop := func() {}
	variants := []tpVariant{
		{"rowlock TryAcquire+Release", func(_ context.Context, g int) (func(context.Context, int) error, func(), error) {
			return func(ctx context.Context, k int) error {
				lock, err := rl.TryAcquire(ctx, rlNames[g][k])
				if err != nil {
					return err
				}
				return lock.Release(ctx)
			}, noop, nil
		}},
		{"naive INSERT+DELETE (raw)", func(_ context.Context, g int) (func(context.Context, int) error, func(), error) {
			return func(ctx context.Context, k int) error { return e.naive(ctx, naiveNames[g][k]) }, noop, nil
		}},
		{advisoryName(e) + " (pinned conn each)", func(ctx context.Context, g int) (func(context.Context, int) error, func(), error) {
			conn, err := e.db.Conn(ctx)
			if err != nil {
				return nil, nil, err
			}
			return func(ctx context.Context, k int) error {
				if err := e.advTry(ctx, conn, advNames[g][k]); err != nil {
					return err
				}
				return e.advUnlock(ctx, conn, advNames[g][k])
			}, func() { _ = conn.Close() }, nil
		}},
		{"BEGIN; SELECT … FOR UPDATE; COMMIT (raw)", func(_ context.Context, g int) (func(context.Context, int) error, func(), error) {
			return func(ctx context.Context, k int) error { return e.rawForUpdate(ctx, rawNames[g][k]) }, noop, nil
		}},
	}
	for _, ns := range rawNames {
		for _, n := range ns {
			if err := e.fuCreate(ctx, n); err != nil {
				return err
			}
		}
	}
	if e.fuErr == nil {
		for _, ns := range fuNames {
			e.names.forUpdate(ns...)
		}
		fl, err := forupdate.New(e.db)
		if err != nil {
			return err
		}
		defer fl.Close()
		variants = append(variants, tpVariant{"forupdate Acquire+Release", func(_ context.Context, g int) (func(context.Context, int) error, func(), error) {
			return func(ctx context.Context, k int) error {
				lock, err := fl.Acquire(ctx, fuNames[g][k])
				if err != nil {
					return err
				}
				return lock.Release(ctx)
			}, noop, nil
		}})
	}
	// Warm up: every name once per variant (rowlock creates its rows), and
	// the pool to the goroutines' size.
	for _, v := range variants {
		if _, err := tpSlice(ctx, v, cfg.goroutines, cfg.namesEach, 0); err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
	}
	results := make([]tpResult, len(variants))
	for round := range cfg.slices {
		for j := range variants {
			k := (round + j) % len(variants)
			r, err := tpSlice(ctx, variants[k], cfg.goroutines, cfg.namesEach, cfg.slice)
			if err != nil {
				return fmt.Errorf("%s: %w", variants[k].name, err)
			}
			results[k].ops += r.ops
			results[k].elapsed += r.elapsed
			results[k].lat = append(results[k].lat, r.lat...)
		}
	}
	rate := func(r tpResult) float64 { return float64(r.ops) / r.elapsed.Seconds() }
	// Each library variant beside the raw SQL it is built on: rowlock (0)
	// beside the naive recipe (1), forupdate (4) beside FOR UPDATE (3).
	builtOn := map[int]int{0: 1, 4: 3}
	adv := rate(results[2])
	for i, v := range variants {
		r := results[i]
		vsRaw := "—"
		if base, ok := builtOn[i]; ok {
			vsRaw = ratio(rate(r), rate(results[base]))
		}
		t.add(e.target.name, v.name, fmt.Sprintf("%.0f", rate(r)), dur(r.lat.pct(50)), dur(r.lat.pct(99)),
			vsRaw, ratio(rate(r), adv))
	}
	return nil
}

// tpSlice runs v on g goroutines, each cycling over its names (namesEach
// of them), for d; when d is 0, each goroutine goes over its names once.
func tpSlice(ctx context.Context, v tpVariant, g, namesEach int, d time.Duration) (tpResult, error) {
	runs := make([]func(context.Context, int) error, 0, g)
	for i := range g {
		run, done, err := v.worker(ctx, i)
		if err != nil {
			return tpResult{}, err
		}
		defer done()
		runs = append(runs, run)
	}
	var (
		mu   sync.Mutex
		res  tpResult
		errs []error
		wg   sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	for _, run := range runs {
		wg.Go(func() {
			var lat samples
			var err error
			for k := 0; ; k++ {
				if d == 0 && k == namesEach || d > 0 && !time.Now().Before(deadline) {
					break
				}
				opStart := time.Now()
				if err = run(ctx, k%namesEach); err != nil {
					break
				}
				lat = append(lat, time.Since(opStart))
			}
			mu.Lock()
			res.ops += len(lat)
			res.lat = append(res.lat, lat...)
			if err != nil {
				errs = append(errs, err)
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	return res, errors.Join(errs...)
}
