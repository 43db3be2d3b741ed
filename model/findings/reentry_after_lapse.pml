/*
 * Finding (not a mutant: today's code). pgTake and myTake let the owner of
 * a row whose hold_count is still > 0 take it when its lease has lapsed,
 * without the head-of-line check:
 *   WHERE (lapsed AND NOT EXISTS older live waiter)
 *      OR (hold_count > 0 AND same owner)        -- also when lapsed
 * and SET then takes it over (token + 1) because it is lapsed. A row keeps
 * a hold count after an acquire whose response was lost, or a release that
 * failed; the owner's next Acquire then passes live fair waiters. Mutual
 * exclusion and tokens are unaffected.
 * STRICT_FAIR asserts the head-of-line rule at every takeover; this
 * configuration (the queue with lost responses) reaches a violation.
 * model/check reports whether it still does. A fix in SQL: re-enter only
 * while the lease is live (expires_at > now in the second disjunct).
 */
#define CFG_X
#define NN 1
#define QUEUE
#define FAULTS 1
#define MAXTOK 2
#define STRICT_FAIR
#include "../sqllock.pml"
