/*
 * Mutant (failover): timeline 1 recorded by the first take that sees it
 * (pgInsert's pgRecordTimeline) instead of by migration 6. When the
 * failover loses that take together with its record, the promoted server
 * has no timeline below 2 on record (pgNoEarlierTimeline): a contender
 * inserts the fresh row at once while the lost take's holder believes.
 * Why migration 6 records the timeline it runs on.
 * Caught by: EXCL.
 */
#define CFG_FAILOVER
#define MUT_FAILOVER_FIRST_RECORD
#define ONLY_EXCL
#include "../sqllock.pml"
