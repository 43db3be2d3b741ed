package admin_test

import (
	"testing"

	"github.com/sqllock/sqllock/internal/testdb"
)

func TestMain(m *testing.M) {
	// Every goroutine an Admin's Locker starts must be stopped by Close.
	testdb.Main(m)
}
