package wake

import (
	"context"
	"fmt"
	"time"

	"github.com/sqllock/sqllock/internal/clock"
)

// loop readies the incarnation (LISTEN and its probe, the marker, the
// doorbell) and then serves it until ctx ends or the connection fails.
func (s *Session) loop(ctx context.Context, inc *incarnation, sc sessionConn) error {
	up, err := s.ready(ctx, sc)
	if err != nil {
		return err
	}
	defer up.bell.forget(sc)
	s.mu.Lock()
	inc.key, inc.deadline, inc.listening = up.key, up.deadline, up.listening
	s.mu.Unlock()
	if up.listening || up.bell.cur >= 0 {
		s.SetWakeup(true)
		defer s.SetWakeup(false)
	}
	close(inc.ready)
	if up.key == 0 && !up.listening {
		return errNothingToKeep
	}
	return s.heartbeat(ctx, inc, sc, up.key, &up.bell)
}

// readied is what a session connection carries once ready.
type readied struct {
	listening bool      // LISTEN is in effect and its probe came back
	key       int64     // the marker's key; 0 without a marker
	deadline  time.Time // until when the marker is trusted
	bell      bells     // the doorbell (MySQL); cur is -1 without one
}

// ready issues LISTEN (PostgreSQL), checks for a Galera node (MySQL), and
// takes the marker and the first bells.
func (s *Session) ready(ctx context.Context, sc sessionConn) (readied, error) {
	up := readied{bell: bells{cur: -1}}
	if sc.notifies() {
		ok, err := s.startListening(ctx, sc)
		if err != nil {
			return up, err
		}
		up.listening = ok
	}
	if !s.cfg.Postgres && s.markers() && !s.PerNode() {
		if err := s.checkCluster(ctx, sc); err != nil {
			return up, err
		}
	}
	if !s.Marking() || (!up.listening && sc.notifies()) {
		// A session whose notifications do not come back is behind a
		// transaction pooler: a marker there would outlive this process
		// on a pooled server connection. Without a probe (no LISTEN),
		// the heartbeat's check of the marker's owner catches a pooler.
		return up, nil
	}
	key, sent, err := s.takeMarker(ctx, sc)
	if err != nil {
		return up, err
	}
	up.key, up.deadline = key, s.markerDeadline(sent)
	if s.cfg.Bells {
		if up.bell, err = s.startBells(ctx, sc, key); err != nil {
			return up, err
		}
	}
	return up, nil
}

// heartbeat proves the marker (key, 0 for none) every beatInterval and
// serves the connection's events between beats, until ctx ends (nil) or
// the connection fails.
func (s *Session) heartbeat(ctx context.Context, inc *incarnation, sc sessionConn, key int64, bell *bells) error {
	next := clock.Now().Add(s.beatInterval())
	for {
		wait := next.Sub(clock.Now())
		if key == 0 {
			wait = time.Hour // no marker: nothing to prove, only listen
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		ev, err := sc.wait(wctx)
		timedOut := wctx.Err() != nil
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil && !timedOut:
			return err
		case err == nil:
			if err := s.handle(ctx, sc, ev, bell); err != nil {
				return err
			}
			continue
		case key == 0:
			continue
		}
		sent := clock.Now()
		next = sent.Add(s.beatInterval())
		if err := s.beat(ctx, inc, sc, key, sent); err != nil {
			return err
		}
	}
}

// handle serves one event: a ring request rings the doorbell; a release
// announced by NOTIFY wakes the Locker's first waiter of the name.
func (s *Session) handle(ctx context.Context, sc sessionConn, ev event, bell *bells) error {
	switch ev.kind {
	case ringRequest:
		if err := bell.ring(ctx, sc); err != nil {
			return fmt.Errorf("ringing the doorbell: %w", err)
		}
	case notification:
		if ev.channel == s.cfg.ReleaseChannel {
			s.cfg.Waiters.WakeFirst(ev.payload)
		}
	}
	return nil
}

// startListening issues LISTEN and checks that a NOTIFY sent through the
// pool comes back on this connection: behind a transaction pooler LISTEN
// runs on some pooled server connection and nothing comes back, and
// waiters must poll. ok is false then; err is the connection's failure.
func (s *Session) startListening(ctx context.Context, sc sessionConn) (ok bool, err error) {
	if err := sc.exec(ctx, "LISTEN "+probeChannel); err != nil {
		return false, err
	}
	token := fmt.Sprintf("%d", newMarkerKey())
	if err := s.cfg.Notify(ctx, probeChannel, token); err != nil {
		return false, err
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	for {
		n, err := sc.wait(pctx)
		switch {
		case ctx.Err() != nil:
			return false, ctx.Err()
		case pctx.Err() != nil:
			s.warnOnce("rowlock: the session connection receives no notifications (a transaction pooler in front of it?): "+
				"waiters poll and dead holders are detected by their leases only; give rowlock.WithSessionDB a direct connection",
				"probe_timeout", probeTimeout)
			return false, errNoNotifications
		case err != nil:
			return false, err
		case n.kind == notification && n.channel == probeChannel && n.payload == token:
			if err := sc.exec(ctx, "LISTEN "+s.cfg.ReleaseChannel); err != nil {
				return false, err
			}
			return true, nil
		}
	}
}
