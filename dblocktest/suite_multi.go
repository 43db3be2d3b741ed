package dblocktest

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/sqllock/sqllock/dblock"
)

// multiRules: AcquireAll's names are the names of Acquire; all or none:
// TryAcquireAll of a set with one name held takes nothing; AcquireAll
// waits for the held one; callers of overlapping sets in any order never
// deadlock; no names and bad names are refused before anything is taken.
func (s *suite) multiRules(t *testing.T) {
	t.Run("all or none", s.multiAllOrNone)
	t.Run("overlapping sets in any order", s.multiNoDeadlock)
	t.Run("bad input", s.multiBadInput)
}

func (s *suite) multiAllOrNone(t *testing.T) {
	ctx := bounded(t)
	a, b := s.lockers(t)
	all, try := s.h.Multi(a)
	base := lockName(t)
	x, y, z := base+"/x", base+"/y", base+"/z"

	m, err := all(ctx, []string{z, x, y, x})
	if err != nil {
		t.Fatalf("AcquireAll = %v", err)
	}
	releaseAtEnd(t, m)
	for _, name := range []string{x, y, z} {
		refused(t, b, ctx, name, "taken by AcquireAll")
	}
	release(t, m)

	held := hold(t, b, ctx, y)
	k, err := try(ctx, []string{x, y, z})
	if err == nil {
		releaseAtEnd(t, k)
		t.Fatal("TryAcquireAll with one name held took the names")
	}
	if !errors.Is(err, dblock.ErrNotAcquired) {
		t.Fatalf("TryAcquireAll with one name held = %v, want dblock.ErrNotAcquired", err)
	}
	for _, name := range []string{x, z} {
		free(t, b, ctx, name, "after a TryAcquireAll that failed")
	}

	waiter := make(chan acquired, 1)
	go func() {
		k, err := all(ctx, []string{x, y, z})
		waiter <- acquired{k, err}
	}()
	t.Cleanup(func() {
		if r, ok := <-waiter; ok && r.lock != nil {
			_ = r.lock.Release(context.Background())
		}
	})
	release(t, held)
	r := await(t, waiter)
	close(waiter)
	if r.err != nil {
		t.Fatalf("waiting AcquireAll after the Release = %v", r.err)
	}
	refused(t, b, ctx, y, "taken by the waiting AcquireAll")
	release(t, r.lock)
	free(t, b, ctx, y, "after the AcquireAll's Release")
}

// multiNoDeadlock: goroutines on two Lockers take overlapping sets of
// three names, each listing them in its own order; all complete, and no
// name is ever held by two at once.
func (s *suite) multiNoDeadlock(t *testing.T) {
	goroutines, rounds := 6, 4
	if testing.Short() {
		goroutines, rounds = 4, 2
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*hangBound)
	defer cancel()
	a, b := s.lockers(t)
	allA, _ := s.h.Multi(a)
	allB, _ := s.h.Multi(b)
	base := lockName(t)
	names := []string{base + "/p", base + "/q", base + "/r"}
	sets := [][]string{
		{names[0], names[1], names[2]},
		{names[2], names[1], names[0]},
		{names[1], names[2]},
		{names[2], names[0]},
	}
	var mu sync.Mutex
	inside := map[string]bool{}
	var wg sync.WaitGroup
	for i := range goroutines {
		wg.Go(func() {
			all := []MultiFunc{allA, allB}[i%2]
			set := sets[i%len(sets)]
			for range rounds {
				k, err := all(ctx, set)
				if err != nil {
					t.Errorf("goroutine %d: AcquireAll(%q) = %v", i, set, err)
					return
				}
				mu.Lock()
				for _, n := range set {
					if inside[n] {
						t.Errorf("%q held by two AcquireAll at once", n)
					}
					inside[n] = true
				}
				mu.Unlock()
				mu.Lock()
				for _, n := range set {
					inside[n] = false
				}
				mu.Unlock()
				if err := k.Release(ctx); err != nil {
					t.Errorf("goroutine %d: Release: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func (s *suite) multiBadInput(t *testing.T) {
	ctx := bounded(t)
	a, b := s.lockers(t)
	all, try := s.h.Multi(a)
	good := lockName(t)
	for _, c := range []struct {
		what  string
		names []string
		want  error
	}{
		{"no names", nil, dblock.ErrInvalidOption},
		{"an empty name among good ones", []string{good, ""}, dblock.ErrInvalidName},
		{"a name not UTF-8 among good ones", []string{good, "dblocktest/\xff"}, dblock.ErrInvalidName},
	} {
		for _, call := range []struct {
			how  string
			take MultiFunc
		}{{"TryAcquireAll", try}, {"AcquireAll", all}} {
			k, err := call.take(ctx, c.names)
			if err == nil {
				releaseAtEnd(t, k)
				t.Fatalf("%s, %s = the lock, want an error wrapping %v", c.what, call.how, c.want)
			}
			if !errors.Is(err, c.want) {
				t.Errorf("%s, %s = %v, want an error wrapping %v", c.what, call.how, err, c.want)
			}
		}
	}
	free(t, b, ctx, good, "after the refused calls")
}
