package hooks

// SlowOnly makes every call of s a run of the host, as before the fast
// path (tests compare the two).
func SlowOnly(s *Service) { s.slowOnly = true }

// Waiting is how many hooks s counts as waiting for an outcome: what
// Shutdown waits for.
func Waiting(s *Service) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiters
}
