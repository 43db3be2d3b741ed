/*
 * Mutant: the waiter of a Locker that polls is the one that arrived first,
 * not the one with the lowest ticket id: the bug fixed by 9fb0cec ("the
 * waiter that polls is the local head of the fair queue"). Two waiters of
 * one Locker enqueue in the other order than they arrived; the head of the
 * queue sleeps while the later one polls and is refused, forever (the idle
 * recheck is not modelled: the tests set it to an hour).
 * Caught by: LTL progress_fair (an acceptance cycle under weak fairness).
 */
#define CFG_FAIRWAKE
#define MUT_ARRIVAL_ORDER
#include "../sqllock.pml"
