package api

import "time"

// ActorHealth is one row of `lazy actors` and /api/actors.
type ActorHealth struct {
	Name         string     `json:"name"`
	Kind         string     `json:"kind"` // supervisor | grants | traffic | task
	TaskID       string     `json:"task_id,omitempty"`
	TaskRef      string     `json:"task_ref,omitempty"`
	Mailbox      int        `json:"mailbox"`
	Queued       []string   `json:"queued"`
	Running      string     `json:"running,omitempty"`
	RunningSince *time.Time `json:"running_since,omitempty"`
	Restarts     int        `json:"restarts"`
	LastFailure  string     `json:"last_failure,omitempty"`
	Responsive   bool       `json:"responsive"`
}

// Event is one line of `lazy watch`: a task event or a proxy traffic event.
type Event struct {
	Time    time.Time `json:"time"`
	Kind    EventKind `json:"kind"`
	TaskID  string    `json:"task_id,omitempty"`
	TaskRef string    `json:"task_ref,omitempty"`
	Status  string    `json:"status,omitempty"`
	Turn    int       `json:"turn,omitempty"`
	// Label names the turn of a turn event as the CLI does ("work turn 3",
	// "ask 2"); Turn is its record number
	Label  string   `json:"label,omitempty"`
	Detail string   `json:"detail,omitempty"`
	Net    *Traffic `json:"net,omitempty"`
	// Transcript is a transcript event's part (EventTranscript).
	Transcript *TranscriptPart `json:"transcript,omitempty"`
}

// EventKind is what an Event tells. EventKinds lists every kind; the
// table "Watch events" in docs/GUIDE.md lists the same, and an event is
// never built with a bare string kind (both checked by events_test.go).
type EventKind string

// The kinds of event, in the order of EventKinds.
const (
	// EventStatus: the task's status changed (Status; Detail: why).
	EventStatus EventKind = "status"
	// EventTurnStart: a work, ask or setup turn started (Turn, Label).
	EventTurnStart EventKind = "turn_start"
	// EventTurnEnd: a turn ended (Turn, Label, Status: the turn's; Detail:
	// its error).
	EventTurnEnd EventKind = "turn_end"
	// EventTurnNote: what the daemon said of a turn as it started (Detail).
	EventTurnNote EventKind = "turn_note"
	// EventAskEnd: an ask was answered or failed (Status; Detail: why).
	EventAskEnd EventKind = "ask_end"
	// EventTitle: the task was renamed (Detail).
	EventTitle EventKind = "title"
	// EventBudget: the task's token budget changed (Detail).
	EventBudget EventKind = "budget"
	// EventTripwire: the task's traffic tripped a wire and its grant was
	// revoked (Detail).
	EventTripwire EventKind = "tripwire"
	// EventModelError: the model upstream failed the task's calls (Detail).
	EventModelError EventKind = "model_error"
	// EventPush: in a cluster, the push of the task branch to the git
	// remote failed and waits (Detail: since when, the error, the next
	// try), or it landed.
	EventPush EventKind = "push"
	// EventNet: one proxied call or egress connection (Net).
	EventNet EventKind = "net"
	// EventTranscript: a part of a model exchange of the task's running
	// turn, as the proxy read it from the reply (Transcript; scrubbed:
	// never a real credential, never a placeholder). CONTRACT §17.
	EventTranscript EventKind = "transcript"
	// EventConfig says what a change of the config file did (applied keys,
	// or why it was not applied).
	EventConfig EventKind = "config"
	// EventDaemonStopped ends every watch stream when the daemon stops.
	EventDaemonStopped EventKind = "daemon_stopped"
)

// EventKinds is every kind of event, in the order the docs list them.
func EventKinds() []EventKind {
	return []EventKind{EventStatus, EventTurnStart, EventTurnEnd, EventTurnNote, EventAskEnd, EventTitle, EventBudget,
		EventTripwire, EventModelError, EventPush, EventNet, EventTranscript, EventConfig, EventDaemonStopped}
}
