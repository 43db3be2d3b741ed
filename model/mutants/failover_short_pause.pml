/*
 * Mutant (failover): a pause P shorter than a holder's belief (as if
 * Locker.belief did not cap it at P): TTL - 1 tick. A holder whose last
 * renewal was sent just before the primary died believes for up to 0.9 TTL
 * after it; the pause ends first.
 * Caught by: EXCL.
 */
#define CFG_FAILOVER
#define MUT_FAILOVER_SHORT_PAUSE
#define ONLY_EXCL
#include "../sqllock.pml"
