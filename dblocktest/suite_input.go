package dblocktest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
)

// badInput: each mistaken input, through TryAcquire and Acquire, gets an
// error wrapping the sentinel dblock documents for it, and takes no lock.
func (s *suite) badInput(t *testing.T) {
	valid := func(t *testing.T) string { return lockName(t) }
	cases := []badInput{
		{what: "empty name", name: named(""), want: dblock.ErrInvalidName},
		{what: "name over MaxNameLength bytes", name: named(strings.Repeat("n", dblock.MaxNameLength+1)), want: dblock.ErrInvalidName},
		{what: "name of 10 MB", name: named(strings.Repeat("n", 10<<20)), want: dblock.ErrInvalidName},
		{what: "name not UTF-8", name: named("dblocktest/\xff\xfe"), want: dblock.ErrInvalidName},
		{what: "TTL 0", name: valid, opts: []dblock.Option{dblock.TTL(0)}, want: dblock.ErrInvalidOption},
		{what: "TTL negative", name: valid, opts: []dblock.Option{dblock.TTL(-time.Second)}, want: dblock.ErrInvalidOption},
		{what: "TTL under MinTTL", name: valid, opts: []dblock.Option{dblock.TTL(dblock.MinTTL - 1)}, want: dblock.ErrInvalidOption},
		{what: "MinHold negative", name: valid, opts: []dblock.Option{dblock.MinHold(-time.Nanosecond)}, want: dblock.ErrInvalidOption},
		{what: "note over MaxNoteLength bytes", name: valid, opts: []dblock.Option{dblock.Note(strings.Repeat("n", dblock.MaxNoteLength+1))}, want: dblock.ErrInvalidOption},
		{what: "note not UTF-8", name: valid, opts: []dblock.Option{dblock.Note("bad\xffnote")}, want: dblock.ErrInvalidOption},
		{what: "note with NUL", name: valid, opts: []dblock.Option{dblock.Note("nul\x00note")}, want: dblock.ErrInvalidOption},
		{what: "nil option", name: valid, opts: []dblock.Option{nil}, want: dblock.ErrInvalidOption},
		{what: "owner id empty", name: valid, ctx: owner(""), want: dblock.ErrInvalidOption},
		{what: "owner id over MaxOwnerIDLength bytes", name: valid, ctx: owner(strings.Repeat("o", dblock.MaxOwnerIDLength+1)), want: dblock.ErrInvalidOption},
		{what: "owner id not UTF-8", name: valid, ctx: owner("bad\xffowner"), want: dblock.ErrInvalidOption},
		{what: "owner id with NUL", name: valid, ctx: owner("nul\x00owner"), want: dblock.ErrInvalidOption},
	}
	if !s.h.Fair {
		cases = append(cases, badInput{what: "Fair, which the Harness says is not supported", name: valid,
			opts: []dblock.Option{dblock.Fair()}, want: dblock.ErrInvalidOption})
	}
	for _, c := range cases {
		t.Run(c.what, func(t *testing.T) { s.refuse(t, c) })
	}
}

// badInput is one mistaken call: name (made per test), the context
// (derived from the test's), the options, and the sentinel its error
// must wrap.
type badInput struct {
	what string
	name func(t *testing.T) string
	ctx  func(context.Context) context.Context
	opts []dblock.Option
	want error
}

func (s *suite) refuse(t *testing.T, c badInput) {
	a, b := s.lockers(t)
	name := c.name(t)
	ctx := bounded(t)
	if c.ctx != nil {
		ctx = c.ctx(ctx)
	}
	for _, call := range []struct {
		how  string
		take func(context.Context, string, ...dblock.Option) (dblock.Lock, error)
	}{{"TryAcquire", a.TryAcquire}, {"Acquire", a.Acquire}} {
		k, err := call.take(ctx, name, c.opts...)
		if err == nil {
			releaseAtEnd(t, k)
			t.Fatalf("%s = the lock, want an error wrapping %v", call.how, c.want)
		}
		if !errors.Is(err, c.want) {
			t.Errorf("%s = %v, want an error wrapping %v", call.how, err, c.want)
		}
	}
	if c.want != dblock.ErrInvalidName {
		// Nothing was taken: another owner gets the name at once.
		free(t, b, t.Context(), name, "after the refused calls")
	}
}

// named returns a name maker that gives n.
func named(n string) func(*testing.T) string { return func(*testing.T) string { return n } }

// owner returns a context maker that sets the owner id.
func owner(id string) func(context.Context) context.Context {
	return func(ctx context.Context) context.Context { return dblock.WithOwner(ctx, id) }
}
