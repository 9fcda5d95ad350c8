package hooks

// SlowOnly makes every call of s a run of the host, as before the fast
// path (tests compare the two).
func SlowOnly(s *Service) { s.slowOnly = true }
