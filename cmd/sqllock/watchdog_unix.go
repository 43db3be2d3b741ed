//go:build unix && !aix

package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
)

// watchdogArg, as the first argument, makes sqllock the watchdog of a
// run (see watchdog); people never type it.
const watchdogArg = "__sqllock-run-watchdog"

// watchdogDone is what run writes to its watchdog once the command's group
// is gone: the watchdog then exits without a signal.
const watchdogDone = 'd'

// watchdog is a second sqllock process that run starts beside the
// command's group. A SIGKILLed run cannot stop the command, whose lock
// then lapses within the crash grace while the command (and whatever it
// started) runs on, unlocked, next to the next holder's. The watchdog
// holds the read end of a pipe whose write end only run holds: the kernel
// closes it when run dies, however it dies, and the watchdog then sends
// SIGKILL to the whole group at once, well within the crash grace. It runs
// in a session of its own, so that signals to run's process group or
// terminal do not end it with run.
type watchdog struct {
	cmd  *exec.Cmd
	pipe *os.File // the write end
}

// startWatchdog starts the watchdog of process group pgid. If it cannot,
// it says so and returns nil: the command runs anyway, as it did before
// there were watchdogs, and on Linux the kernel still kills the command
// itself (though not its children) when run dies.
func startWatchdog(pgid int) *watchdog {
	wd, err := newWatchdog(pgid)
	if err != nil {
		fmt.Fprintf(os.Stderr, "sqllock: cannot start the watchdog that stops the command if sqllock is killed: %v\n", err)
		return nil
	}
	return wd
}

func newWatchdog(pgid int) (*watchdog, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	// Both ends are close-on-exec: only the watchdog gets the read end
	// (as fd 3), and no process but this one ever holds the write end.
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cmd := exec.Command(exe, watchdogArg, strconv.Itoa(pgid))
	cmd.ExtraFiles = []*os.File{r}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		_ = w.Close()
		return nil, err
	}
	return &watchdog{cmd: cmd, pipe: w}, nil
}

// dismiss tells the watchdog that the group is gone, and waits for it to
// exit.
func (wd *watchdog) dismiss() {
	if wd == nil {
		return
	}
	_, _ = wd.pipe.Write([]byte{watchdogDone})
	_ = wd.pipe.Close()
	_ = wd.cmd.Wait()
}

// runWatchdog is the watchdog's main: it waits until run writes
// watchdogDone or dies (end of file), and in the second case sends
// SIGKILL to process group pgidArg.
func runWatchdog(pgidArg string) int {
	pgid, err := strconv.Atoi(pgidArg)
	if err != nil || pgid <= 1 {
		return exitUsage
	}
	// Only the end of the pipe may end it.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	pipe := os.NewFile(3, "sqllock-run")
	var b [1]byte
	if n, _ := pipe.Read(b[:]); n == 1 && b[0] == watchdogDone {
		return exitOK
	}
	// run is gone and never said the group was. SIGKILL, not SIGTERM and
	// --kill-after: the lock is free again within the crash grace.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return exitOK
}
