package lockkit

// TimelineShift is where a PostgreSQL fencing token's timeline begins: a
// token drawn on timeline T is at least T<<TimelineShift, so 2^40 tokens
// fit in one timeline, and 2^23 timelines in an int64.
const TimelineShift = 40

// PgTimeline is an SQL expression: the current WAL timeline of a
// PostgreSQL primary. A standby's promotion (planned or not) starts a new,
// larger timeline at once, which the name of the current WAL file shows
// (pg_control_checkpoint().timeline_id lags until the next checkpoint).
// It fails on a standby (recovery is in progress), as every write does.
const PgTimeline = `(('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint)`

// PgTimelineBase is an SQL expression: PgTimeline shifted to
// TimelineShift. Asynchronous replication can lose the last commits of a
// primary that dies, and with them tokens it handed out: a token drawn on
// the promoted server, at least its timeline's base, is still above every
// token drawn on the timeline before, so none is handed out twice and
// none goes backwards. Read in the statement that draws the token, on the
// server that draws it.
const PgTimelineBase = `(` + PgTimeline + ` << 40)`
