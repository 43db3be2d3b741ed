package lockkit_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/internal/lockinput"
	"github.com/sqllock/sqllock/internal/lockkit"
)

func TestValidateName(t *testing.T) {
	cases := []struct {
		name string
		ok   bool
	}{
		{"jobs/nightly", true},
		{strings.Repeat("x", dblock.MaxNameLength), true},
		{"日本語の名前", true},
		{"x'; DROP TABLE dblock_locks; --", true},
		{"", false},
		{strings.Repeat("x", dblock.MaxNameLength+1), false},
		{"bad\xffutf8", false},
		{"nul\x00byte", false},
	}
	for _, c := range cases {
		err := lockinput.ValidateName(c.name)
		if (err == nil) != c.ok {
			t.Errorf("ValidateName(%q) = %v, want ok=%v", c.name, err, c.ok)
		}
		if err != nil {
			var ne *dblock.NameError
			if !errors.Is(err, dblock.ErrInvalidName) || !errors.As(err, &ne) {
				t.Errorf("ValidateName(%q) = %v, want a *NameError wrapping ErrInvalidName", c.name, err)
			}
		}
	}
}

func TestResolveOptions(t *testing.T) {
	o, err := lockinput.ResolveOptions()
	if err != nil || o.TTL != dblock.DefaultTTL || o.MinHold != 0 || o.Fair || o.Note != "" {
		t.Fatalf("defaults = %+v, %v", o, err)
	}
	o, err = lockinput.ResolveOptions(dblock.TTL(time.Minute), dblock.MinHold(time.Second), dblock.Fair(), dblock.Note("n"))
	if err != nil || o.TTL != time.Minute || o.MinHold != time.Second || !o.Fair || o.Note != "n" {
		t.Fatalf("set = %+v, %v", o, err)
	}
	bad := map[string][]dblock.Option{
		"zero TTL":       {dblock.TTL(0)},
		"negative TTL":   {dblock.TTL(-time.Second)},
		"tiny TTL":       {dblock.TTL(dblock.MinTTL - 1)},
		"negative hold":  {dblock.MinHold(-1)},
		"long note":      {dblock.Note(strings.Repeat("n", dblock.MaxNoteLength+1))},
		"non-UTF-8 note": {dblock.Note("\xff")},
		"nil option":     {nil},
	}
	for what, opts := range bad {
		var oe *dblock.OptionError
		if _, err := lockinput.ResolveOptions(opts...); !errors.Is(err, dblock.ErrInvalidOption) || !errors.As(err, &oe) {
			t.Errorf("%s: %v, want *OptionError wrapping ErrInvalidOption", what, err)
		}
	}
}

func TestOwner(t *testing.T) {
	ctx := context.Background()
	a, err := lockinput.OwnerFor(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := lockinput.OwnerFor(ctx)
	if a.ID == b.ID || len(a.ID) != 32 || a.Host != lockinput.ProcessHost() {
		t.Fatalf("fresh owners %+v and %+v: want distinct 128-bit ids of this process", a, b)
	}
	withOwner := dblock.WithOwner(ctx, "worker-1")
	o, err := lockinput.OwnerFor(withOwner)
	if err != nil || o.ID != "worker-1" || o.Host != lockinput.ProcessHost() {
		t.Fatalf("WithOwner: %+v, %v", o, err)
	}
	for _, id := range []string{"", strings.Repeat("i", dblock.MaxOwnerIDLength+1), "\xff"} {
		if _, err := lockinput.OwnerFor(dblock.WithOwner(ctx, id)); !errors.Is(err, dblock.ErrInvalidOption) {
			t.Errorf("owner id %q: %v, want ErrInvalidOption", id, err)
		}
	}
}

// The driver error values below are what pgx and go-sql-driver return for
// these server errors; classification reads only their codes.
func TestClassifyError(t *testing.T) {
	cases := []struct {
		err  error
		want lockkit.ErrorClass
	}{
		{&pgconn.PgError{Code: "40001"}, lockkit.ClassContention},
		{&pgconn.PgError{Code: "40P01"}, lockkit.ClassContention},
		{fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "23505"}), lockkit.ClassContention},
		{&pgconn.PgError{Code: "55P03"}, lockkit.ClassLockUnavailable},
		{&pgconn.PgError{Code: "42P01"}, lockkit.ClassMissingTable},
		{&pgconn.PgError{Code: "42601"}, lockkit.ClassOther},
		{&mysql.MySQLError{Number: 1213}, lockkit.ClassContention},
		{&mysql.MySQLError{Number: 1205}, lockkit.ClassContention},
		{&mysql.MySQLError{Number: 3101}, lockkit.ClassContention},
		{&mysql.MySQLError{Number: 3572}, lockkit.ClassLockUnavailable},
		{&mysql.MySQLError{Number: 1146}, lockkit.ClassMissingTable},
		{&mysql.MySQLError{Number: 4089}, lockkit.ClassMissingTable},
		{&mysql.MySQLError{Number: 1064}, lockkit.ClassOther},
		{&pgconn.PgError{Code: "25006"}, lockkit.ClassReadOnly},
		{&mysql.MySQLError{Number: 1792}, lockkit.ClassReadOnly},
		{&mysql.MySQLError{Number: 1836}, lockkit.ClassReadOnly},
		{&mysql.MySQLError{Number: 1290, Message: "The MariaDB server is running with the --read-only option so it cannot execute this statement"}, lockkit.ClassReadOnly},
		{&mysql.MySQLError{Number: 1290, Message: "The MySQL server is running with the --super-read-only option so it cannot execute this statement"}, lockkit.ClassReadOnly},
		{&mysql.MySQLError{Number: 1290, Message: "The MySQL server is running with the --secure-file-priv option so it cannot execute this statement"}, lockkit.ClassOther},
		{errors.New("sql: database is closed"), lockkit.ClassClosed},
		{nil, lockkit.ClassOther},
	}
	for _, c := range cases {
		if got := lockkit.ClassifyError(c.err); got != c.want {
			t.Errorf("ClassifyError(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	err := lockkit.WrapDBError("acquire", &pgconn.PgError{Code: "42P01"})
	if !errors.Is(err, dblock.ErrSchemaMissing) || !strings.Contains(err.Error(), "migrations.Up") {
		t.Errorf("missing table: %v", err)
	}
	err = lockkit.WrapDBError("renew", &mysql.MySQLError{Number: 1792})
	var myErr *mysql.MySQLError
	if !errors.Is(err, dblock.ErrReadOnly) || !errors.As(err, &myErr) || errors.Is(err, dblock.ErrNotAcquired) {
		t.Errorf("read-only: %v, want ErrReadOnly with the driver error, not ErrNotAcquired", err)
	}
}

// TestIsTxConflict: the errors that roll a whole transaction back, and
// not those that end one statement. 3101 comes from Group Replication,
// which no server here runs, so it is a driver error built by hand.
func TestIsTxConflict(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{&mysql.MySQLError{Number: 1213}, true},
		{fmt.Errorf("commit: %w", &mysql.MySQLError{Number: 3101}), true},
		{&pgconn.PgError{Code: "40001"}, true},
		{&pgconn.PgError{Code: "40P01"}, true},
		{&mysql.MySQLError{Number: 1205}, false}, // a lock wait timeout ends the statement only
		{&mysql.MySQLError{Number: 1062}, false},
		{&pgconn.PgError{Code: "23505"}, false},
		{errors.New("driver: bad connection"), false},
		{nil, false},
	}
	for _, c := range cases {
		if got := lockkit.IsTxConflict(c.err); got != c.want {
			t.Errorf("IsTxConflict(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestParseDialect(t *testing.T) {
	for in, want := range map[string]dblock.Dialect{"postgres": dblock.Postgres, "PostgreSQL": dblock.Postgres, "mysql": dblock.MySQL, "mariadb": dblock.MySQL} {
		if got, err := lockkit.ParseDialect(in); err != nil || got != want {
			t.Errorf("ParseDialect(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := lockkit.ParseDialect("oracle"); !errors.Is(err, dblock.ErrUnknownDialect) {
		t.Errorf("oracle: %v", err)
	}
	if _, err := lockkit.DetectDialect(nil); !errors.Is(err, dblock.ErrInvalidDB) {
		t.Errorf("nil db: %v", err)
	}
}

func TestResolveDialect(t *testing.T) {
	pg, err := sql.Open("pgx", "postgres://nobody@127.0.0.1:1/none")
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	my, err := sql.Open("mysql", "nobody@tcp(127.0.0.1:1)/none")
	if err != nil {
		t.Fatal(err)
	}
	defer my.Close()
	cases := []struct {
		db       *sql.DB
		explicit dblock.Dialect
		want     dblock.Dialect
		err      error
	}{
		{pg, "", dblock.Postgres, nil},
		{my, "", dblock.MySQL, nil},
		{pg, dblock.Postgres, dblock.Postgres, nil},
		{my, dblock.Postgres, "", dblock.ErrUnknownDialect},
		{pg, dblock.MySQL, "", dblock.ErrUnknownDialect},
		{nil, "", "", dblock.ErrInvalidDB},
	}
	for i, c := range cases {
		got, err := lockkit.ResolveDialect(c.db, c.explicit)
		if got != c.want || !errors.Is(err, c.err) || (c.err == nil) != (err == nil) {
			t.Errorf("case %d: ResolveDialect(%q) = %q, %v; want %q, %v", i, c.explicit, got, err, c.want, c.err)
		}
	}
}

func TestRetryContention(t *testing.T) {
	deadlock := &pgconn.PgError{Code: "40P01"}
	calls := 0
	err := lockkit.RetryContention(context.Background(), func() error {
		if calls++; calls < 3 {
			return deadlock
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("two deadlocks then success: err %v after %d calls, want nil after 3", err, calls)
	}
	calls = 0
	syntax := &pgconn.PgError{Code: "42601"}
	if err := lockkit.RetryContention(context.Background(), func() error { calls++; return syntax }); err != syntax || calls != 1 {
		t.Errorf("other error: %v after %d calls, want it after 1", err, calls)
	}
	calls = 0
	if err := lockkit.RetryContention(context.Background(), func() error { calls++; return deadlock }); err != deadlock || calls != lockkit.MaxContentionRetries+1 {
		t.Errorf("endless deadlocks: %v after %d calls, want the deadlock after %d", err, calls, lockkit.MaxContentionRetries+1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls = 0
	if err := lockkit.RetryContention(ctx, func() error { calls++; return deadlock }); err != deadlock || calls != 1 {
		t.Errorf("canceled context: %v after %d calls, want 1 call", err, calls)
	}
}
