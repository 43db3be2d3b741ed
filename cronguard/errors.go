package cronguard

import "errors"

var (
	// ErrDuplicateName is returned by Guard.AddJob and Guard.Schedule for
	// a job name already guarded on the same Cron, by any Guard: two jobs
	// under one lock would skip each other's runs.
	ErrDuplicateName = errors.New("cronguard: a job of that name is already guarded")

	// ErrInvalidSchedule is returned by Guard.AddJob for a spec the
	// Cron's parser refuses (the parser's error is wrapped too), and by
	// Guard.Schedule for a nil schedule.
	ErrInvalidSchedule = errors.New("cronguard: invalid schedule")
)
