package dblocktest_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoDriver: the contract and the test kit pull in no database driver
// and no scheduler: a user's unit tests that import them register no
// driver and need no database.
func TestNoDriver(t *testing.T) {
	for _, pkg := range []string{"github.com/sqllock/sqllock/dblock", "github.com/sqllock/sqllock/dblocktest"} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 2 {
			t.Fatalf("go list -deps %s listed %q: too little to check", pkg, deps)
		}
		for _, d := range deps {
			for _, banned := range []string{"github.com/go-sql-driver/", "github.com/jackc/", "github.com/lib/pq", "github.com/robfig/cron", "github.com/go-co-op/gocron"} {
				if strings.HasPrefix(d, banned) {
					t.Errorf("%s depends on %s", pkg, d)
				}
			}
		}
	}
}
