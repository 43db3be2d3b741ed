/*
 * Mutant (MySQL doorbell): the code as it stands (see README, Findings).
 * A waiter's watcher declines a bell generation it has seen rung
 * (watcher.watch, the rung map), and the waiter then polls with no watch
 * on its holder's marker (waiting.watchBlocker returns after the bell
 * target). A session that ends frees its bells and its marker one after
 * the other; a waiter granted the bell before the marker is freed counts
 * a ring that never happened, and every later wait on that holder reads
 * the same generation (the dead session records no other) and is
 * declined: the holder's death is never noticed, and its lease must run
 * out (the model has no lease lapse without a shortening, so the waiter
 * waits for ever).
 * Caught by: LTL progress_bell (an acceptance cycle).
 */
#define MUT_STALE_POLLS
#include "../doorbell.pml"
