package views

import "time"

// TaskRow is one line of the task list.
type TaskRow struct {
	ID, ShortID, Ref, Title, Status, Branch string
	Turns                                   int
	LastActivity                            time.Time
	FailReason                              string
}

// TasksPage is the task list at /.
type TasksPage struct {
	Page
	Tasks []TaskRow
}

// TurnRow is one turn on the task page.
type TurnRow struct {
	Number                        int
	Kind, Trigger, Status, Prompt string
	Result, Error, Output         string
	StartedAt, EndedAt            *time.Time
	IsFailed, IsRunning, IsQueued bool
}

// CommentRow is one ordinary comment.
type CommentRow struct {
	Body      string
	CreatedAt time.Time
}

// TaskPage is /tasks/:id.
type TaskPage struct {
	Page
	Task     TaskRow
	Parent   string
	Turns    []TurnRow
	Comments []CommentRow
}
