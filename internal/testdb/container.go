package testdb

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/testcontainers/testcontainers-go"
	tcmysql "github.com/testcontainers/testcontainers-go/modules/mysql"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
)

// Images for the fallback: the oldest versions the library supports, so a
// machine without local servers still tests the hardest case.
const (
	postgresImage = "postgres:13-alpine"
	mysqlImage    = "mysql:8.0"
)

// containerDSN starts a database in Docker for machines without the local
// servers. The container lives as long as the test binary: testcontainers'
// reaper (Ryuk) removes it when the binary exits.
func containerDSN(name string) (dsn string, err error) {
	if os.Getenv("SQLLOCK_NO_CONTAINERS") != "" {
		return "", errors.New("disabled by SQLLOCK_NO_CONTAINERS")
	}
	// Older testcontainers releases panic when no Docker host is found;
	// that must become the how-to message, not a crash of the test binary.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("no Docker: %v", r)
		}
	}()
	// Pulling an image on a cold machine takes a while; a hung daemon must
	// not hang the suite.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	switch name {
	case "postgres":
		c, err := tcpostgres.Run(ctx, postgresImage,
			tcpostgres.WithDatabase("test"), tcpostgres.WithUsername("root"), tcpostgres.WithPassword("root"),
			tcpostgres.BasicWaitStrategies())
		if err != nil {
			// A container that started but never became ready must not be
			// left running; TerminateContainer ignores a nil one.
			_ = testcontainers.TerminateContainer(c)
			return "", err
		}
		return c.ConnectionString(ctx, "sslmode=disable")
	case "mysql":
		c, err := tcmysql.Run(ctx, mysqlImage,
			tcmysql.WithDatabase("test"), tcmysql.WithUsername("root"), tcmysql.WithPassword("root"))
		if err != nil {
			// A container that started but never became ready must not be
			// left running; TerminateContainer ignores a nil one.
			_ = testcontainers.TerminateContainer(c)
			return "", err
		}
		// No parameters: the library must work with a plain DSN.
		return c.ConnectionString(ctx)
	}
	return "", fmt.Errorf("no container for %q", name)
}
