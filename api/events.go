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
	Kind    string    `json:"kind"` // status | turn_start | turn_end | net | tripwire | model_error | config | daemon_stopped | transcript
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

// EventConfig says what a change of the config file did (applied keys, or
// why it was not applied).
const EventConfig = "config"

// EventDaemonStopped ends every watch stream when the daemon stops.
const EventDaemonStopped = "daemon_stopped"
