/*
 * Mutant (crash detection): a contender shortens a marked holder's lease
 * to now + G without waiting for the marker to go (watcher.run calling
 * shortenAll without WatchStore.AwaitMarkerGone). A live holder's lease is cut
 * under it.
 * Caught by: EXCL.
 */
#define CFG_MARKERS
#define MUT_NO_MARKER_CHECK
#define ONLY_EXCL
#include "../sqllock.pml"
