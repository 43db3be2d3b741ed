package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqllock/sqllock/dblock"
	"github.com/sqllock/sqllock/forupdate"
	"github.com/sqllock/sqllock/migrations"
)

// env is one database under measurement.
type env struct {
	target
	db      *sql.DB
	dsn     string
	sql     dialectSQL
	version string
	// fuErr says why forupdate cannot be measured; nil when it can.
	fuErr error
	names registry
	// prefix starts every name this run uses, so runs never collide.
	prefix string
	// prepared holds the statements prepared on pinned connections.
	prepared onConn
}

// newName is a lock name of this run, registered for deletion at the end.
func (e *env) newName(kind string, i ...int) string {
	var b strings.Builder
	b.WriteString(e.prefix)
	b.WriteString(kind)
	for _, k := range i {
		fmt.Fprintf(&b, "-%d", k)
	}
	n := b.String()
	e.names.lock(n)
	return n
}

func open(ctx context.Context, tg target) (*env, error) {
	dsn := tg.dsn
	if v := os.Getenv(tg.env); v != "" {
		dsn = v
	}
	db, err := sql.Open(tg.driver, dsn)
	if err != nil {
		return nil, err
	}
	// The default keeps 2 idle connections: with 16 goroutines the pool
	// would open and close connections all the time.
	db.SetMaxIdleConns(64)
	e := &env{
		target: tg, db: db, dsn: dsn, sql: dialects[tg.dialect],
		// Short: MySQL's GET_LOCK takes names of at most 64 characters.
		prefix: fmt.Sprintf("sqb-%s-", strconv.FormatInt(time.Now().UnixNano()/1e6, 36)),
	}
	if err := migrations.Up(ctx, db); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("migrations: %w", err)
	}
	if err := db.QueryRowContext(ctx, `SELECT version()`).Scan(&e.version); err != nil {
		_ = db.Close()
		return nil, err
	}
	tls, err := e.usesTLS(ctx)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	e.version += "; connections " + tls
	if tg.dialect == dblock.MySQL {
		if cfg, err := mysql.ParseDSN(dsn); err == nil && !cfg.InterpolateParams {
			// It costs every variant alike, the server's own locks too.
			e.version += "; no interpolateParams: a statement with arguments is prepared, run and closed (2 round trips)"
		}
	}
	e.fuErr = e.probeForUpdate(ctx)
	return e, nil
}

// usesTLS tells whether the pool's connections are encrypted (pgx's
// default sslmode=prefer encrypts when the server offers it), which costs
// every variant alike.
func (e *env) usesTLS(ctx context.Context) (string, error) {
	if e.dialect == dblock.Postgres {
		var ssl bool
		err := e.db.QueryRowContext(ctx, `SELECT coalesce((SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()), false)`).Scan(&ssl)
		if ssl {
			return "use TLS", err
		}
		return "are not encrypted", err
	}
	var name, cipher string
	err := e.db.QueryRowContext(ctx, `SHOW SESSION STATUS LIKE 'Ssl_cipher'`).Scan(&name, &cipher)
	if cipher != "" {
		return "use TLS", err
	}
	return "are not encrypted", err
}

// probeForUpdate takes and releases one forupdate lock, to tell whether the
// package and its schema are there.
func (e *env) probeForUpdate(ctx context.Context) error {
	l, err := forupdate.New(e.db)
	if err != nil {
		return err
	}
	defer l.Close()
	name := e.newName("probe")
	e.names.forUpdate(name)
	k, err := l.TryAcquire(ctx, name)
	if err != nil {
		return err
	}
	return k.Release(ctx)
}
