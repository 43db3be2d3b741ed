package forupdate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/lockkit"
)

// MaxSemaphoreLimit is the largest limit of a Semaphore.
const MaxSemaphoreLimit = 1000

// semWaitSlice bounds one wait of a semaphore's waiter for the slot it
// chose: then it looks at every slot again, and chooses again.
const semWaitSlice = time.Second

// semaphore is what Locker.Semaphore returns.
type semaphore struct {
	l     *Locker
	limit int
}

var _ dblock.Semaphore = (*semaphore)(nil)

// Semaphore returns the semaphores of limit permits per name (1 to
// MaxSemaphoreLimit): counting semaphores across processes, whose Acquire
// and TryAcquire return a *Permit. It meets dblock.Semaphore's contract.
// The value is over the Locker and costs nothing to keep. Semaphore "x" is
// neither the lock "x" of Locker.Acquire nor package rowlock's semaphore
// "x". Errors: dblock.ErrInvalidOption for a limit out of range.
//
// Slots: a semaphore of limit N is N rows of the lock table (its name,
// U+241F, "s" and the slot number), created on first use, missing
// ones only (INSERT ... ON CONFLICT DO NOTHING, INSERT IGNORE: a row's
// primary key makes it one whoever creates it). A permit is a slot row
// locked FOR UPDATE; a holder whose process or connection dies frees its
// slot at once, as a lock's holder does. An acquisition takes any free
// slot with one statement, SELECT ... FOR UPDATE SKIP LOCKED LIMIT 1
// (PostgreSQL 9.5+, MySQL 8.0+, MariaDB 10.6+), which never waits for a
// held slot.
//
// Limit: the limit in use for a name is recorded in the table
// dblock_semaphores (migration 3), under the name, U+241F and
// "fu". Every holder and waiter keeps that record locked shared for as
// long as it holds or awaits a permit, and checks it before taking a
// slot; the limit changes only by locking the record FOR UPDATE NOWAIT,
// which succeeds only while no one holds or awaits a permit of the name.
// So asking with another limit while anyone does fails at once with
// dblock.ErrLimitMismatch, and the limit never changes under holders.
//
// Waiting: SKIP LOCKED cannot wait. When every slot is held, Acquire
// waits with FOR UPDATE for one slot chosen at random, at most a second
// (semWaitSlice), then looks at every slot again. It wakes at once when
// its slot's holder leaves (the database hands the slot to the first of
// its waiters) and within a second when another slot frees. There is no
// queue across slots: a newcomer may take a slot that freed while the
// waiters were waiting for others. dblock.Fair is refused.
//
// Reentrancy: an owner holds at most one permit of a name, through one
// Locker: acquiring again with a context whose owner holds one re-enters
// it, sharing its slot, transaction and token.
//
// Fencing tokens come from the Locker's counter (see the package doc),
// drawn once the slot is locked: a permit's token is larger than the
// token of every permit of the name released before it was taken, so it
// grows strictly from holder to holder of a slot; permits held at once
// have distinct tokens.
//
// Errors of Acquire and TryAcquire: dblock.ErrLimitMismatch when name's
// holders use another limit; dblock.ErrInvalidName (a name too long to
// derive its slots' names from, too), dblock.ErrInvalidOption,
// ErrNoConnection, dblock.ErrSchemaMissing (migration 3 has not run), or a
// driver error; when ctx ends first, dblock.ErrNotAcquired joined with
// ctx.Err(). Options as Locker.Acquire.
func (l *Locker) Semaphore(limit int) (dblock.Semaphore, error) {
	if err := lockinput.CheckLimit(limit, MaxSemaphoreLimit); err != nil {
		return nil, fmt.Errorf("forupdate: %w", err)
	}
	return &semaphore{l: l, limit: limit}, nil
}

// Limit is the number of permits per name.
func (s *semaphore) Limit() int { return s.limit }

// Acquire waits until it holds a permit of name or ctx ends (the error
// then joins dblock.ErrNotAcquired and ctx.Err()). The lock it returns is
// a *Permit. Options as Locker.Acquire. Errors: dblock.ErrLimitMismatch
// when name's holders use another limit; dblock.ErrInvalidName (a name too
// long to derive its slots' names from, too), dblock.ErrInvalidOption,
// ErrNoConnection, dblock.ErrSchemaMissing (migration 3 has not run), or a
// driver error.
func (s *semaphore) Acquire(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
	return asPermit(s.l.acquire(ctx, request{kind: kindPermit, name: name, limit: s.limit}, opts, true))
}

// TryAcquire takes a permit of name if one is free (or the owner in ctx
// holds one), and returns dblock.ErrNotAcquired at once otherwise. Other
// errors as Acquire.
func (s *semaphore) TryAcquire(ctx context.Context, name string, opts ...dblock.Option) (dblock.Lock, error) {
	return asPermit(s.l.acquire(ctx, request{kind: kindPermit, name: name, limit: s.limit}, opts, false))
}

func asPermit(k *Lock, err error) (dblock.Lock, error) {
	if err != nil {
		return nil, err
	}
	return &Permit{Lock: k}, nil
}

// Permit is one permit of a semaphore (Locker.Semaphore): a *Lock (its Tx, Token, Release
// and the rest) whose Name is the semaphore's, held on one of its slots.
type Permit struct {
	*Lock
}

// Slot is the permit's slot, 0 to the limit - 1: holders at the same time
// have different slots.
func (p *Permit) Slot() int { return p.h.slot }

// semLocking is one acquisition's attempts at taking a slot, each in a
// transaction of its own, on the connection it took for them.
type semLocking struct {
	l     *Locker
	key   holdKey // key.name: the limit record's
	req   request
	call  lockCall
	slots []string
	// clean is false when the connection's state is uncertain.
	clean bool
	// setups counts records and slots created or changed: more than a few
	// means something keeps deleting them.
	setups int
	draws  int // attempts started over after contention drawing a token
}

// semStep is what follows an attempt.
type semStep int

const (
	semDone   semStep = iota // held, or failed
	semLook                  // look for a free slot again
	semRecord                // the limit is not recorded, or differs
	semSlots                 // no slot was free: slots are missing, or all held
)

// lock makes attempts until a slot is locked, the context ends, or
// (TryAcquire) every slot is held.
func (s *semLocking) lock(ctx context.Context) (*hold, error) {
	s.slots = make([]string, s.req.limit)
	for i := range s.slots {
		s.slots[i] = slotRow(s.req.name, i)
	}
	waitOn := -1
	for {
		h, step, err := s.attempt(ctx, waitOn)
		waitOn = -1
		switch step {
		case semDone:
			return h, err
		case semLook:
			continue
		case semSlots:
			missing, err := s.missing(ctx)
			if err != nil {
				return nil, s.setUpError(ctx, err)
			}
			if len(missing) == 0 {
				// Every slot is held.
				if !s.call.wait {
					return nil, dblock.ErrNotAcquired
				}
				waitOn = rand.IntN(len(s.slots))
				continue
			}
		}
		if s.setups == maxRowCreations*2 {
			return nil, fmt.Errorf("forupdate: semaphore %q: its rows keep disappearing (rows of %s must never be deleted)", s.req.name, s.l.cfg.table)
		}
		s.setups++
		if err := s.setUp(ctx, step); err != nil {
			return nil, err
		}
	}
}

// attempt begins a transaction, checks the limit in it and takes a free
// slot, or with waitOn ≥ 0 waits (bounded) for that slot.
//
// Its complexity (over 15) is one transaction's outcomes (taken, waited,
// none free, limit changed, failed, interrupted), each deciding the next
// step.
func (s *semLocking) attempt(ctx context.Context, waitOn int) (h *hold, step semStep, err error) {
	l, sq := s.l, s.l.d.semSQL()
	txCtx, txCancel := context.WithCancel(context.WithoutCancel(ctx))
	tx, err := s.call.conn.BeginTx(txCtx, l.d.txOptions())
	if err != nil {
		txCancel()
		s.clean = false
		return nil, semDone, s.error(ctx, err)
	}
	c := s.call
	c.tx = tx
	var recorded int
	err = l.d.queryRow(ctx, tx, sq.readShared, s.key.name).Scan(&recorded)
	found := err == nil
	if errors.Is(err, sql.ErrNoRows) {
		err = nil
	}
	var (
		token       int64
		slot        = waitOn
		took        bool
		interrupted bool
	)
	switch {
	case err != nil || !found || recorded != s.req.limit:
	case waitOn < 0:
		slot, token, took, err = s.take(ctx, c)
		if took {
			c.name = s.slots[slot]
			token, err = l.d.semTook(ctx, c, token)
		}
	default:
		c.name, c.wait, c.contended, c.bound = s.slots[waitOn], true, true, semWaitSlice
		token, took, interrupted, err = l.d.lock(ctx, c)
		s.call.contended = true // the session's lock wait timeout may be left bounded
	}
	if err == nil && took && !interrupted {
		s.clean = true
		return newHold(l, s.key, s.req, slot, c, token, txCancel), semDone, nil
	}
	rbErr := tx.Rollback()
	txCancel()
	s.clean = rbErr == nil || errors.Is(rbErr, sql.ErrTxDone)
	switch {
	case interrupted || ctx.Err() != nil:
		return nil, semDone, errors.Join(dblock.ErrNotAcquired, ctx.Err())
	case err != nil:
		step, err := s.failed(ctx, err, rbErr)
		return nil, step, err
	case !s.clean:
		return nil, semDone, s.error(ctx, rbErr)
	case !found || recorded != s.req.limit:
		return nil, semRecord, nil
	}
	// None free, or the slot waited for is missing.
	return nil, semSlots, nil
}

// take locks a free slot, if any, and returns its index and token.
func (s *semLocking) take(ctx context.Context, c lockCall) (slot int, token int64, took bool, err error) {
	sq := s.l.d.semSQL()
	args := s.slotArgs()
	if sq.ttlArg {
		args = append([]any{pgIdleTimeout(c.ttl)}, args...)
	}
	if sq.pauseArg {
		args = append(args, sq.pauseUS)
	}
	var name string
	err = s.l.d.queryRow(ctx, c.tx, sq.take(len(s.slots)), args...).Scan(&name, &token)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, false, nil
	}
	if err != nil {
		return 0, 0, false, err
	}
	for i, n := range s.slots {
		if n == name {
			return i, token, true, nil
		}
	}
	return 0, 0, false, fmt.Errorf("forupdate: semaphore %q: took unknown slot %q", s.req.name, name)
}

// failed tells what follows an attempt whose statement failed with err.
func (s *semLocking) failed(ctx context.Context, err, rbErr error) (semStep, error) {
	if pe := (*pausedError)(nil); errors.As(err, &pe) && s.clean {
		// The failover pause: nobody may hold a permit yet.
		if again, err := waitPause(ctx, s.call.wait, pe.left); !again {
			return semDone, err
		}
		return semLook, nil
	}
	if errors.Is(err, errDrawContention) && s.clean && s.draws < maxDrawRetries {
		s.draws++
		return semLook, nil
	}
	switch lockkit.ClassifyError(err) {
	case lockkit.ClassLockUnavailable, lockkit.ClassContention:
		// A bounded wait ran out, or a deadlock: look again.
		if !s.clean {
			return semDone, s.error(ctx, rbErr)
		}
		if !s.call.wait {
			return semDone, dblock.ErrNotAcquired
		}
		return semLook, nil
	}
	return semDone, s.error(ctx, err)
}

func (s *semLocking) error(ctx context.Context, err error) error {
	return s.l.acquireError(ctx, "semaphore "+s.req.name, err)
}
