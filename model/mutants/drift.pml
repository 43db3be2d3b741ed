/*
 * Mutant: clocks whose rates differ by up to 20% (the safety margin of
 * 0.9*TTL covers less than 10%). The holder's local deadline then passes
 * after the database has let its lease lapse.
 * Caught by: EXCL.
 */
#define CFG_LEASE
#define MUT_DRIFT
#define ONLY_EXCL
#include "../sqllock.pml"
