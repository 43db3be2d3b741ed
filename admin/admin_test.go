package admin_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sqllock/sqllock/admin"
	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
)

// TestListAndRevoke lists a held lock through Locks and Held, revokes it,
// and finds it free: the holder learns of the loss at its next Refresh,
// and the next holder's token is larger.
func TestListAndRevoke(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			l, a := newLocker(t, tg), newAdmin(t, tg)
			name := testdb.Name(t)
			k, err := l.Acquire(ctx, name, dblock.TTL(time.Minute), dblock.Note("admin test"))
			if err != nil {
				t.Fatal(err)
			}
			h, ok, err := a.Held(ctx, name)
			owner := k.(interface{ Owner() dblock.Owner }).Owner()
			if err != nil || !ok || h.Token != k.Token() || h.OwnerID != owner.ID || h.Note != "admin test" || h.HoldCount != 1 || h.ExpiresIn <= 0 {
				t.Fatalf("Held = %+v, %v, %v; want the lock with token %d, owner %s", h, ok, err, k.Token(), owner.ID)
			}
			locks, err := a.Locks(ctx, 10000)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(locks, func(x admin.HeldLock) bool { return x.Name == name && x.Token == h.Token }) {
				t.Errorf("Locks does not list %q", name)
			}
			revoked, err := a.Revoke(ctx, name)
			if err != nil || !revoked {
				t.Fatalf("Revoke = %v, %v; want true", revoked, err)
			}
			if _, ok, err := a.Held(ctx, name); err != nil || ok {
				t.Errorf("Held after Revoke = %v, %v; want free", ok, err)
			}
			if err := k.Refresh(ctx); !errors.Is(err, dblock.ErrLockLost) {
				t.Errorf("the holder's Refresh after Revoke = %v, want ErrLockLost", err)
			}
			next, err := l.TryAcquire(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			defer release(t, next)
			if next.Token() <= k.Token() {
				t.Errorf("next token %d, want above the revoked %d", next.Token(), k.Token())
			}
			if revoked, err := a.Revoke(ctx, testdb.Name(t)+"-never-taken"); err != nil || revoked {
				t.Errorf("Revoke of a free name = %v, %v; want false", revoked, err)
			}
		})
	}
}

// TestBadInput: typed errors, nothing done.
func TestBadInput(t *testing.T) {
	if _, err := admin.New(nil); !errors.Is(err, dblock.ErrInvalidDB) {
		t.Errorf("New(nil) = %v, want ErrInvalidDB", err)
	}
	tg := testdb.AllTargets(t)[0]
	if _, err := admin.New(tg.DB, nil); !errors.Is(err, dblock.ErrInvalidOption) {
		t.Errorf("New with a nil option = %v, want ErrInvalidOption", err)
	}
	if _, err := admin.New(tg.DB, admin.WithDialect("oracle")); !errors.Is(err, dblock.ErrUnknownDialect) {
		t.Errorf("New with dialect oracle = %v, want ErrUnknownDialect", err)
	}
	a := newAdmin(t, tg)
	ctx := t.Context()
	for _, c := range []struct {
		what string
		err  error
		want error
	}{
		{"Locks(0)", second(a.Locks(ctx, 0)), dblock.ErrInvalidOption},
		{"Held(\"\")", third(a.Held(ctx, "")), dblock.ErrInvalidName},
		{"Revoke(\"\")", second(a.Revoke(ctx, "")), dblock.ErrInvalidName},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s = %v, want %v", c.what, c.err, c.want)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func third[T, U any](_ T, _ U, err error) error { return err }
