/*
 * Mutant (MySQL, the queued flag of migration 4): a fair waiter queues
 * without setting queued on the name's row first. An unqueued contender's
 * myTakeFast then takes a lapsed row past a live fair waiter, without the
 * head-of-line subquery.
 * Caught by: the head-of-line assertion in take().
 */
#define CFG_QUEUEFAULTS
#define MUT_NO_MARK_QUEUED
#include "../sqllock.pml"
