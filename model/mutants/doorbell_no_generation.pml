/*
 * Mutant (MySQL doorbell): one bell per session, released and taken again
 * at each ring, instead of a new generation per ring. A ring between the
 * waiter's arming and its GET_LOCK on the bell, with the bell taken again
 * before that GET_LOCK, leaves the waiter blocked on a held bell while the
 * lock is free: the lost wake-up the generations prevent.
 * Caught by: LTL progress_bell (an acceptance cycle: the waiter blocked for
 * good).
 */
#define MUT_NO_GENERATION
#include "../doorbell.pml"
