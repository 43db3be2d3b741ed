/*
 * Mutant (crash detection, CRASH-DESIGN.md): a contender shortens a marked
 * holder's lease to now + G without checking that the marker is gone. A
 * live holder's lease is cut under it.
 * Caught by: EXCL.
 */
#define CFG_MARKERS
#define MUT_NO_MARKER_CHECK
#define ONLY_EXCL
#include "../sqllock.pml"
