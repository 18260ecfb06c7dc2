package review

import "fmt"

// ResolvedWithQueued words a thread resolved while n of its comments are
// still queued: resolving keeps them queued (as a pending comment on
// GitHub, or a draft on Gerrit, is still sent when its thread is
// resolved), so it says they still go and how to keep them back.
func ResolvedWithQueued(n int) string {
	if n == 1 {
		return "Thread resolved. Its queued comment still goes to the agent with the next unblock: withdraw it to keep it back."
	}
	return fmt.Sprintf("Thread resolved. Its %d queued comments still go to the agent with the next unblock: withdraw them to keep them back.", n)
}
