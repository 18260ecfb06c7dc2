package task

// Turn kinds and states, as a turn row and its wire form (api.Turn) carry
// them.
const (
	TurnWork  = "work"
	TurnAsk   = "ask"
	TurnSetup = "setup" // [setup] run, before the first work turn

	TurnQueued      = "queued"
	TurnRunning     = "running"
	TurnDone        = "done"
	TurnFailed      = "failed"
	TurnInterrupted = "interrupted"
)
