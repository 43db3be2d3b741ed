/*
 * Mutant: a renewal sets expires_at = now + its own TTL instead of
 * GREATEST(expires_at, now + ttl): the bug fixed by ecd9c46 ("renewals
 * never shorten a lease shared by reentrant holds"). A short inner hold's
 * renewal cuts the lease of the longer outer hold, whose holder still
 * believes it holds the lock when another owner takes it over.
 * Caught by: EXCL (two processes believe they hold one name).
 */
#define CFG_LEASE
#define MUT_RENEW_SHORTENS
#define ONLY_EXCL
#include "../sqllock.pml"
