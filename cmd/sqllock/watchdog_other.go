//go:build !unix || aix

package main

// watchdogArg is never given where there is no watchdog.
const watchdogArg = "__sqllock-run-watchdog"

func runWatchdog(string) int { return exitUsage }
