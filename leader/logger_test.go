package leader_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqllock/sqllock/internal/testdb"
	"github.com/sqllock/sqllock/leader"
	"github.com/sqllock/sqllock/rowlock"
)

// TestLeaderLogsToTheLockersLogger: a Leader has no logger of its own; it
// reports its elections where the Locker it is given logs.
func TestLeaderLogsToTheLockersLogger(t *testing.T) {
	for _, tg := range testdb.AllTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			var logs lockedBuffer
			l, err := rowlock.New(tg.DB, rowlock.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			name := testdb.Name(t)
			ld, err := leader.New(l, name, nil, leader.WithTTL(time.Second))
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
		})
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
