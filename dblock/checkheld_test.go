package dblock_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/rowlock"
)

// unfenced is a Lock that can prove nothing in a transaction.
type unfenced struct{ dblock.Lock }

// TestCheckHeld: one call fences writes for every kind of lock that can:
// a rowlock lock in any transaction on its database, a forupdate lock in
// its own; it says which cannot (ErrCannotFence) and which are gone
// (ErrLockLost after a loss, ErrReleased after Release).
func TestCheckHeld(t *testing.T) {
	for _, tg := range testdb.Targets(t) {
		kinds := []struct {
			name string
			new  func(t *testing.T) dblock.Locker
			// own is the transaction a held lock fences in, nil for any.
			own func(dblock.Lock) *sql.Tx
		}{
			{"rowlock", func(t *testing.T) dblock.Locker {
				l, err := rowlock.New(tg.DB)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = l.Close() })
				return l
			}, nil},
			{"forupdate", func(t *testing.T) dblock.Locker {
				l, err := forupdate.New(tg.DB)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = l.Close() })
				return l
			}, func(k dblock.Lock) *sql.Tx { return k.(*forupdate.Lock).Tx() }},
		}
		for _, kd := range kinds {
			t.Run(tg.Name+"/"+kd.name, func(t *testing.T) {
				ctx := t.Context()
				k, err := kd.new(t).TryAcquire(ctx, testdb.Name(t))
				if err != nil {
					t.Fatal(err)
				}
				other, err := tg.DB.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = other.Rollback() }()
				if kd.own == nil {
					if err := dblock.CheckHeld(ctx, k, other); err != nil {
						t.Fatalf("CheckHeld of a held lock: %v", err)
					}
				} else {
					if err := dblock.CheckHeld(ctx, k, kd.own(k)); err != nil {
						t.Fatalf("CheckHeld of a held lock in its own transaction: %v", err)
					}
					if err := dblock.CheckHeld(ctx, k, other); !errors.Is(err, dblock.ErrCannotFence) {
						t.Fatalf("CheckHeld in another transaction: %v, want ErrCannotFence", err)
					}
				}
				if err := dblock.CheckHeld(ctx, unfenced{k}, other); !errors.Is(err, dblock.ErrCannotFence) {
					t.Fatalf("CheckHeld of a lock that cannot fence: %v, want ErrCannotFence", err)
				}
				if err := dblock.CheckHeld(ctx, k, nil); !errors.Is(err, dblock.ErrInvalidOption) {
					t.Fatalf("CheckHeld with a nil transaction: %v, want ErrInvalidOption", err)
				}
				// A rowlock check keeps the row from changing until its
				// transaction ends: the release would wait for it.
				if err := other.Rollback(); err != nil {
					t.Fatal(err)
				}
				after, err := tg.DB.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = after.Rollback() }()
				tx := after
				if kd.own != nil {
					tx = kd.own(k)
				}
				if err := k.Release(context.Background()); err != nil {
					t.Fatal(err)
				}
				if err := dblock.CheckHeld(ctx, k, tx); !errors.Is(err, dblock.ErrLockLost) && !errors.Is(err, dblock.ErrReleased) {
					t.Fatalf("CheckHeld after Release: %v, want ErrLockLost or ErrReleased", err)
				}
			})
		}
	}
}
