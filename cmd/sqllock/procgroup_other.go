//go:build !unix || aix

package main

import (
	"os/exec"
	"syscall"
)

// procGroup is the command alone where there are no process groups (or,
// on AIX, no WNOHANG in package syscall to reap them with).
type procGroup struct {
	cmd *exec.Cmd
}

func startGroup(cmd *exec.Cmd) (*procGroup, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &procGroup{cmd: cmd}, nil
}

func (g *procGroup) signal(sig syscall.Signal) {
	if sig == syscall.SIGKILL {
		_ = g.cmd.Process.Kill()
		return
	}
	_ = g.cmd.Process.Signal(sig)
}

func (g *procGroup) empty() bool { return true }

func (g *procGroup) close() {}
