package testdb

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// childEnv marks a test binary started by Child.
const childEnv = "SQLLOCK_TEST_CHILD"

// childTimeout is the child's own -test.timeout when the parent has no
// deadline: a child orphaned by a crashed parent must not hold (and renew)
// a lock forever.
const childTimeout = 5 * time.Minute

// IsChild reports whether this test binary was started by Child. A test that
// is only a child's body returns at once when it is false (see the package
// doc); it must not skip.
func IsChild() bool { return os.Getenv(childEnv) == "1" }

// ChildProcess is a copy of the test binary running one test, typically one
// that takes a lock, prints a line, and waits to be killed.
type ChildProcess struct {
	Cmd *exec.Cmd

	mu     sync.Mutex
	lines  []string      // every stdout line so far
	next   int           // first line WaitLine has not consumed
	more   chan struct{} // closed and replaced when lines grow or stdout ends
	exited bool          // stdout ended and the process was reaped
	done   chan struct{} // closed once the process has been reaped
}

// Child starts the current test binary running only the test named testName
// (a top-level test name, or "Parent/Sub"), with SQLLOCK_TEST_CHILD=1 and
// env ("KEY=value") added. The child's stdout is read line by line through
// WaitLine; its stderr goes to the parent's. When the test ends the child is
// killed if still running, and its output is logged if the test failed.
func Child(t testing.TB, testName string, env ...string) *ChildProcess {
	t.Helper()
	timeout := childTimeout
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if deadline, ok := d.Deadline(); ok {
			// At least a second: 0 would mean no timeout at all.
			timeout = max(time.Until(deadline), time.Second)
		}
	}
	cmd := exec.Command(os.Args[0],
		"-test.run="+exactRun(testName),
		"-test.count=1",
		"-test.timeout="+timeout.String(),
		// Verbose, so that a failing child's log reaches its stdout, which
		// the parent logs when its own test fails.
		"-test.v",
	)
	cmd.Env = append(append(os.Environ(), childEnv+"=1"), env...)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("testdb: child %s: %v", testName, err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("testdb: child %s: %v", testName, err)
	}
	c := &ChildProcess{Cmd: cmd, more: make(chan struct{}), done: make(chan struct{})}
	// One goroutine reads stdout to its end and only then reaps the
	// process: exec requires all reads from the pipe to finish before
	// Wait. Reading never stops, so a chatty child never blocks on a full
	// pipe, and every line is kept, so WaitLine cannot miss one.
	go func() {
		defer close(c.done)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			c.mu.Lock()
			c.lines = append(c.lines, sc.Text())
			c.wake()
			c.mu.Unlock()
		}
		_ = cmd.Wait()
		c.mu.Lock()
		c.exited = true
		c.wake()
		c.mu.Unlock()
	}()
	t.Cleanup(func() {
		c.Kill()
		if t.Failed() {
			c.mu.Lock()
			defer c.mu.Unlock()
			t.Logf("testdb: child %s (%s) stdout:\n%s", testName, cmd.ProcessState, strings.Join(c.lines, "\n"))
		}
	})
	return c
}

// exactRun turns a test name into a -test.run pattern matching only that
// test: go test splits the pattern on "/" and matches each level alone.
func exactRun(testName string) string {
	parts := strings.Split(testName, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// wake tells WaitLine callers that something changed; c.mu is held.
func (c *ChildProcess) wake() {
	close(c.more)
	c.more = make(chan struct{})
}

// WaitLine returns the next line of the child's stdout that starts with
// prefix, consuming it and the lines before it. It fails when ctx ends or
// the child exits first.
func (c *ChildProcess) WaitLine(ctx context.Context, prefix string) (string, error) {
	for {
		c.mu.Lock()
		for c.next < len(c.lines) {
			line := c.lines[c.next]
			c.next++
			if strings.HasPrefix(line, prefix) {
				c.mu.Unlock()
				return line, nil
			}
		}
		exited, more := c.exited, c.more
		c.mu.Unlock()
		if exited {
			return "", fmt.Errorf("testdb: child exited (%s) before printing %q", c.Cmd.ProcessState, prefix)
		}
		select {
		case <-more:
		case <-ctx.Done():
			return "", fmt.Errorf("testdb: waiting for %q from child: %w", prefix, ctx.Err())
		}
	}
}

// Kill sends SIGKILL, so the child gets no chance to release anything, and
// waits until the process is reaped. Killing a child that already exited is
// a no-op.
func (c *ChildProcess) Kill() {
	_ = c.Cmd.Process.Kill() // os.ErrProcessDone once reaped: nothing to do
	<-c.done
}
