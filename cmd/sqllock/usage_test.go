package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
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
		{args: []string{"--dsn", "redis://localhost", "status"}, code: exitUsage, stderr: "use postgres:// or mysql://"},
		{args: []string{"status", "--dsn", "localhost:5432"}, code: exitUsage, stderr: "must be a URL"},
		{args: []string{"--dsn", "postgres://u:secret@127.0.0.1:99999/x", "status"}, code: exitUsage, stderr: "invalid port"},
		{args: []string{"--dsn", "mysql://u:secret@127.0.0.1:1/x", "status"}, code: exitError, stderr: "cannot connect to mysql at 127.0.0.1:1"},
		{args: []string{"--dsn", "mysql://u:secret@127.0.0.1/", "status"}, code: exitUsage, stderr: "no database name"},
		{args: []string{"migrate"}, dsnEnv: "postgres://x/y", code: exitUsage, stderr: "one of up, down, version"},
		{args: []string{"migrate", "sideways"}, dsnEnv: "postgres://x/y", code: exitUsage, stderr: `unknown migrate action "sideways"`},
		{args: []string{"migrate", "down"}, dsnEnv: "postgres://x/y", code: exitUsage, stderr: "pass --yes"},
		{args: []string{"run", "--", "true"}, dsnEnv: "postgres://x/y", code: exitUsage, stderr: "--name is required"},
		{args: []string{"run", "--name", "x"}, dsnEnv: "postgres://x/y", code: exitUsage, stderr: "no command to run"},
		{args: []string{"run", "--name", "x", "--ttl", "1ms", "--", "true"}, dsnEnv: "postgres://x/y", code: exitUsage, stderr: "TTL: must be at least"},
		{args: []string{"run", "--name", "x", "--wait", "-1s", "--", "true"}, dsnEnv: "postgres://x/y", code: exitUsage, stderr: "--wait"},
		{args: []string{"run", "--name", "x", "--ttl", "soon", "--", "true"}, dsnEnv: "postgres://x/y", code: exitUsage, stderr: "invalid value"},
		{args: []string{"run", "--name", strings.Repeat("n", 300), "--", "true"}, dsnEnv: "postgres://x/y", code: exitUsage, stderr: "longer than 255 bytes"},
		{args: []string{"reap", "--batch", "0"}, dsnEnv: "mysql://u:secret@127.0.0.1:1/x", code: exitError, stderr: "cannot connect"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			env = func(key string) string {
				if key == "SQLLOCK_DSN" {
					return c.dsnEnv
				}
				return ""
			}
			var stdout, stderr bytes.Buffer
			start := time.Now()
			code := Main(c.args, &stdout, &stderr)
			if code != c.code || !strings.Contains(stdout.String(), c.stdout) || !strings.Contains(stderr.String(), c.stderr) {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s\nwant stdout containing %q, stderr containing %q",
					code, c.code, stdout.String(), stderr.String(), c.stdout, c.stderr)
			}
			if out := stdout.String() + stderr.String(); strings.Contains(out, "secret") || strings.Contains(out, "goroutine ") {
				t.Errorf("output shows a password or a stack trace:\n%s", out)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
	env = func(string) string { return "" }
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
