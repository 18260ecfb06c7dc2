package store

import (
	"context"
	"time"

	"gorm.io/gorm"
)

// The review state a reviewer keeps on a task (migration 33): which files
// they viewed (per content: a mark names the hash of the file's diff it was
// made on, so a changed diff is not viewed), which threads are resolved, and
// the head they last reviewed ("changes since your last review"). It lives
// on the server, so a second browser, or another member of a cluster, sees
// what the first one marked.

// ViewedFile is a file a reviewer marked viewed when its diff had DiffHash.
type ViewedFile struct {
	Reviewer string    `json:"reviewer" gorm:"primaryKey"`
	TaskID   string    `json:"task_id" gorm:"primaryKey;size:32"`
	Path     string    `json:"path" gorm:"primaryKey"`
	DiffHash string    `json:"diff_hash" gorm:"primaryKey"`
	At       time.Time `json:"at"`
}

// TableName is the table of viewed marks.
func (ViewedFile) TableName() string { return "review_viewed" }

// ResolvedThread is a thread marked resolved: one per thread (a thread is
// resolved for everyone who reads the task, as on GitHub), with who
// resolved it and how many messages it had then (a message after that
// opens it again).
type ResolvedThread struct {
	TaskID   string    `json:"task_id" gorm:"primaryKey;size:32"`
	ThreadID string    `json:"thread_id" gorm:"primaryKey"`
	Reviewer string    `json:"reviewer"`
	Messages int       `json:"messages"`
	At       time.Time `json:"at"`
}

// TableName is the table of resolved threads.
func (ResolvedThread) TableName() string { return "review_resolved" }

// ReviewedHead is the task branch head a reviewer last reviewed, and the
// one before it (what "changes since your last review" runs from once the
// page has shown the new head).
type ReviewedHead struct {
	Reviewer string    `json:"reviewer" gorm:"primaryKey"`
	TaskID   string    `json:"task_id" gorm:"primaryKey;size:32"`
	Head     string    `json:"head"`
	Prev     string    `json:"prev"`
	At       time.Time `json:"at"`
}

// TableName is the table of reviewed heads.
func (ReviewedHead) TableName() string { return "review_heads" }

// ReviewState is one reviewer's state on one task.
type ReviewState struct {
	Viewed   []ViewedFile     `json:"viewed"`   // by path
	Resolved []ResolvedThread `json:"resolved"` // every thread of the task resolved, by thread id
	Head     *ReviewedHead    `json:"head"`     // nil: never reviewed
}

// See moves h to head: the head it had becomes Prev when head differs.
func (h *ReviewedHead) See(head string, at time.Time) {
	if h.Head != head {
		h.Prev, h.Head = h.Head, head
	}
	h.At = at.UTC()
}

// SetViewed marks v.Path viewed by v.Reviewer at v.DiffHash (on) — the
// marks on other contents of the path go — or not viewed at any content
// (off; v.DiffHash is ignored).
func (s *SQL) SetViewed(ctx context.Context, v ViewedFile, on bool) error {
	return mapErr("set viewed "+v.Path, s.w.do(ctx, func(tx *gorm.DB) error {
		if err := tx.Where("reviewer = ? AND task_id = ? AND path = ?", v.Reviewer, v.TaskID, v.Path).Delete(&ViewedFile{}).Error; err != nil {
			return err
		}
		if !on {
			return nil
		}
		v.At = v.At.UTC()
		return tx.Create(&v).Error
	}))
}

// SetResolved marks a thread resolved (on: replacing an earlier mark) or
// not.
func (s *SQL) SetResolved(ctx context.Context, r ResolvedThread, on bool) error {
	return mapErr("set resolved "+r.ThreadID, s.w.do(ctx, func(tx *gorm.DB) error {
		if err := tx.Where("task_id = ? AND thread_id = ?", r.TaskID, r.ThreadID).Delete(&ResolvedThread{}).Error; err != nil {
			return err
		}
		if !on {
			return nil
		}
		r.At = r.At.UTC()
		return tx.Create(&r).Error
	}))
}

// SeeHead records head as the one reviewer last reviewed on the task.
func (s *SQL) SeeHead(ctx context.Context, reviewer, taskID, head string, at time.Time) (*ReviewedHead, error) {
	var out ReviewedHead
	err := s.w.do(ctx, func(tx *gorm.DB) error {
		var rows []ReviewedHead
		lock := ""
		if s.ck == nil { // PostgreSQL: members updating the same row take turns
			lock = " FOR UPDATE"
		}
		if err := tx.Raw(`SELECT * FROM review_heads WHERE reviewer = ? AND task_id = ?`+lock, reviewer, taskID).Scan(&rows).Error; err != nil {
			return err
		}
		if len(rows) == 0 {
			out = ReviewedHead{Reviewer: reviewer, TaskID: taskID}
			out.See(head, at)
			return tx.Create(&out).Error
		}
		out = rows[0]
		out.See(head, at)
		return tx.Model(&ReviewedHead{}).Where("reviewer = ? AND task_id = ?", reviewer, taskID).
			Updates(map[string]any{"head": out.Head, "prev": out.Prev, "at": out.At}).Error
	})
	if err != nil {
		return nil, mapErr("see head", err)
	}
	return &out, nil
}

// ReviewState reads reviewer's state on a task.
func (s *SQL) ReviewState(ctx context.Context, reviewer, taskID string) (*ReviewState, error) {
	st := &ReviewState{Viewed: []ViewedFile{}, Resolved: []ResolvedThread{}}
	err := s.read(ctx, func(db *gorm.DB) error {
		if err := db.Where("reviewer = ? AND task_id = ?", reviewer, taskID).Order("path").Find(&st.Viewed).Error; err != nil {
			return err
		}
		if err := db.Where("task_id = ?", taskID).Order("thread_id").Find(&st.Resolved).Error; err != nil {
			return err
		}
		var heads []ReviewedHead
		if err := db.Where("reviewer = ? AND task_id = ?", reviewer, taskID).Find(&heads).Error; err != nil {
			return err
		}
		if len(heads) > 0 {
			st.Head = &heads[0]
		}
		return nil
	})
	if err != nil {
		return nil, mapErr("read review state", err)
	}
	return st, nil
}
