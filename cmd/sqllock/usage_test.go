package main

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// TestUsage runs the command line in-process for mistakes that never reach
// a working database: each gets its exit code and a message that says what
// to do, and none repeats a password.
func TestUsage(t *testing.T) {
	for _, c := range []struct {
		args   []string
		dsnEnv string
		code   int
		stdout string // substring expected on stdout
		stderr string // substring expected on stderr
	}{
		{args: nil, code: exitUsage, stderr: "Usage:"},
		{args: []string{"bogus"}, code: exitUsage, stderr: `unknown command "bogus"`},
		{args: []string{"--bogus"}, code: exitUsage, stderr: "flag provided but not defined: -bogus"},
		{args: []string{"help"}, code: exitOK, stdout: "Commands:"},
		{args: []string{"-h"}, code: exitOK, stdout: "Commands:"},
		{args: []string{"help", "run"}, code: exitOK, stdout: "Exit codes:"},
		{args: []string{"help", "nope"}, code: exitUsage, stderr: `unknown command "nope"`},
		{args: []string{"run", "-h"}, code: exitOK, stdout: "-kill-after"},
		{args: []string{"status"}, code: exitUsage, stderr: "no database given: pass --dsn or set SQLLOCK_DSN"},
		{args: []string{"status", "extra"}, dsnEnv: "postgres://x/y", code: exitUsage, stderr: "takes no arguments"},
		{args: []string{"status", "--limit", "0"}, dsnEnv: "postgres://x/y", code: exitUsage, stderr: "--limit"},
		{args: []string{"--dsn", "redis://localhost", "status"}, code: exitUsage, stderr: "use postgres://, mysql://, a go-sql-driver/mysql DSN or sqlite:FILE"},
		{args: []string{"status", "--dsn", "localhost:5432"}, code: exitUsage, stderr: "neither a URL"},
		// go-sql-driver/mysql's own DSN, as a Go program gives it to sql.Open.
		{args: []string{"--dsn", "u:secret@tcp(127.0.0.1:1)/x", "status"}, code: exitUnavailable, stderr: "cannot connect to mysql at 127.0.0.1:1"},
		{args: []string{"--dsn", "u:secret@tcp(127.0.0.1:1)/x?tls=maybe", "status"}, code: exitUsage, stderr: "invalid MySQL DSN"},
		{args: []string{"--dsn", "u:secret@tcp(127.0.0.1:1)/", "status"}, code: exitUsage, stderr: "no database name"},
		{args: []string{"help"}, code: exitOK, stdout: "user:password@tcp(host:3306)/dbname?tls=true   (go-sql-driver/mysql's form)"},
		{args: []string{"help", "run"}, code: exitOK, stdout: "Go's MySQL driver takes no\nmysql:// URL"},
		// A semaphore's token is its slot's: help says so, and gives the slot.
		{args: []string{"help", "run"}, code: exitOK, stdout: "SQLLOCK_TOKEN grows with every new holder of that slot only"},
		{args: []string{"--dsn", "postgres://u:secret@127.0.0.1:99999/x", "status"}, code: exitUsage, stderr: "invalid port"},
		{args: []string{"--dsn", "mysql://u:secret@127.0.0.1:1/x", "status"}, code: exitUnavailable, stderr: "cannot connect to mysql at 127.0.0.1:1"},
		{args: []string{"--dsn", "postgres://u:secret@127.0.0.1:1/x", "status"}, code: exitUnavailable, stderr: "cannot connect to postgres at 127.0.0.1:1"},
		{args: []string{"--version"}, code: exitOK, stdout: "sqllock "},
		{args: []string{"--help"}, code: exitOK, stdout: "75        run: the lock is held by another process"},
		{args: []string{"help"}, code: exitOK, stdout: "69        the database cannot be reached"},
		{args: []string{"help", "run"}, code: exitOK, stdout: "78             the database refused the DSN"},
		{args: []string{"--dsn", "mysql://u:secret@127.0.0.1/", "status"}, code: exitUsage, stderr: "no database name"},
		{args: []string{"migrate"}, dsnEnv: "postgres://x/y", code: exitUsage, stderr: "one of up, down, version"},
		{args: []string{"migrate", "sideways"}, dsnEnv: "postgres://x/y", code: exitUsage, stderr: `unknown migrate action "sideways"`},
		{args: []string{"migrate", "down"}, dsnEnv: "postgres://x/y", code: exitUsage, stderr: "pass --yes"},
		{args: []string{"run", "--", "true"}, dsnEnv: "postgres://x/y", code: exitUsage, stderr: "--name is required"},
		{args: []string{"run", "--name", "x"}, dsnEnv: "postgres://x/y", code: exitUsage, stderr: "no command to run"},
		{args: []string{"run", "--name", "x", "--ttl", "1ms", "--", "true"}, dsnEnv: "postgres://x/y", code: exitUsage, stderr: "TTL: must be at least"},
		{args: []string{"run", "--name", "x", "--wait", "-1s", "--", "true"}, dsnEnv: "postgres://x/y", code: exitUsage, stderr: "--wait"},
		{args: []string{"run", "--name", "x", "--ttl", "soon", "--", "true"}, dsnEnv: "postgres://x/y", code: exitUsage, stderr: `invalid value "soon" for flag -ttl: not a duration: use a number with a unit, for example 30s`},
		{args: []string{"run", "--name", "x", "--ttl", "5", "--", "true"}, dsnEnv: "postgres://x/y", code: exitUsage, stderr: "a duration needs a unit: for example 5s"},
		{args: []string{"run", "--name", "x", "--wait", "1.5", "--", "true"}, dsnEnv: "postgres://x/y", code: exitUsage, stderr: "a duration needs a unit: for example 1.5s"},
		{args: []string{"run", "--name", "x", "--min-hold", "30", "--", "true"}, dsnEnv: "postgres://x/y", code: exitUsage, stderr: "-min-hold: a duration needs a unit"},
		{args: []string{"run", "--name", "x", "--kill-after", "10", "--", "true"}, dsnEnv: "postgres://x/y", code: exitUsage, stderr: "-kill-after: a duration needs a unit"},
		{args: []string{"reap", "--grace", "60"}, dsnEnv: "postgres://x/y", code: exitUsage, stderr: "-grace: a duration needs a unit: for example 60s"},
		{args: []string{"run", "--name", strings.Repeat("n", 300), "--", "true"}, dsnEnv: "postgres://x/y", code: exitUsage, stderr: "longer than 255 bytes"},
		{args: []string{"reap", "--batch", "0"}, dsnEnv: "mysql://u:secret@127.0.0.1:1/x", code: exitUnavailable, stderr: "cannot connect"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			env = func(key string) string {
				if key == "SQLLOCK_DSN" {
					return c.dsnEnv
				}
				return ""
			}
			var stdout, stderr bytes.Buffer
			// Usage errors are answered without waiting on anything; a hang
			// (a connection attempt, a lock wait) fails here instead of at
			// the suite's timeout. A bound for liveness, not for speed.
			done := make(chan int, 1)
			go func() { done <- Main(c.args, &stdout, &stderr) }()
			var code int
			select {
			case code = <-done:
			case <-time.After(time.Minute):
				t.Fatal("Main did not return within a minute")
			}
			if code != c.code || !strings.Contains(stdout.String(), c.stdout) || !strings.Contains(stderr.String(), c.stderr) {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s\nwant stdout containing %q, stderr containing %q",
					code, c.code, stdout.String(), stderr.String(), c.stdout, c.stderr)
			}
			if out := stdout.String() + stderr.String(); strings.Contains(out, "secret") || strings.Contains(out, "goroutine ") {
				t.Errorf("output shows a password or a stack trace:\n%s", out)
			}
		})
	}
	env = func(string) string { return "" }
}

// TestDescribeBuild checks what --version makes of the build information
// Go records: a released module version, and a build from a checkout.
func TestDescribeBuild(t *testing.T) {
	for _, c := range []struct {
		info debug.BuildInfo
		want string
	}{
		{
			info: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"},
				Settings: []debug.BuildSetting{{Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "amd64"}}},
			want: "sqllock v1.2.3 go1.26.8 linux/amd64",
		},
		{
			info: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261122210900-58eda9b1c2d3+dirty"},
				Settings: []debug.BuildSetting{
					{Key: "vcs.revision", Value: "58eda9b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7"}, {Key: "vcs.time", Value: "2026-11-22T21:09:00Z"},
					{Key: "vcs.modified", Value: "true"}, {Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "arm64"},
				}},
			want: "sqllock v0.0.0-20261122210900-58eda9b1c2d3+dirty (commit 58eda9b1c2d3, 2026-11-22T21:09:00Z, modified) go1.26.8 linux/arm64",
		},
		{
			info: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
				Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"}}},
			want: "sqllock (devel) (commit abc) go1.26.8",
		},
		{info: debug.BuildInfo{GoVersion: "go1.26.8"}, want: "sqllock (devel) go1.26.8"},
	} {
		if got := describeBuild(&c.info); got != c.want {
			t.Errorf("describeBuild(%+v) = %q, want %q", c.info, got, c.want)
		}
	}
}

func TestMySQLConfig(t *testing.T) {
	cfg, err := mysqlConfig("mysql://app:p%40ss%2Fword@db.example:3307/orders?tls=skip-verify&timeout=5s&time_zone=%27%2B00%3A00%27")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.User != "app" || cfg.Passwd != "p@ss/word" || cfg.Net != "tcp" || cfg.Addr != "db.example:3307" ||
		cfg.DBName != "orders" || cfg.TLSConfig != "skip-verify" || cfg.Timeout != 5*time.Second ||
		cfg.Params["time_zone"] != "'+00:00'" {
		t.Errorf("config = %+v", cfg)
	}
	for raw, addr := range map[string]string{
		"mysql://root@localhost/db":                        "localhost:3306",
		"mysql://root@[::1]/db":                            "[::1]:3306",
		"mysql:///db":                                      "127.0.0.1:3306",
		"mysql://root@localhost/db?socket=/run/mysql.sock": "/run/mysql.sock",
	} {
		cfg, err := mysqlConfig(raw)
		if err != nil {
			t.Errorf("mysqlConfig(%q): %v", raw, err)
		} else if cfg.Addr != addr {
			t.Errorf("mysqlConfig(%q) = addr %q, want %q", raw, cfg.Addr, addr)
		}
	}
	for _, raw := range []string{"mysql://root@localhost/", "mysql://root@localhost/db?timeout=soon", "mysql://root@localhost:port/db"} {
		if _, err := mysqlConfig(raw); err == nil {
			t.Errorf("mysqlConfig(%q) accepted", raw)
		}
	}
}

// TestMySQLConfigTLS checks that the config is built for the real server:
// with tls=true the certificate must be verified against the host of the
// URL (it was once pinned to 127.0.0.1, so every remote server failed).
func TestMySQLConfigTLS(t *testing.T) {
	for _, c := range []struct {
		raw        string
		addr       string
		serverName string // "" : no TLS, or TLS without verification
		skipVerify bool
		fallback   bool // tls=preferred: plaintext when the server has no TLS
	}{
		{raw: "mysql://app@db.example.com/orders?tls=true", addr: "db.example.com:3306", serverName: "db.example.com"},
		{raw: "mysql://app@db.example.com:3307/orders?tls=true", addr: "db.example.com:3307", serverName: "db.example.com"},
		{raw: "mysql://app@10.1.2.3:3307/orders?tls=true", addr: "10.1.2.3:3307", serverName: "10.1.2.3"},
		{raw: "mysql://app@[2001:db8::7]/orders?tls=true", addr: "[2001:db8::7]:3306", serverName: "2001:db8::7"},
		{raw: "mysql://app@[2001:db8::7]:3310/orders?tls=true", addr: "[2001:db8::7]:3310", serverName: "2001:db8::7"},
		{raw: "mysql://app@[fe80::1%25eth0]:3306/orders?tls=true", addr: "[fe80::1%eth0]:3306", serverName: "fe80::1%eth0"},
		{raw: "mysql:///orders?tls=true", addr: "127.0.0.1:3306", serverName: "127.0.0.1"},
		{raw: "mysql://app@db.example.com/orders?tls=skip-verify", addr: "db.example.com:3306", skipVerify: true},
		{raw: "mysql://app@db.example.com/orders?tls=preferred", addr: "db.example.com:3306", skipVerify: true, fallback: true},
		{raw: "mysql://app@db.example.com/orders?tls=false", addr: "db.example.com:3306"},
		{raw: "mysql://app@db.example.com/orders", addr: "db.example.com:3306"},
	} {
		t.Run(c.raw, func(t *testing.T) {
			cfg, err := mysqlConfig(c.raw)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Net != "tcp" || cfg.Addr != c.addr {
				t.Errorf("net %q addr %q, want tcp %q", cfg.Net, cfg.Addr, c.addr)
			}
			if cfg.DBName != "orders" {
				t.Errorf("database %q, want orders", cfg.DBName)
			}
			wantTLS := c.serverName != "" || c.skipVerify
			switch {
			case !wantTLS && cfg.TLS != nil:
				t.Errorf("TLS config %+v, want none", cfg.TLS)
			case wantTLS && cfg.TLS == nil:
				t.Errorf("no TLS config")
			case wantTLS && (cfg.TLS.ServerName != c.serverName || cfg.TLS.InsecureSkipVerify != c.skipVerify):
				t.Errorf("TLS verifies server name %q (skip verify: %v), want %q (%v)",
					cfg.TLS.ServerName, cfg.TLS.InsecureSkipVerify, c.serverName, c.skipVerify)
			}
			if cfg.AllowFallbackToPlaintext != c.fallback {
				t.Errorf("plaintext fallback %v, want %v", cfg.AllowFallbackToPlaintext, c.fallback)
			}
			// The connector the CLI opens normalizes the config again;
			// it must keep the server name.
			if _, err := mysql.NewConnector(cfg); err != nil {
				t.Errorf("NewConnector: %v", err)
			}
			if wantTLS && cfg.TLS.ServerName != c.serverName {
				t.Errorf("after NewConnector: TLS server name %q, want %q", cfg.TLS.ServerName, c.serverName)
			}
		})
	}
}

// TestMySQLConfigCredentialsAndParams covers what the URL carries besides
// the server: credentials with characters that mean something in a URL or
// in the driver's own DSN format, the database name, and driver
// parameters, which must all arrive unchanged.
func TestMySQLConfigCredentialsAndParams(t *testing.T) {
	for _, c := range []struct {
		raw, user, password, dbname string
	}{
		{"mysql://app:p%40ss%2Fw%3Ard%3F%23%25@db.example/orders", "app", "p@ss/w:rd?#%", "orders"},
		{"mysql://app:%28secret%29@db.example/orders", "app", "(secret)", "orders"},
		{"mysql://app:pa%20ss%26x%3Dy@db.example/orders", "app", "pa ss&x=y", "orders"},
		{"mysql://app:@db.example/orders", "app", "", "orders"},
		{"mysql://a%40b:pw@db.example/orders", "a@b", "pw", "orders"},
		{"mysql://app:pw@db.example/my%2Fdb", "app", "pw", "my/db"},
		{"mysql://app:pw@db.example/orders%3Ftls%3Dfalse?tls=true", "app", "pw", "orders?tls=false"},
	} {
		t.Run(c.raw, func(t *testing.T) {
			cfg, err := mysqlConfig(c.raw)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.User != c.user || cfg.Passwd != c.password || cfg.DBName != c.dbname {
				t.Errorf("user %q password %q database %q, want %q %q %q", cfg.User, cfg.Passwd, cfg.DBName, c.user, c.password, c.dbname)
			}
		})
	}

	cfg, err := mysqlConfig("mysql://app:pw@db.example:3307/orders?tls=true&timeout=5s&readTimeout=2s&writeTimeout=3s" +
		"&parseTime=true&interpolateParams=true&charset=utf8mb4&collation=utf8mb4_bin&time_zone=%27%2B00%3A00%27&loc=UTC")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Timeout != 5*time.Second || cfg.ReadTimeout != 2*time.Second || cfg.WriteTimeout != 3*time.Second ||
		!cfg.ParseTime || !cfg.InterpolateParams || cfg.Collation != "utf8mb4_bin" || cfg.Loc != time.UTC ||
		cfg.Params["time_zone"] != "'+00:00'" || cfg.TLS == nil || cfg.TLS.ServerName != "db.example" {
		t.Errorf("config = %+v", cfg)
	}

	cfg, err = mysqlConfig("mysql://app:pw@ignored.example/orders?socket=%2Frun%2Fmysqld%2Fmysqld.sock&timeout=1s")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Net != "unix" || cfg.Addr != "/run/mysqld/mysqld.sock" || cfg.Timeout != time.Second || cfg.Params["socket"] != "" {
		t.Errorf("socket config = %+v", cfg)
	}

	for _, raw := range []string{
		"mysql://app@db.example/orders?tls=bogus",                                       // not a TLS mode the CLI can name
		"mysql://app@db.example/orders?timeout=xx",                                      // not a duration
		"mysql://app@db.example/orders?interpolateParams=true&collation=gbk_chinese_ci", // unsafe with interpolation
		"mysql://app@db)x/orders",                                                       // ')' would end the driver's address
		"mysql://app@db.example/orders?socket=%2Ftmp%2Fa%29b.sock",                      // likewise in a socket path
	} {
		if _, err := mysqlConfig(raw); err == nil {
			t.Errorf("mysqlConfig(%q) accepted", raw)
		}
	}
}
