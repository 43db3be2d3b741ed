// Command sqllock manages sqllock's tables and runs commands under a lock,
// from a shell or a crontab.
//
//	sqllock migrate up|down|version     create, drop or inspect the tables
//	sqllock status [--json]             held locks and waiting processes
//	sqllock reap                        delete lapsed locks and dead waiters
//	sqllock run --name NAME -- CMD ...  run CMD while holding lock NAME
//	sqllock --version                   the version sqllock was built from
//
// A crontab line that runs a report on one host at a time, every hour:
//
//	0 * * * * SQLLOCK_DSN=postgres://locks@db/app sqllock run --name jobs/report -- /usr/local/bin/report
//
// The database comes from --dsn or SQLLOCK_DSN. There is no default. It
// takes these forms:
//
//	postgres://user:password@host:5432/db?sslmode=disable   as sql.Open("pgx", ...) takes it
//	mysql://user:password@host:3306/db?tls=true
//	user:password@tcp(host:3306)/db?tls=true                as sql.Open("mysql", ...) takes it
//	sqlite:FILE                                             sqlite:locks.db, sqlite:/var/lib/locks.db
//
// An SQLite file locks the processes of one host. It is created if
// missing, and run creates its tables itself.
//
// Exit codes (sysexits.h where one fits):
//
//	0    success
//	1    any other error
//	64   usage error
//	69   the database cannot be reached or did not answer, or is read-only
//	75   run: the lock is held by another process (silent unless -v)
//	78   the database refused the DSN's user, password or database, the
//	     SQLite file cannot be opened, or the lock tables are missing or
//	     outdated
//
// Once its command started, run exits with the command's code (128+N when
// the command was killed by signal N; 126 when it cannot be executed; 127
// when it is not found).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/migrations"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == watchdogArg {
		os.Exit(runWatchdog(os.Args[2]))
	}
	os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
}

// env lets tests run Main without touching the process environment.
var env = os.Getenv

// Main runs the command line args and returns the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	err := dispatch(args, stdout, stderr)
	return report(err, stderr)
}

// usageError is a mistake in the command line: exit 64, with a hint.
type usageError struct {
	msg     string
	command string // for the hint: "sqllock help <command>"
}

func (e *usageError) Error() string { return e.msg }

func usagef(command, format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...), command: command}
}

// exitCode ends sqllock with a code and, if msg is not empty, a message.
type exitCode struct {
	code int
	msg  string
}

func (e *exitCode) Error() string { return e.msg }

// report prints err for people and turns it into an exit code.
func report(err error, stderr io.Writer) int {
	var usage *usageError
	var code *exitCode
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "sqllock: %s\n", usage.msg)
		if usage.command != "" {
			fmt.Fprintf(stderr, "Run 'sqllock help %s' for usage.\n", usage.command)
		} else {
			fmt.Fprintln(stderr, "Run 'sqllock help' for usage.")
		}
		return exitUsage
	case errors.As(err, &code):
		if code.msg != "" {
			fmt.Fprintf(stderr, "sqllock: %s\n", code.msg)
		}
		return code.code
	case errors.Is(err, dblock.ErrInvalidName), errors.Is(err, dblock.ErrInvalidOption):
		fmt.Fprintf(stderr, "sqllock: %v\n", err)
		return exitUsage
	case errors.As(err, new(*migrations.VersionError)):
		// Also ErrSchemaMissing, but migrate up is not the cure: the error
		// says what is.
		fmt.Fprintf(stderr, "sqllock: %v\n", err)
		return exitConfig
	case errors.Is(err, dblock.ErrSchemaMissing):
		// The sentinel's text speaks to Go programmers (migrations.Up):
		// say it once, for the shell.
		msg := strings.Replace(err.Error(), dblock.ErrSchemaMissing.Error(),
			"the lock tables are missing or outdated in this database (run 'sqllock migrate up' first)", 1)
		fmt.Fprintf(stderr, "sqllock: %s\n", msg)
		return exitConfig
	}
	fmt.Fprintf(stderr, "sqllock: %v\n", err)
	if code := databaseExit(err); code != 0 {
		return code
	}
	return exitError
}

type command struct {
	name    string
	summary string
	usage   string // the arguments after the name
	help    string
	// flags declares the command's own flags on fs and returns the
	// function that runs the command with their parsed values.
	flags func(fs *flag.FlagSet) func(inv *invocation) error
	// interspersed lets flags follow arguments ("migrate down --yes").
	// run does not: everything after its command is the command's.
	interspersed bool
}

// invocation is one run of a command: its arguments and outputs.
type invocation struct {
	cmd            *command
	dsn            string   // --dsn, or "" for $SQLLOCK_DSN
	args           []string // after the flags
	stdout, stderr io.Writer
}

var commands []*command // set in init: the help command lists them

func init() {
	commands = []*command{migrateCommand, statusCommand, reapCommand, runCommand}
}

func findCommand(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

const dsnHelp = `The database is given with --dsn or the SQLLOCK_DSN environment variable:
  postgres://user:password@host:5432/dbname?sslmode=disable
  mysql://user:password@host:3306/dbname?tls=true
  (mysql://user@localhost/dbname?socket=/run/mysqld/mysqld.sock for a socket)
  user:password@tcp(host:3306)/dbname?tls=true   (go-sql-driver/mysql's form)
  sqlite:/path/to/locks.db   (one host only: the processes sharing that file;
                              run and migrate up create it and its tables)
A Go program's DSN works here as it is: the postgres:// URL of
sql.Open("pgx", dsn) and the user:password@tcp(host:3306)/dbname of
sql.Open("mysql", dsn). The other way round, Go's MySQL driver takes no
mysql:// URL: give it the tcp(...) form.`

func topUsage(w io.Writer) {
	fmt.Fprint(w, `sqllock: distributed locks in PostgreSQL or MySQL/MariaDB (or SQLite, on one host)

Usage:
  sqllock [--dsn DSN] <command> [flags] [arguments]

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `  help      show help for a command

Flags:
  --dsn DSN   the database (default $SQLLOCK_DSN)
  --version   print the version sqllock was built from, and exit

`+dsnHelp+`

`+exitCodesHelp+`

Run 'sqllock help <command>' for a command's flags.
`)
}

func commandUsage(w io.Writer, c *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: sqllock %s %s\n\n%s\n", c.name, c.usage, strings.TrimSpace(c.help))
	fmt.Fprintln(w, "\nFlags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprintf(w, "\n%s\n", dsnHelp)
}

func dispatch(args []string, stdout, stderr io.Writer) error {
	global := flag.NewFlagSet("sqllock", flag.ContinueOnError)
	global.SetOutput(io.Discard)
	dsn := global.String("dsn", "", "database URL (default $SQLLOCK_DSN)")
	showVersion := global.Bool("version", false, "print the version and exit")
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			topUsage(stdout)
			return err
		}
		return usagef("", "%v", err)
	}
	if *showVersion {
		fmt.Fprintln(stdout, version())
		return nil
	}
	args = global.Args()
	if len(args) == 0 {
		topUsage(stderr)
		return &exitCode{code: exitUsage}
	}
	name, args := args[0], args[1:]
	if name == "help" {
		return help(args, stdout)
	}
	c := findCommand(name)
	if c == nil {
		return usagef("", "unknown command %q", name)
	}
	inv := &invocation{cmd: c, stdout: stdout, stderr: stderr}
	fs, run := c.flagSet()
	fs.StringVar(&inv.dsn, "dsn", *dsn, "database URL (default $SQLLOCK_DSN)")
	var err error
	if c.interspersed {
		inv.args, err = parseInterspersed(fs, args)
	} else {
		err = fs.Parse(args)
		inv.args = fs.Args()
	}
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			commandUsage(stdout, c, fs)
			return err
		}
		return usagef(c.name, "%v", err)
	}
	return run(inv)
}

// parseInterspersed parses flags wherever they are among args and returns
// the other arguments; those after "--" are all arguments.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" || len(rest) == 0 {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

func help(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		topUsage(stdout)
		return nil
	}
	c := findCommand(args[0])
	if c == nil {
		return usagef("", "unknown command %q", args[0])
	}
	fs, _ := c.flagSet()
	fs.String("dsn", "", "database URL (default $SQLLOCK_DSN)")
	commandUsage(stdout, c, fs)
	return nil
}

// flagSet returns the command's flags and the function that runs it.
func (c *command) flagSet() (*flag.FlagSet, func(*invocation) error) {
	fs := flag.NewFlagSet("sqllock "+c.name, flag.ContinueOnError)
	// Parse errors are reported by report, -h by dispatch.
	fs.SetOutput(io.Discard)
	return fs, c.flags(fs)
}
