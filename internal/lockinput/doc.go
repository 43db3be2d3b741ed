// Package lockinput checks what callers hand a lock implementation (names,
// options, contexts, owners) and makes owners. It imports no database
// driver, so that a Locker without a database (dblocktest's in-memory one)
// validates exactly as rowlock and forupdate do without pulling one in;
// package lockkit has the helpers that need the drivers' error types.
package lockinput
