/*
 * Mutant (crash detection): the holder's session deadline at 1.1*G
 * instead of 0.9*G after the last successful heartbeat was sent
 * (session.markerDeadline).
 * A contender that finds the marker gone shortens the lease to now + G and
 * takes over while the holder, whose session died without its knowing,
 * still believes it holds the lock.
 * Caught by: EXCL.
 */
#define CFG_MARKERS
#define MUT_SESSION_DEADLINE
#define ONLY_EXCL
#include "../sqllock.pml"
