/*
 * Mutant (failover): the rule as e0c1ccb (branch failover) has it: the
 * pause holds takeovers and fresh inserts, never a re-entry by the row's
 * owner into its live lease (found by this model). The promoted server
 * brings back a row whose release it lost; its owner's next Acquire (an
 * owner set with dblock.WithOwner, or a Lock's Context) re-enters it, while
 * the holder that took the lock after that release, lost too, still
 * believes it holds it.
 * Caught by: EXCL.
 */
#define CFG_FAILOVER
#define MUT_FAILOVER_REENTRY
#define ONLY_EXCL
#include "../sqllock.pml"
