/*
 * Mutant: the fencing token is drawn before the unique check is won (a
 * nextval() in the INSERT's VALUES, or a SELECT nextval first), as the
 * naive recipe does and DESIGN.md warns against. A contender that drew
 * early and was descheduled inserts after a later one has come, gone and
 * been swept: its token is smaller.
 * Caught by: the token assertion in issued() (tokens strictly increase per
 * name).
 */
#define CFG_LEASE
#define MUT_EARLY_TOKEN
#include "../sqllock.pml"
