package lockkit

import (
	"errors"

	"github.com/go-sql-driver/mysql"
)

// IsTxConflict reports whether err says that the server rolled back a
// whole transaction because it lost a conflict with another: MySQL and
// MariaDB 1213 (a deadlock, and on a Galera cluster a failed
// certification or a brute-force abort), MySQL 3101 (a failed
// certification of Group Replication, untested: no such server runs
// here), PostgreSQL 40001 and 40P01. Run
// again, such a transaction may succeed. It is narrower than
// ClassContention, which also counts errors that end one statement only
// (1205, a duplicate key).
func IsTxConflict(err error) bool {
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) {
		return myErr.Number == 1213 || myErr.Number == 3101
	}
	var pgErr sqlStater
	if errors.As(err, &pgErr) {
		code := pgErr.SQLState()
		return code == "40001" || code == "40P01"
	}
	return false
}
