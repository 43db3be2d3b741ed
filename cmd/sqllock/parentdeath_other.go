//go:build unix && !aix && !linux

package main

import "syscall"

// killWithParent does nothing where there is no parent-death signal: the
// watchdog alone ends the command's group when run dies.
func killWithParent(*syscall.SysProcAttr) {}
