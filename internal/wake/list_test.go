package wake

import (
	"slices"
	"testing"
)

type place int64

func (p place) ID() int64 { return int64(p) }

// woken reports whether w has a wake-up pending, and takes it.
func woken(w *Waiter) bool {
	select {
	case <-w.C():
		return true
	default:
		return false
	}
}

// TestFirstIsTheOldestPlace: the waiter that polls is the one with the
// lowest place id, else the first to arrive; a release wakes only it, and
// its leaving wakes the next.
func TestFirstIsTheOldestPlace(t *testing.T) {
	for _, c := range []struct {
		name   string
		places []int64 // per waiter in arrival order; 0: none
		first  int
	}{
		{"no places: arrival order", []int64{0, 0, 0}, 0},
		{"a place beats arrival", []int64{0, 0, 7}, 2},
		{"the lowest place", []int64{9, 3, 5}, 1},
		{"queued again at the tail", []int64{12, 0, 4}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := NewList(nil)
			var ws []*Waiter
			for _, p := range c.places {
				w := l.Add("n")
				if p != 0 {
					l.SetPlace(w, place(p))
				}
				ws = append(ws, w)
			}
			for i, w := range ws {
				if got := l.IsFirst("n", w); got != (i == c.first) {
					t.Errorf("IsFirst(waiter %d) = %v, want %v", i, got, i == c.first)
				}
			}
			l.WakeFirst("n")
			for i, w := range ws {
				if got := woken(w); got != (i == c.first) {
					t.Errorf("after WakeFirst, waiter %d woken = %v, want %v", i, got, i == c.first)
				}
			}
			l.Remove("n", ws[c.first])
			rest := slices.Delete(slices.Clone(ws), c.first, c.first+1)
			n := 0
			for _, w := range rest {
				if woken(w) {
					n++
					if !l.IsFirst("n", w) {
						t.Error("the first's leaving woke a waiter that is not the new first")
					}
				}
			}
			if n != 1 {
				t.Errorf("the first's leaving woke %d waiters, want 1", n)
			}
		})
	}
}

// TestBusyInOrder: the list says busy when it gains its first waiter and
// idle when it loses its last, once each, also for a waiter of several
// names.
func TestBusyInOrder(t *testing.T) {
	var got []bool
	l := NewList(func(busy bool) { got = append(got, busy) })
	a := l.Add("x")
	b := NewWaiter()
	l.AddUnder([]string{"y", "z"}, b)
	if !l.FirstOfAny([]string{"x", "z"}, b) || l.FirstOfAny([]string{"x"}, b) {
		t.Error("FirstOfAny: b is the first of z only")
	}
	l.Remove("x", a)
	l.RemoveUnder([]string{"y", "z"}, b)
	if want := []bool{true, false}; !slices.Equal(got, want) {
		t.Errorf("busy calls %v, want %v", got, want)
	}
}
