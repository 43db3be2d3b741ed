/*
 * Mutant (MySQL doorbell): the waiter reads the holder session's bell
 * generation after arming the row instead of in the same statement as the
 * row, before arming. A release and its ring between the arming and the
 * read leave the waiter blocked on the new generation, which stays held.
 * Caught by: LTL progress_bell (an acceptance cycle).
 */
#define MUT_ARM_FIRST
#include "../doorbell.pml"
