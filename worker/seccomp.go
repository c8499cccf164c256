package worker

// installSeccomp is filled in by the system-call filter.
func installSeccomp() error { return nil }
