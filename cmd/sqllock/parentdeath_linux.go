package main

import "syscall"

// killWithParent has the kernel send the command SIGKILL when the thread
// that started it ends (see startGroup).
func killWithParent(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }
