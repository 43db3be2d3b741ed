package dblock

// Semaphore hands out, for each name, at most Limit permits at a time:
// a counting semaphore across processes. It is a Locker: Acquire waits
// for a permit of name and TryAcquire takes one if one is free, so Do and
// the packages built on a Locker work with it. rowlock, forupdate and
// dblocktest implement it; dblocktest.TestLocker checks the contract.
//
// The contract, beyond Locker's:
//   - at most Limit owners hold a permit of a name at once; each permit
//     is on its own slot, 0 to Limit-1, and the Lock Acquire returns has a
//     Slot() int method that tells which;
//   - an owner holds at most one permit of a name: acquiring again with
//     a context that carries its owner (the permit's Context) re-enters
//     that permit;
//   - the holders of a name agree on its limit: asking with another limit
//     while others hold permits fails at once with ErrLimitMismatch; the
//     limit changes only while no one else holds a permit;
//   - a permit's token grows strictly from holder to holder of its slot
//     (implementations may do more: forupdate's grow per name).
//
// Fair and MinHold are honoured or refused as by the implementation's
// Locker.
type Semaphore interface {
	Locker
	// Limit is the number of permits per name.
	Limit() int
}

// RWLocker gives read/write locks: Readers take shared holds of a name,
// Writers exclusive ones. A name held by a writer has no other holder,
// reader or writer; held by readers, it admits more readers. Both sides
// are Lockers. rowlock, forupdate and dblocktest implement it;
// dblocktest.TestLocker checks the contract.
//
// The contract, beyond Locker's for each side:
//   - reentrancy, by owner: a writer may read (the read re-enters its
//     write hold) and write again; a reader may read again, even while a
//     writer waits for it; a reader that asks to write gets ErrUpgrade at
//     once, holding nothing new (waiting would deadlock on itself);
//   - tokens: a writer's token is above every token handed out for the
//     name before it, read or write; a reader's is at least the last
//     writer's and below the next writer's (rowlock gives readers the
//     last writer's token; forupdate on PostgreSQL and MariaDB draws one
//     of their own);
//   - whether new readers wait behind a waiting writer is the
//     implementation's policy, documented with it (rowlock and dblocktest:
//     always; forupdate: on InnoDB, not on PostgreSQL).
type RWLocker interface {
	// Readers is the shared side.
	Readers() Locker
	// Writers is the exclusive side.
	Writers() Locker
}
