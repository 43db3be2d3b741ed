// Package queue implements the waiter table behind dblock.Fair (package
// queue, at the module's top, is its public face; its doc says the FIFO
// rule). Besides what users see, it gives rowlock the engine's parts:
// EnqueueAs (the waiter's lock type, for the metric), Rekey (a waiter's
// new session marker), Blocker (the oldest older waiter, whose session
// the watcher watches) and Shorten (passing over a waiter whose session
// has ended).
package queue
