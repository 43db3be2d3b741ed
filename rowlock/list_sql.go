package rowlock

// The statements of the listings (list.go), per dialect; SQLite's are in
// sqlite.go.

// The listing queries compute durations in the database, against one
// reading of its clock.
const (
	pgHeldColumns = `
SELECT name, token, owner_host, owner_id, hold_count, note,
    (extract(epoch FROM c.now - acquired_at) * 1000000)::bigint,
    (extract(epoch FROM expires_at - c.now) * 1000000)::bigint
FROM ` + locksTable + ` CROSS JOIN (SELECT clock_timestamp() AS now) c`

	pgLocks = pgHeldColumns + ` WHERE expires_at > c.now ORDER BY name LIMIT $1`

	pgHeld = pgHeldColumns + ` WHERE name = $1 AND expires_at > c.now`

	pgCountLapsed = `SELECT count(*) FROM ` + locksTable + ` WHERE expires_at <= clock_timestamp()`
)

// The listing queries compute durations in the database:
// UTC_TIMESTAMP(6) is fixed for the statement, and DATETIME columns could
// not be scanned without parseTime in the DSN.
const (
	myHeldColumns = `
SELECT name, token, owner_host, owner_id, hold_count, note,
    TIMESTAMPDIFF(MICROSECOND, acquired_at, UTC_TIMESTAMP(6)),
    TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires_at)
FROM ` + locksTable

	myLocks = myHeldColumns + ` WHERE expires_at > UTC_TIMESTAMP(6) ORDER BY name LIMIT ?`

	myHeldByName = myHeldColumns + ` WHERE name = ? AND expires_at > UTC_TIMESTAMP(6)`

	myCountLapsed = `SELECT count(*) FROM ` + locksTable + ` WHERE expires_at <= UTC_TIMESTAMP(6)`
)
