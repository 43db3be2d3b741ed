//go:build unix && !aix

package main

import (
	"errors"
	"os/exec"
	"runtime"
	"syscall"
)

// procGroup is the process group sqllock runs the command in. Signals go
// to the whole group, not only to the command, so that what the command
// started (the children of a shell script) stops with it instead of running
// on without the lock.
type procGroup struct {
	pgid     int
	watchdog *watchdog // nil if it could not be started
}

// startGroup starts cmd as the leader of a new process group, and a
// watchdog that ends the group if sqllock is killed (see watchdog). The
// caller must call close once the group is gone.
//
// On Linux the command also gets SIGKILL from the kernel when sqllock
// dies, even if the watchdog was killed as well. The kernel sends it when
// the thread that started the command ends, not the process, so the
// calling goroutine stays locked to its thread until close: no other
// goroutine can then end that thread by exiting while locked to it.
func startGroup(cmd *exec.Cmd) (*procGroup, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	killWithParent(cmd.SysProcAttr)
	// Processes of the group whose parent exits are handed to sqllock
	// rather than to init, so that empty can reap them (Linux only).
	becomeSubreaper()
	runtime.LockOSThread()
	if err := cmd.Start(); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	g := &procGroup{pgid: cmd.Process.Pid}
	g.watchdog = startWatchdog(g.pgid)
	return g, nil
}

// close dismisses the watchdog and frees the thread. Call it only once the
// group is gone (empty) or sqllock gives up on it.
func (g *procGroup) close() {
	g.watchdog.dismiss()
	runtime.UnlockOSThread()
}

// signal sends sig to every process of the group. A stopped process acts
// on a signal only once continued, so SIGCONT follows, as shells do when
// they signal a job.
func (g *procGroup) signal(sig syscall.Signal) {
	_ = syscall.Kill(-g.pgid, sig)
	if sig != syscall.SIGKILL && sig != syscall.SIGCONT {
		_ = syscall.Kill(-g.pgid, syscall.SIGCONT)
	}
}

// empty reaps the group's processes that were handed to sqllock and
// reports whether the group is gone. It may only be called once the
// command itself has been waited for: the wait here would otherwise take
// the command's exit status from exec.Cmd. A group whose remaining
// processes sqllock may not signal (EPERM: they changed user) counts as
// gone, as nothing sqllock does can end them.
func (g *procGroup) empty() bool {
	for {
		pid, err := syscall.Wait4(-g.pgid, nil, syscall.WNOHANG, nil)
		if err != nil || pid <= 0 {
			break
		}
	}
	err := syscall.Kill(-g.pgid, 0)
	return errors.Is(err, syscall.ESRCH) || errors.Is(err, syscall.EPERM)
}
