/*
 * Mutant: the owner of a row that still counts holds (an acquire whose
 * response was lost, a release that failed) takes it over once its lease
 * has lapsed, without the head-of-line check: the re-entry disjunct of
 * pgTake / myTake without "expires_at > now". The model found this in the
 * code; b7fa91b fixed it ("an owner re-enters only while the lease is
 * live").
 * Caught by: the head-of-line assertion in take().
 */
#define CFG_QUEUEFAULTS
#define MUT_REENTRY_AFTER_LAPSE
#include "../sqllock.pml"
