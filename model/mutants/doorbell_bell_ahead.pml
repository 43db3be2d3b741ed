/*
 * Mutant (MySQL doorbell): myBellOf adds one to the recorded generation
 * whatever the state of its bell, not only when that bell is free. A
 * waiter then waits on the bell after the current one, which the ring
 * for the hold it armed does not release: it is never woken.
 * Caught by: LTL progress_bell (an acceptance cycle).
 */
#define MUT_BELL_AHEAD
#include "../doorbell.pml"
