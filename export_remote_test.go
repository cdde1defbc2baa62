package kvik

import "time"

// SetRemoteBackoff shortens the first retry's backoff for tests.
func SetRemoteBackoff(d time.Duration) (restore func()) {
	old := remoteBaseDelay
	remoteBaseDelay = d
	return func() { remoteBaseDelay = old }
}
