package torture_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sqllock/sqllock/internal/clock"
)

// process is a running worker: a copy of the test binary running
// TestTortureWorker. Its stdout lines are kept and checked when it ends;
// its stderr (driver logs about cut connections, mostly) goes to a file
// shown when the test fails.
type process struct {
	slot   int           // the worker slot it fills; a replacement takes the slot of the one it replaces
	offset time.Duration // its clock offset (clock.OffsetEnv)
	ledger string
	log    string
	cmd    *exec.Cmd
	pid    int

	mu      sync.Mutex
	lines   []string
	killed  bool
	waitErr error
	done    chan struct{} // closed once stdout is drained and the process reaped
}

// startWorker runs a worker with env added to the environment. The child
// gets a -test.timeout, so that one orphaned by a crashed parent ends.
func startWorker(t *testing.T, slot int, offset time.Duration, ledger, log string, runFor time.Duration, env []string) *process {
	t.Helper()
	stderr, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	// The ledger exists before the worker does: one SIGKILLed before it
	// opened its ledger (a slow start on a loaded machine) held nothing,
	// and its empty ledger says so. Made by the worker, it was missing,
	// and the run failed reading it.
	if err := os.WriteFile(ledger, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestTortureWorker$", "-test.count=1", "-test.v",
		"-test.timeout="+(runFor+3*time.Minute).String())
	cmd.Env = append(append(os.Environ(), "SQLLOCK_TEST_CHILD=1",
		clock.OffsetEnv+"="+offset.String(),
		envLedger+"="+ledger,
		envRunFor+"="+runFor.String(),
	), env...)
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start worker: %v", err)
	}
	p := &process{slot: slot, offset: offset, ledger: ledger, log: log, cmd: cmd, pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			p.mu.Unlock()
		}
		err := cmd.Wait() // after every read from the pipe, as exec requires
		_ = stderr.Close()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // a stopped process dies too
		<-p.done
	})
	return p
}

// kill SIGKILLs the worker (it gets no chance to release anything) and
// waits until it is reaped. It reports whether the SIGKILL is what ended
// it: a worker that had just finished on its own is not counted as killed,
// and is checked like the others.
func (p *process) kill() bool {
	_ = p.cmd.Process.Kill()
	<-p.done
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	killed := ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
	p.mu.Lock()
	p.killed = killed
	p.mu.Unlock()
	return killed
}

// running reports whether the worker has not ended yet.
func (p *process) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *process) signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

func (p *process) wasKilled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.killed
}

// verify checks a worker that was not killed, after it ended: it exited 0,
// reported the clock offset it was given with the skew that goes with it,
// and recorded holds. It returns how many.
func (p *process) verify() (holds int, errs []error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fail := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("worker pid %d (slot %d, offset %v): %s", p.pid, p.slot, p.offset, fmt.Sprintf(format, args...)))
	}
	if p.waitErr != nil {
		// The worker's own failure lines go into the error: the full
		// output is logged too, but after every worker's, and a CI log
		// cut short loses it (CI once showed only "exit status 1").
		fail("exited with %v%s", p.waitErr, failureLines(p.lines))
	}
	up, done := false, false
	for _, line := range p.lines {
		if rest, ok := strings.CutPrefix(line, "worker up "); ok {
			up = true
			var pid int
			var offset, skew time.Duration
			for f := range strings.FieldsSeq(rest) {
				k, v, _ := strings.Cut(f, "=")
				switch k {
				case "pid":
					_, _ = fmt.Sscan(v, &pid)
				case "offset":
					offset, _ = time.ParseDuration(v)
				case "skew":
					skew, _ = time.ParseDuration(v)
				}
			}
			// The server runs on this host, so the worker's skew is its
			// offset; half an hour of slack still tells +1h, 0 and -1h apart.
			if pid != p.pid || offset != p.offset || (skew-p.offset).Abs() > 30*time.Minute {
				fail("reported %q: want pid=%d offset=%v and a skew within half an hour of it", line, p.pid, p.offset)
			}
		}
		if rest, ok := strings.CutPrefix(line, "worker done "); ok {
			done = true
			if _, err := fmt.Sscan(rest, &holds); err != nil || holds <= 0 {
				fail("%q: want worker done N with N > 0", line)
			}
		}
	}
	if !up {
		fail(`never printed "worker up"`)
	}
	if !done {
		fail(`never printed "worker done N"`)
	}
	return holds, errs
}

// events is the set of events the worker reported ("worker event NAME"
// lines), killed or not.
func (p *process) events() map[string]bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	ev := map[string]bool{}
	for _, line := range p.lines {
		if name, ok := strings.CutPrefix(line, "worker event "); ok {
			ev[name] = true
		}
	}
	return ev
}

// output is the worker's stdout and the end of its stderr, for a failure
// report.
func (p *process) output() string {
	p.mu.Lock()
	lines := strings.Join(p.lines, "\n")
	p.mu.Unlock()
	stderr, _ := os.ReadFile(p.log)
	const keep = 4000
	if len(stderr) > keep {
		stderr = append([]byte("..."), stderr[len(stderr)-keep:]...)
	}
	return fmt.Sprintf("--- worker pid %d (slot %d, offset %v, killed %v) stdout:\n%s\n--- stderr (%s):\n%s",
		p.pid, p.slot, p.offset, p.wasKilled(), lines, p.log, stderr)
}

// failureLines are the lines of a worker's output that say why its test
// failed (the test's own errors, FAIL and panic lines), at most a few,
// each on a line of its own.
func failureLines(lines []string) string {
	const most = 10
	var b strings.Builder
	n := 0
	for _, line := range lines {
		t := strings.TrimSpace(line)
		if !strings.Contains(t, "_test.go:") && !strings.HasPrefix(t, "--- FAIL") && !strings.HasPrefix(t, "panic:") {
			continue
		}
		if n++; n > most {
			b.WriteString("\n\t...")
			break
		}
		b.WriteString("\n\t" + t)
	}
	return b.String()
}

// TestWorkerKilledAtStart: a worker SIGKILLed the moment it starts, before
// it could open its ledger, leaves an empty ledger, which reads as no
// holds, not as a failed run.
func TestWorkerKilledAtStart(t *testing.T) {
	dir := t.TempDir()
	p := startWorker(t, 0, 0, filepath.Join(dir, "worker-1.jsonl"), filepath.Join(dir, "worker-1.log"), time.Minute, nil)
	if !p.kill() {
		t.Fatal("the worker ended before its SIGKILL: the test killed nothing")
	}
	recs, err := readLedger(p.ledger, true)
	if err != nil || len(recs) != 0 {
		t.Fatalf("ledger of a worker killed at start: %d records, %v; want none and no error", len(recs), err)
	}
}
