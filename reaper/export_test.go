package reaper

// SetSweepingHook makes r call f(true) when a sweep starts under the reaper
// lock and f(false) when it ends. Set it before r runs.
func SetSweepingHook(r *Reaper, f func(sweeping bool)) { r.sweeping = f }
