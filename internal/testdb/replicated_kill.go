package testdb

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// KillPrimary crashes the primary, as a power cut or the kernel's OOM
// killer would: its postmaster and every process it has started are
// killed (SIGKILL), with no shutdown checkpoint and no word to the
// clients, whose connections break. It returns once they are all gone
// and the primary's port refuses connections. What the standby had not
// received is lost: after CutReplication, everything committed since (it
// fails the test if the standby received any of it: the cut leaked).
// Promote then makes the standby the primary.
//
// Its complexity (over 15) is the steps of an unplanned failover, each
// checked and failing the test with a message of its own.
func (r *Replicated) KillPrimary(t testing.TB) {
	t.Helper()
	s := r.primary
	select {
	case <-s.exited:
		t.Fatalf("testdb: the primary has exited already: %v", s.err)
	default:
	}
	shm := primaryShm(s.data)
	postmaster := s.cmd.Process.Pid
	// Stopped first, the postmaster starts no process while its children
	// are found and killed, and restarts none when they die.
	if err := syscall.Kill(postmaster, syscall.SIGSTOP); err != nil {
		t.Fatalf("testdb: stop the primary's postmaster: %v", err)
	}
	if err := waitProc(postmaster, func(st procStat) bool { return st.state == 'T' || st.state == 't' }); err != nil {
		t.Fatalf("testdb: the primary's postmaster: %v", err)
	}
	children, err := childrenOf(postmaster)
	if err != nil {
		t.Fatalf("testdb: the primary's processes: %v", err)
	}
	for _, pid := range children {
		// SIGKILL ends stopped processes too (the cut's walsenders).
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			t.Fatalf("testdb: kill the primary's process %d: %v", pid, err)
		}
	}
	if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("testdb: kill the primary's postmaster: %v", err)
	}
	select {
	case <-s.exited:
	case <-time.After(pgServerStop):
		t.Fatalf("testdb: the primary's postmaster still runs %v after SIGKILL", pgServerStop)
	}
	for _, pid := range children {
		// Gone, or a zombie waiting for init to reap it: dead either way,
		// its sockets closed.
		if err := waitProc(pid, func(st procStat) bool { return st.state == 'Z' || st.state == 'X' }); err != nil {
			t.Fatalf("testdb: the primary's process %d after SIGKILL: %v", pid, err)
		}
	}
	if err := waitRefused(s.port); err != nil {
		t.Fatalf("testdb: the killed primary's port: %v", err)
	}
	if shm >= 0 {
		// A killed postmaster leaves its small System V segment behind
		// (its children are gone: nothing is attached to it).
		if _, _, errno := syscall.Syscall(syscall.SYS_SHMCTL, uintptr(shm), ipcRmid, 0); errno != 0 && errno != syscall.EINVAL && errno != syscall.EIDRM {
			t.Logf("testdb: remove the killed primary's shared memory segment %d: %v", shm, errno)
		}
	}
	if r.cutAt != "" {
		var leaked bool
		var received string
		if err := r.standbyDB.QueryRowContext(context.Background(),
			`SELECT pg_last_wal_receive_lsn() > $1::pg_lsn, pg_last_wal_receive_lsn()::text`, r.cutAt).Scan(&leaked, &received); err != nil {
			t.Fatalf("testdb: the standby's receive position: %v", err)
		}
		if leaked {
			t.Fatalf("testdb: the standby received WAL up to %s, past the cut at %s: CutReplication leaked", received, r.cutAt)
		}
	}
}

// ipcRmid is shmctl's IPC_RMID command.
const ipcRmid = 0

// primaryShm is the System V shared memory segment of the server of data,
// from its postmaster.pid (line 7: key and id), or -1.
func primaryShm(data string) int {
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return -1
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 7 {
		return -1
	}
	fields := strings.Fields(lines[6])
	if len(fields) != 2 {
		return -1
	}
	id, err := strconv.Atoi(fields[1])
	if err != nil {
		return -1
	}
	return id
}

// procStat is what the harness reads of a process in /proc/<pid>/stat.
type procStat struct {
	state byte // R, S, D, T (stopped), t, Z (zombie), X, ...
	ppid  int
}

// readProcStat reads pid's state and parent; os.ErrNotExist once the
// process is gone.
func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses,
	// so the fields are counted from the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 2 || len(fields[0]) != 1 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %q", pid, s)
	}
	return procStat{state: fields[0][0], ppid: ppid}, nil
}

// waitProc waits, at most pgServerStop, until pid is in a state done
// accepts or gone (gone counts as done).
func waitProc(pid int, done func(procStat) bool) error {
	deadline := time.Now().Add(pgServerStop)
	for {
		st, err := readProcStat(pid)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if done(st) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still in state %c after %v", st.state, pgServerStop)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var children []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readProcStat(child); err == nil && st.ppid == pid {
			children = append(children, child)
		}
	}
	return children, nil
}

// waitRefused waits, at most pgServerStop, until nothing accepts
// connections on port of 127.0.0.1.
func waitRefused(port int) error {
	deadline := time.Now().Add(pgServerStop)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err != nil {
			return nil
		}
		_ = c.Close()
		if time.Now().After(deadline) {
			return fmt.Errorf("port %d still accepts connections %v after the kill", port, pgServerStop)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
