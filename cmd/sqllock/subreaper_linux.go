package main

import "syscall"

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from <linux/prctl.h>.
const prSetChildSubreaper = 36

// becomeSubreaper makes orphaned descendants sqllock's children instead of
// init's, so that sqllock can reap them and tell when the command's group
// is gone even where init does not reap (PID 1 in a container). Best
// effort: without it, empty still works wherever init reaps.
func becomeSubreaper() {
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
}
