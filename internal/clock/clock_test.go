package clock

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// shiftWall reads time.Time through a mirror of its fields: if a Go
// release changes them, this fails instead of the offset silently
// doing nothing (parseOffset then ignores every offset).
func TestLayoutKnown(t *testing.T) {
	if !layoutKnown {
		t.Fatal("time.Time is no longer {wall uint64; ext int64; loc *time.Location}: update timeRepr and shiftWall")
	}
}

func TestShiftWallKeepsMonotonicReading(t *testing.T) {
	for _, d := range []time.Duration{time.Hour, -time.Hour, 90*time.Minute + 1, -time.Nanosecond} {
		t.Run(d.String(), func(t *testing.T) {
			now := time.Now()
			shifted := shiftWall(now, d)
			if got := shifted.Round(0).Sub(now.Round(0)); got != d {
				t.Errorf("wall clock moved by %v, want %v", got, d)
			}
			// Both carry monotonic readings, so Sub and Equal compare those:
			// equal means the monotonic reading was kept exactly.
			if got := shifted.Sub(now); got != 0 {
				t.Errorf("monotonic reading moved by %v, want 0", got)
			}
			if !shifted.Equal(now) {
				t.Errorf("%v and %v not Equal: monotonic readings differ", shifted, now)
			}
			mono := func(x time.Time) string { return x.String()[strings.LastIndex(x.String(), " m=")+1:] }
			if mono(shifted) != mono(now) || !strings.HasPrefix(mono(now), "m=") {
				t.Errorf("monotonic readings %q and %q, want equal", mono(shifted), mono(now))
			}
			// A deadline built from it waits as long as one built from
			// time.Now: less than the hour added, whatever the offset.
			if wait := time.Until(shifted.Add(time.Hour)); wait <= 0 || wait > time.Hour {
				t.Errorf("time.Until(Now()+1h) = %v, want in (0, 1h]", wait)
			}
			// What shiftWall exists to avoid: Add moves both readings.
			if got := now.Add(d).Sub(now); got != d {
				t.Errorf("time.Add moved the monotonic reading by %v, not %v: the package doc is wrong", got, d)
			}
		})
	}
}

func TestParseOffset(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"1h", time.Hour},
		{"-1h", -time.Hour},
		{"90m", 90 * time.Minute},
		{"-2h30m15.5s", -(2*time.Hour + 30*time.Minute + 15500*time.Millisecond)},
		{"8760h", 8760 * time.Hour},
		{"", 0},
		{"0", 0},
		{"1", 0}, // no unit
		{"one hour", 0},
		{"1h ", 0},
		{"8761h", 0},
		{"-8761h", 0},
		{"99999999999h", 0}, // overflows
	} {
		if got := parseOffset(tc.in); got != tc.want {
			t.Errorf("parseOffset(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// childEnv marks a copy of this test binary started by
// TestOffsetFromEnvironment.
const childEnv = "SQLLOCK_CLOCK_TEST_CHILD"

// TestReportClock is the child's body: it prints what Now looks like in a
// process started with OffsetEnv set. In a normal run it returns at once.
func TestReportClock(t *testing.T) {
	if os.Getenv(childEnv) != "1" {
		return
	}
	now, clockNow := time.Now(), Now()
	fmt.Printf("offset=%v wall=%v mono=%v\n", Offset(),
		clockNow.Round(0).Sub(now.Round(0)).Round(time.Minute), clockNow.Sub(now).Round(time.Minute))
}

// The offset comes from the environment at process start, moves the wall
// clock only, and a bad value has no effect.
func TestOffsetFromEnvironment(t *testing.T) {
	for _, tc := range []struct{ env, want string }{
		{"1h", "offset=1h0m0s wall=1h0m0s mono=0s"},
		{"-1h", "offset=-1h0m0s wall=-1h0m0s mono=0s"},
		{"soon", "offset=0s wall=0s mono=0s"},
		{"", "offset=0s wall=0s mono=0s"},
	} {
		t.Run(tc.env, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestReportClock$", "-test.count=1")
			cmd.Env = append(os.Environ(), childEnv+"=1", OffsetEnv+"="+tc.env)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), tc.want+"\n") {
				t.Errorf("child with %s=%q printed:\n%s\nwant the line %q", OffsetEnv, tc.env, out, tc.want)
			}
		})
	}
}
