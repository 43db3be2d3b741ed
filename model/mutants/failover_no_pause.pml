/*
 * Mutant (failover): no failover pause (WithFailoverPause(0)). The promoted standby lacks the
 * last commits of the primary that died: a take, a renewal. A contender
 * takes the lock on the new primary at once, while the holder whose take
 * or renewal was lost still believes it holds it, until its local
 * deadline.
 * Caught by: EXCL.
 */
#define CFG_FAILOVER
#define MUT_FAILOVER_NO_PAUSE
#define ONLY_EXCL
#include "../sqllock.pml"
