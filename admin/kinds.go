package admin

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/sqllock/sqllock/internal/lockinput"
)

// kindSeparator joins a name to the suffix of the rows a lock kind derives
// from it (rowlock's semaphores and read/write locks).
const kindSeparator = lockinput.KindSeparator

// RowKind tells what a row of the lock table is part of.
type RowKind string

// Row kinds.
const (
	// RowLock: a lock of Acquire, or one of the names of AcquireAll.
	RowLock RowKind = "lock"
	// RowPermit: a permit slot of a Semaphore.
	RowPermit RowKind = "permit"
	// RowReader and RowWriter: a reader slot, and the writer row, of a
	// read/write lock (rowlock's Readers and Writers).
	RowReader RowKind = "reader"
	RowWriter RowKind = "writer"
)

// KindOfRow tells what the lock row named row is part of, the name of the
// lock it belongs to (row itself for a RowLock) and, for a permit or a
// reader, its slot: it reads the names rowlock's lock kinds derive (the
// name, U+241F and a suffix), for tools that list the lock table (sqllock
// status).
func KindOfRow(row string) (kind RowKind, name string, slot int) {
	i := strings.LastIndex(row, kindSeparator)
	if i < 0 {
		return RowLock, row, 0
	}
	name, suffix := row[:i], row[i+len(kindSeparator):]
	if suffix == "w" {
		return RowWriter, name, 0
	}
	if suffix == "" {
		return RowLock, row, 0
	}
	n, err := strconv.Atoi(suffix[1:])
	switch {
	case err != nil || n < 0 || strconv.Itoa(n) != suffix[1:]:
		return RowLock, row, 0
	case suffix[0] == 's':
		return RowPermit, name, n
	case suffix[0] == 'r':
		return RowReader, name, n
	}
	return RowLock, row, 0
}

// HeldSemaphore is a semaphore with permits held now.
type HeldSemaphore struct {
	Name string
	// Held is how many permits are held; Limit, how many its holders use
	// (0 if none is recorded: the reaper deleted it as the last permit
	// lapsed).
	Held, Limit int
}

// HeldRWLock is a read/write lock taken now.
type HeldRWLock struct {
	Name string
	// Readers is how many owners hold the read lock.
	Readers int
	// Writer: a writer has the writer row. With no Readers it holds the
	// lock; with some, it waits for them to leave (no new reader gets in
	// meanwhile).
	Writer bool
}

// HeldKinds sums up locks (as Locks lists them) by the semaphores and
// read/write locks their rows belong to, each list in name order, and
// reads the semaphores' limits. Rows that Locks left out (past its limit)
// are not counted.
// Errors: dblock.ErrSchemaMissing, or a driver error.
func (a *Admin) HeldKinds(ctx context.Context, locks []HeldLock) ([]HeldSemaphore, []HeldRWLock, error) {
	if err := lockinput.CheckContext(ctx); err != nil {
		return nil, nil, fmt.Errorf("admin: HeldKinds: %w", err)
	}
	sems, rws := map[string]*HeldSemaphore{}, map[string]*HeldRWLock{}
	for _, k := range locks {
		kind, name, _ := KindOfRow(k.Name)
		switch kind {
		case RowPermit:
			if sems[name] == nil {
				sems[name] = &HeldSemaphore{Name: name}
			}
			sems[name].Held++
		case RowReader, RowWriter:
			if rws[name] == nil {
				rws[name] = &HeldRWLock{Name: name}
			}
			if kind == RowReader {
				rws[name].Readers++
			} else {
				rws[name].Writer = true
			}
		}
	}
	outSems := make([]HeldSemaphore, 0, len(sems))
	for _, s := range sems {
		limit, err := a.ops.SemaphoreLimit(ctx, s.Name)
		if err != nil {
			return nil, nil, err
		}
		s.Limit = limit
		outSems = append(outSems, *s)
	}
	outRWs := make([]HeldRWLock, 0, len(rws))
	for _, rw := range rws {
		outRWs = append(outRWs, *rw)
	}
	slices.SortFunc(outSems, func(a, b HeldSemaphore) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(outRWs, func(a, b HeldRWLock) int { return strings.Compare(a.Name, b.Name) })
	return outSems, outRWs, nil
}
