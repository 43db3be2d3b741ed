package forupdate

import (
	"fmt"
	"strconv"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/lockkit"
	"github.com/sqllock/sqllock/internal/metrics"
)

// kindSeparator joins a name to the suffix of the rows a lock kind derives
// from it: U+241F SYMBOL FOR UNIT SEPARATOR, as package rowlock uses
// (lockinput.KindSeparator). Names that contain it are refused
// (lockinput.ValidateCallerName): they could name another name's rows.
const kindSeparator = lockinput.KindSeparator

// kind is what an acquisition takes.
type kind int

const (
	kindLock   kind = iota // the name's row, exclusively (Locker.Acquire)
	kindRead               // a read/write lock's row, shared (Readers)
	kindWrite              // a read/write lock's row, exclusively (Writers)
	kindPermit             // one slot row of a semaphore (Semaphore)
)

// request is one acquisition: its kind, the name as the caller gave it,
// and a semaphore's limit.
type request struct {
	kind  kind
	name  string
	limit int
}

// key is the name under which the Locker registers the request's holds,
// for reentrancy: the row locked, or for a semaphore the name of its
// limit record, which is also the prefix of its slots' rows. Each kind has
// its own namespace.
func (r request) key() string {
	switch r.kind {
	case kindRead, kindWrite:
		return rwRow(r.name)
	case kindPermit:
		return semKey(r.name)
	}
	return r.name
}

// rwRow is the row of read/write lock name.
func rwRow(name string) string { return name + kindSeparator + "rw" }

// semKey names semaphore name's limit record (in dblock_semaphores, where
// rowlock's semaphores record theirs under their plain names).
func semKey(name string) string { return name + kindSeparator + "fu" }

// slotRow is the row of slot i of semaphore name.
func slotRow(name string, i int) string { return name + kindSeparator + "s" + strconv.Itoa(i) }

// lockType is the lock type the request's measurements carry.
func (r request) lockType() metrics.LockType {
	switch r.kind {
	case kindRead:
		return metrics.TypeRead
	case kindWrite:
		return metrics.TypeWrite
	case kindPermit:
		return metrics.TypeSemaphore
	}
	return metrics.TypeMutex
}

// longest is the longest name the request derives from its name.
func (r request) longest() string {
	switch r.kind {
	case kindRead, kindWrite:
		return rwRow(r.name)
	case kindPermit:
		return slotRow(r.name, r.limit-1)
	}
	return r.name
}

func (r request) validate() error {
	if err := lockinput.ValidateCallerName(r.name); err != nil {
		return err
	}
	if n := len(r.longest()); n > dblock.MaxNameLength {
		return &dblock.NameError{Name: r.name, Reason: fmt.Sprintf("too long for this lock kind: its rows' names would exceed %d bytes (at most %d bytes here)",
			dblock.MaxNameLength, dblock.MaxNameLength-(n-len(r.name)))}
	}
	return nil
}

// admits tells whether h, held by the owner of an acquisition of req,
// may be re-entered by it: a reader may not become a writer
// (dblock.ErrUpgrade), and a permit is re-entered only under the limit
// it was taken with (dblock.ErrLimitMismatch). A writer may read.
// Called with l.mu held.
func (h *hold) admits(req request) error {
	switch {
	case req.kind == kindWrite && h.share:
		return fmt.Errorf("forupdate: %q: %w", req.name, dblock.ErrUpgrade)
	case req.kind == kindPermit && req.limit != h.limit:
		return fmt.Errorf("forupdate: semaphore %q: %w: asked for %d permits, this owner holds one of %d",
			req.name, dblock.ErrLimitMismatch, req.limit, h.limit)
	}
	return nil
}

// asLock keeps a nil *Lock from becoming a non-nil dblock.Lock.
func asLock(k *Lock, err error) (dblock.Lock, error) {
	if err != nil {
		return nil, err
	}
	return k, nil
}

// The kinds refuse what the Locker refuses (see checkOptions), and code
// built on them (cronguard, gocronlock, leader) asks them once when it is
// built.
func init() {
	refuses := lockkit.Capabilities{CheckOptions: checkOptions}
	lockkit.Declare((*semaphore)(nil), refuses)
	lockkit.Declare((*rwLocker)(nil), refuses)
}
