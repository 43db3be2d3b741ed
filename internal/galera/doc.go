// Package galera holds sqllock's Galera suite (issue 26): workers of every
// lock kind that a Galera cluster supports run on the three nodes of the
// cluster that `.ci/galera start` runs, with fenced writes to a ledger,
// while the test pauses, isolates and kills nodes. It fails on any
// overlap of live holders, a token going backwards, or a lost update. The
// package has only tests; docs/galera.md says what they check and why.
package galera
