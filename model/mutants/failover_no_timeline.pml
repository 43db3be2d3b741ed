/*
 * Mutant (failover): tokens without the timeline in their high bits
 * (GREATEST(token + 1, 1) instead of GREATEST(token + 1, base + 1)). The
 * promoted standby's rows and stripe counters lack the last tokens drawn,
 * and the new primary draws them again.
 * Caught by: the token assertion in issued().
 */
#define CFG_FAILOVER
#define MUT_FAILOVER_NO_TIMELINE
#include "../sqllock.pml"
