package leader_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/leader"
	"github.com/sqllock/sqllock/rowlock"
)

// TestLeaderLogsToTheLockersLogger: a Leader has no logger of its own; it
// reports its elections where the Locker it is given logs.
//
// Given WithLogger, it logs there instead, and the Locker's logger gets
// nothing of it.
func TestLeaderLogsToTheLockersLogger(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		for _, own := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/WithLogger=%v", tg.Name, own), func(t *testing.T) {
				testLeaderLogs(t, tg, own)
			})
		}
	}
}

func testLeaderLogs(t *testing.T, tg testdb.Target, own bool) {
	var logs, lockers lockedBuffer
	lockerLogs := &logs
	opts := []leader.Option{leader.WithLockOptions(dblock.TTL(time.Second))}
	if own {
		lockerLogs = &lockers
		opts = append(opts, leader.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	}
	l, err := rowlock.New(tg.DB, rowlock.WithLogger(slog.New(slog.NewTextHandler(lockerLogs, nil))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	name := testdb.Name(t)
	ld, err := leader.New(l, name, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	stop := runLeader(t, ld)
	want := `msg="leader: elected leader" name=` + name
	for i := 0; !strings.Contains(logs.String(), want); i++ {
		if i == 1000 {
			t.Fatalf("the Locker's logger got %q, want a line with %q", logs.String(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = stop()
	if own && strings.Contains(lockers.String(), "leader:") {
		t.Errorf("the Locker's logger got the Leader's lines: %q", lockers.String())
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *lockedBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *lockedBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
