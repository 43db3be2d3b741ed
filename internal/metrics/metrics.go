// Package metrics holds sqllock's OpenTelemetry instruments, through the
// metric API only: the application chooses the SDK and the exporter. A
// Locker takes a metric.MeterProvider (default: the global one, which
// follows otel.SetMeterProvider even when called later), and what is built
// on it (its fair queue, the reaper) records through the same one (Of).
//
// Attributes are bounded: the lock kind (the implementation: rowlock,
// forupdate), the lock type (mutex, semaphore, read, write, multi), the
// outcome, a cause from a fixed list; never a lock name.
package metrics

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// ScopeName is the instrumentation scope of every sqllock instrument.
const ScopeName = "github.com/sqllock/sqllock"

// Instrument names, in the OpenTelemetry semantic conventions' style.
const (
	NameAcquisitions    = "sqllock.lock.acquisitions"
	NameWaitDuration    = "sqllock.lock.wait.duration"
	NameHoldDuration    = "sqllock.lock.hold.duration"
	NameLost            = "sqllock.lock.lost"
	NameRenewalFailures = "sqllock.lock.renewal.failures"
	NameWaiters         = "sqllock.lock.waiters"
	NameWakeup          = "sqllock.locker.wakeup"
	NameReaperDeleted   = "sqllock.reaper.deleted"
	NameReaperSweeps    = "sqllock.reaper.sweeps"
	NameReplication     = "sqllock.locker.replication"
)

// Attribute keys.
const (
	KeyKind        = attribute.Key("sqllock.lock.kind")        // rowlock, forupdate
	KeyType        = attribute.Key("sqllock.lock.type")        // see the LockType constants
	KeyMode        = attribute.Key("sqllock.acquire.mode")     // wait, try
	KeyResult      = attribute.Key("sqllock.acquire.result")   // acquired, not_acquired, error
	KeyEnd         = attribute.Key("sqllock.lock.end")         // released, lost
	KeyCause       = attribute.Key("sqllock.lock.lost.cause")  // see the Cause constants
	KeyFair        = attribute.Key("sqllock.lock.fair")        // true, false
	KeyWakeup      = attribute.Key("sqllock.wakeup.mode")      // notified, polling
	KeyTable       = attribute.Key("sqllock.reaper.table")     // locks, waiters
	KeySweepResult = attribute.Key("sqllock.reaper.result")    // swept, skipped, failed
	KeyReplication = attribute.Key("sqllock.replication.mode") // async, sync
)

// LockType is what kind of lock a measurement is about, whatever its
// implementation (KeyKind).
type LockType string

// Lock types.
const (
	// TypeMutex: a lock of one holder (Locker.Acquire), also what
	// instruments record unless told otherwise (Instruments.As).
	TypeMutex LockType = "mutex"
	// TypeSemaphore: a permit of a counting semaphore.
	TypeSemaphore LockType = "semaphore"
	// TypeRead and TypeWrite: the shared and the exclusive side of a
	// read/write lock.
	TypeRead  LockType = "read"
	TypeWrite LockType = "write"
	// TypeMulti: several names held together (AcquireAll). Its
	// acquisitions count once per call; its holds, losses and renewal
	// failures once per name, each name being a lock of its own.
	TypeMulti LockType = "multi"
)

// Cause is why a lock was lost.
type Cause string

// Causes of a lost lock.
const (
	// CauseUnreachable: the holder could not reach the database (renew,
	// ping) in time.
	CauseUnreachable Cause = "unreachable"
	// CauseTakenOver: the lock row shows another holder (it lapsed and was
	// taken, or was changed by hand).
	CauseTakenOver Cause = "taken_over"
	// CauseReadOnly: the database turned read-only (a failover).
	CauseReadOnly Cause = "read_only"
	// CauseTransactionEnded: forupdate's transaction ended outside Release.
	CauseTransactionEnded Cause = "transaction_ended"
	// CauseSessionEnded: rowlock's session connection, whose marker the
	// lock relied on, ended or stopped answering (crash detection).
	CauseSessionEnded Cause = "session_ended"
)

// Wait-time buckets, in seconds: from an uncontended take (a millisecond)
// to a job waiting its turn for minutes.
var waitBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

// Hold-time buckets, in seconds: a request's critical section to a
// leadership of hours.
var holdBuckets = []float64{0.001, 0.01, 0.1, 1, 10, 60, 300, 1800, 3600, 4 * 3600, 24 * 3600}

// Default is the meter provider sqllock uses when given none: the global
// one.
func Default() metric.MeterProvider { return otel.GetMeterProvider() }

// Instruments records one kind of lock's measurements.
type Instruments struct {
	acquisitions    metric.Int64Counter
	waitDuration    metric.Float64Histogram
	holdDuration    metric.Float64Histogram
	lost            metric.Int64Counter
	renewalFailures metric.Int64Counter
	waiters         metric.Int64UpDownCounter
	wakeup          metric.Int64UpDownCounter
	reaperDeleted   metric.Int64Counter
	reaperSweeps    metric.Int64Counter
	replication     metric.Int64Counter

	kind attribute.KeyValue
	typ  attribute.KeyValue // KeyType
}

// New creates the instruments of kind (rowlock, forupdate) on mp's meter.
// The errors are the SDK's, for instruments it refuses.
func New(mp metric.MeterProvider, kind string) (*Instruments, error) {
	if mp == nil {
		return nil, errors.New("nil metric.MeterProvider")
	}
	m := mp.Meter(ScopeName)
	in := &Instruments{kind: KeyKind.String(kind), typ: KeyType.String(string(TypeMutex))}
	var errs [10]error
	in.acquisitions, errs[0] = m.Int64Counter(NameAcquisitions, metric.WithUnit("{acquisition}"),
		metric.WithDescription("Acquire and TryAcquire calls, by outcome."))
	in.waitDuration, errs[1] = m.Float64Histogram(NameWaitDuration, metric.WithUnit("s"),
		metric.WithDescription("How long Acquire and TryAcquire took, waiting included, by outcome."),
		metric.WithExplicitBucketBoundaries(waitBuckets...))
	in.holdDuration, errs[2] = m.Float64Histogram(NameHoldDuration, metric.WithUnit("s"),
		metric.WithDescription("How long locks were held, from acquisition to release or loss."),
		metric.WithExplicitBucketBoundaries(holdBuckets...))
	in.lost, errs[3] = m.Int64Counter(NameLost, metric.WithUnit("{lock}"),
		metric.WithDescription("Locks lost while held, by cause."))
	in.renewalFailures, errs[4] = m.Int64Counter(NameRenewalFailures, metric.WithUnit("{failure}"),
		metric.WithDescription("Lease renewals that failed (and were retried until the lock was lost)."))
	in.waiters, errs[5] = m.Int64UpDownCounter(NameWaiters, metric.WithUnit("{waiter}"),
		metric.WithDescription("Acquire calls waiting for a lock now."))
	in.wakeup, errs[6] = m.Int64UpDownCounter(NameWakeup, metric.WithUnit("{locker}"),
		metric.WithDescription("Lockers by how their waiters learn of releases: notified by the database, or polling."))
	in.reaperDeleted, errs[7] = m.Int64Counter(NameReaperDeleted, metric.WithUnit("{row}"),
		metric.WithDescription("Rows the reaper deleted: lapsed locks and dead waiters."))
	in.reaperSweeps, errs[8] = m.Int64Counter(NameReaperSweeps, metric.WithUnit("{sweep}"),
		metric.WithDescription("Reaper sweeps, by outcome."))
	in.replication, errs[9] = m.Int64Counter(NameReplication, metric.WithUnit("{locker}"),
		metric.WithDescription("Lockers by the replication of the PostgreSQL primary they first reached: "+
			"async (no synchronous standby: a failover may lose commits it acknowledged) or sync."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, err
	}
	return in, nil
}

// As returns instruments that record the same measurements through the
// same instruments, for locks of type t: the lock measurements (Acquisition,
// Held, Lost, RenewalFailed, Waiting) carry KeyType t. The Locker-wide ones
// (Wakeup, Sweep) carry no type.
func (in *Instruments) As(t LockType) *Instruments {
	c := *in
	c.typ = KeyType.String(string(t))
	return &c
}

// Mode is how an acquisition was asked for.
type Mode string

// Modes.
const (
	ModeWait Mode = "wait" // Acquire
	ModeTry  Mode = "try"  // TryAcquire
)

// Result is an acquisition's outcome.
type Result string

// Results.
const (
	ResultAcquired    Result = "acquired"
	ResultNotAcquired Result = "not_acquired"
	ResultError       Result = "error"
)

// Acquisition records an Acquire or TryAcquire call, and how long it took.
func (in *Instruments) Acquisition(ctx context.Context, mode Mode, result Result, took time.Duration) {
	attrs := metric.WithAttributes(in.kind, in.typ, KeyMode.String(string(mode)), KeyResult.String(string(result)))
	in.acquisitions.Add(ctx, 1, attrs)
	in.waitDuration.Record(ctx, took.Seconds(), attrs)
}

// Held records a hold that ended after held, lost or released.
func (in *Instruments) Held(ctx context.Context, held time.Duration, lost bool) {
	end := "released"
	if lost {
		end = "lost"
	}
	in.holdDuration.Record(ctx, held.Seconds(), metric.WithAttributes(in.kind, in.typ, KeyEnd.String(end)))
}

// Lost records a lock lost for cause.
func (in *Instruments) Lost(ctx context.Context, cause Cause) {
	in.lost.Add(ctx, 1, metric.WithAttributes(in.kind, in.typ, KeyCause.String(string(cause))))
}

// RenewalFailed records a failed renewal.
func (in *Instruments) RenewalFailed(ctx context.Context) {
	in.renewalFailures.Add(ctx, 1, metric.WithAttributes(in.kind, in.typ))
}

// Waiting adds delta (1 when a wait starts, -1 when it ends) to the
// waiters of fair or unfair locks.
func (in *Instruments) Waiting(ctx context.Context, fair bool, delta int64) {
	in.waiters.Add(ctx, delta, metric.WithAttributes(in.kind, in.typ, KeyFair.Bool(fair)))
}

// WakeupMode is how a Locker's waiters learn of releases.
type WakeupMode string

// Wake-up modes.
const (
	WakeupNotified WakeupMode = "notified" // PostgreSQL LISTEN/NOTIFY, MySQL doorbells
	WakeupPolling  WakeupMode = "polling"
)

// Wakeup adds delta Lockers to those in mode: +1 when a Locker starts
// waking its waiters that way, -1 when it stops.
func (in *Instruments) Wakeup(ctx context.Context, mode WakeupMode, delta int64) {
	in.wakeup.Add(ctx, delta, metric.WithAttributes(in.kind, KeyWakeup.String(string(mode))))
}

// Sweep records one reaper sweep: its outcome (swept, skipped, failed) and
// the rows it deleted.
func (in *Instruments) Sweep(ctx context.Context, result string, locks, waiters int) {
	in.reaperSweeps.Add(ctx, 1, metric.WithAttributes(KeySweepResult.String(result)))
	if locks > 0 {
		in.reaperDeleted.Add(ctx, int64(locks), metric.WithAttributes(KeyTable.String("locks")))
	}
	if waiters > 0 {
		in.reaperDeleted.Add(ctx, int64(waiters), metric.WithAttributes(KeyTable.String("waiters")))
	}
}

// ReplicationMode is how a PostgreSQL primary replicates the commits it
// acknowledges.
type ReplicationMode string

// Replication modes.
const (
	// ReplicationAsync: no synchronous standby. A failover may lose
	// commits the primary acknowledged.
	ReplicationAsync ReplicationMode = "async"
	// ReplicationSync: a commit is acknowledged once a synchronous
	// standby has it.
	ReplicationSync ReplicationMode = "sync"
)

// Replication records, once per Locker, the replication of the
// PostgreSQL primary it first reached.
func (in *Instruments) Replication(ctx context.Context, mode ReplicationMode) {
	in.replication.Add(ctx, 1, metric.WithAttributes(in.kind, KeyReplication.String(string(mode))))
}
