package rowlock

// The wake-up engine's database half, the session connection and the
// watcher, is package internal/wake's; marked adapts a Lock to it (the
// store is a wake.WatchStore itself).

// marked is a Lock as its Locker's session sees it: lost when the session
// whose marker its row records ends.
type marked struct{ k *Lock }

func (m marked) SessionLost(cause error) { m.k.lose(cause) }
