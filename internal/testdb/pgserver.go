package testdb

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// pgBinEnv names the folder of the PostgreSQL server programs the
// harness's own servers run (NewReplicated). Unset, it is the newest
// /usr/lib/postgresql/<major>/bin, where Debian's postgresql package puts
// them.
const pgBinEnv = "SQLLOCK_PG_BIN"

// pgServerUser runs the harness's servers when the tests run as root
// (initdb and postgres refuse root); Debian's postgresql package makes it.
const pgServerUser = "postgres"

// pgHowTo says how to get what the harness's own servers need.
const pgHowTo = "install PostgreSQL's server programs (apt-get install postgresql: initdb, postgres, pg_basebackup, " +
	"pg_controldata) or set " + pgBinEnv + " to their folder, and run the tests as root (the servers then run as the " +
	pgServerUser + " user) or as an ordinary user; .ci/run does"

// pgServerStart bounds how long a server of the harness's own gets to
// accept connections, and pgServerStop how long it gets to shut down.
const (
	pgServerStart = time.Minute
	pgServerStop  = time.Minute
)

// reservedPorts are taken by the machine's servers: PostgreSQL, PgBouncer,
// and .ci/pg-matrix's (543<major> for 13 to 18).
var reservedPorts = []int{5432, 6432, 54313, 54314, 54315, 54316, 54317, 54318}

// pgTools is how the harness runs PostgreSQL's programs: from bin, as cred
// (nil: as this process's user).
type pgTools struct {
	bin  string
	cred *syscall.Credential
}

// newPGTools finds the server programs and the user to run them as, or
// says how to get them.
func newPGTools() (pgTools, error) {
	bin := os.Getenv(pgBinEnv)
	if bin == "" {
		dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
		slices.SortFunc(dirs, func(a, b string) int { return majorOf(a) - majorOf(b) })
		if len(dirs) == 0 {
			return pgTools{}, fmt.Errorf("no /usr/lib/postgresql/<major>/bin and %s unset\n\tto fix: %s", pgBinEnv, pgHowTo)
		}
		bin = dirs[len(dirs)-1]
	}
	for _, prog := range []string{"initdb", "postgres", "pg_basebackup", "pg_controldata"} {
		if _, err := os.Stat(filepath.Join(bin, prog)); err != nil {
			return pgTools{}, fmt.Errorf("%s: %v\n\tto fix: %s", prog, err, pgHowTo)
		}
	}
	tools := pgTools{bin: bin}
	if os.Geteuid() != 0 {
		return tools, nil
	}
	u, err := user.Lookup(pgServerUser)
	if err != nil {
		return pgTools{}, fmt.Errorf("running as root, and no %s user to run the servers as: %v\n\tto fix: %s", pgServerUser, err, pgHowTo)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return pgTools{}, fmt.Errorf("user %s: %v", pgServerUser, err)
	}
	tools.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	return tools, nil
}

// majorOf is the version in /usr/lib/postgresql/<major>/bin, 0 if none.
func majorOf(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// command is prog with args, run as the tools' user, from dir (which that
// user can enter).
func (p pgTools) command(dir, prog string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(p.bin, prog), args...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	return cmd
}

// run runs prog to the end; its output is in the error.
func (p pgTools) run(dir, prog string, args ...string) (string, error) {
	out, err := p.command(dir, prog, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %v\n%s", prog, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// ownDir makes dir the tools' user's, so that its programs can write there.
func (p pgTools) ownDir(dir string) error {
	if p.cred == nil {
		return nil
	}
	return os.Chown(dir, int(p.cred.Uid), int(p.cred.Gid))
}

// pgServer is one PostgreSQL server process of the harness's own, a child
// of the test binary.
type pgServer struct {
	name string // "primary" or "standby", for messages
	data string
	port int
	log  string
	cmd  *exec.Cmd
	// exited is closed when the process has ended; err is Wait's.
	exited chan struct{}
	err    error
}

// startPGServer starts postgres on the cluster in data, listening on port
// on 127.0.0.1 only and on a socket in sockets, logging to log, and waits
// until it accepts connections. A hot standby accepts them once it is
// consistent.
func startPGServer(tools pgTools, name, data, sockets string, port int, log string) (*pgServer, error) {
	logFile, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own copy
	cmd := tools.command(sockets, "postgres", "-D", data,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "port="+strconv.Itoa(port),
		"-c", "unix_socket_directories="+sockets,
		// A throwaway cluster: nothing to keep across a crash of the
		// machine, and little memory on a shared one.
		"-c", "fsync=off",
		"-c", "shared_buffers=16MB",
		"-c", "max_connections=60",
	)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// If the test binary dies (a timeout's panic) before its cleanups
	// run, the server shuts down too instead of running on.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the %s: %v", name, err)
	}
	s := &pgServer{name: name, data: data, port: port, log: log, cmd: cmd, exited: make(chan struct{})}
	go func() {
		s.err = cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(); err != nil {
		s.stop(syscall.SIGQUIT)
		return nil, err
	}
	return s, nil
}

// dsn is the keyword/value DSN of the server alone.
func (s *pgServer) dsn() string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=root dbname=postgres sslmode=disable", s.port)
}

func (s *pgServer) waitReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), pgServerStart)
	defer cancel()
	for {
		c, err := pgconn.Connect(ctx, s.dsn())
		if err == nil {
			return c.Close(ctx)
		}
		select {
		case <-s.exited:
			return fmt.Errorf("the %s exited while starting: %v\n%s", s.name, s.err, tail(s.log))
		case <-ctx.Done():
			return fmt.Errorf("the %s did not accept connections within %v: %v\n%s", s.name, pgServerStart, err, tail(s.log))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop sends sig (SIGINT: a fast shutdown, clean; SIGQUIT: an immediate
// one) and waits for the server to exit, at most pgServerStop, after which
// it is killed. It returns an error if the server had to be killed or
// exited with an error. Stopping a server that has exited does nothing.
func (s *pgServer) stop(sig syscall.Signal) error {
	select {
	case <-s.exited:
		return nil
	default:
	}
	if err := s.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal the %s: %v", s.name, err)
	}
	select {
	case <-s.exited:
	case <-time.After(pgServerStop):
		_ = s.cmd.Process.Kill()
		<-s.exited
		return fmt.Errorf("the %s did not stop within %v after %v: killed", s.name, pgServerStop, sig)
	}
	if s.err != nil && sig == syscall.SIGINT {
		return fmt.Errorf("the %s's fast shutdown: %v\n%s", s.name, s.err, tail(s.log))
	}
	return nil
}

// tail is the end of a server's log, for failure messages.
func tail(log string) string {
	b, err := os.ReadFile(log)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return "\t" + strings.Join(lines, "\n\t")
}

// freePort returns a TCP port on 127.0.0.1 that nothing listens on now and
// that none of the machine's servers uses.
func freePort(t testing.TB) int {
	t.Helper()
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("testdb: find a free port: %v", err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		if !slices.Contains(reservedPorts, port) {
			return port
		}
	}
	t.Fatalf("testdb: no free port outside %v", reservedPorts)
	return 0
}
