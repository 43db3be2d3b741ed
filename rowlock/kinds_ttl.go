package rowlock

import "time"

// TTL is how much of every name's lease is sure to be left: the least of
// the names' (see Lock.TTL), 0 once released or lost.
func (m *MultiLock) TTL() time.Duration {
	if m.Err() != nil {
		return 0
	}
	least := m.locks[0].TTL()
	for _, k := range m.locks[1:] {
		least = min(least, k.TTL())
	}
	return least
}
