package store

import (
	"context"
	"encoding/json"
	"sort"
	"time"
)

// reviewMarks is a task's review state in the file store: a record each
// change ("viewed", "resolved", "seen"), replayed in order on open.
type reviewMarks struct {
	viewed   map[[2]string]ViewedFile // by reviewer and path: one content each
	resolved map[string]ResolvedThread
	heads    map[string]ReviewedHead // by reviewer
}

// markRecord is one change: a viewed or resolved mark set (On) or taken
// off, or a head seen.
type markRecord struct {
	On       bool            `json:"on"`
	Viewed   *ViewedFile     `json:"viewed,omitempty"`
	Resolved *ResolvedThread `json:"resolved,omitempty"`
	Head     *ReviewedHead   `json:"head,omitempty"`
}

func (m *reviewMarks) apply(r record) error {
	var mr markRecord
	if err := json.Unmarshal(r.V, &mr); err != nil {
		return err
	}
	if m.viewed == nil {
		m.viewed, m.resolved, m.heads = map[[2]string]ViewedFile{}, map[string]ResolvedThread{}, map[string]ReviewedHead{}
	}
	switch {
	case mr.Viewed != nil:
		k := [2]string{mr.Viewed.Reviewer, mr.Viewed.Path}
		if mr.On {
			m.viewed[k] = *mr.Viewed
		} else {
			delete(m.viewed, k)
		}
	case mr.Resolved != nil:
		if mr.On {
			m.resolved[mr.Resolved.ThreadID] = *mr.Resolved
		} else {
			delete(m.resolved, mr.Resolved.ThreadID)
		}
	case mr.Head != nil:
		m.heads[mr.Head.Reviewer] = *mr.Head
	}
	return nil
}

// SetViewed appends a viewed record to the task's file.
func (f *File) SetViewed(_ context.Context, v ViewedFile, on bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft, err := f.get(v.TaskID)
	if err != nil {
		return err
	}
	v.At = v.At.UTC()
	return f.write(v.TaskID, "viewed", markRecord{On: on, Viewed: &v}, ft)
}

// SetResolved appends a resolved record to the task's file.
func (f *File) SetResolved(_ context.Context, r ResolvedThread, on bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft, err := f.get(r.TaskID)
	if err != nil {
		return err
	}
	r.At = r.At.UTC()
	return f.write(r.TaskID, "resolved", markRecord{On: on, Resolved: &r}, ft)
}

// SeeHead appends the reviewer's head, moved to head.
func (f *File) SeeHead(_ context.Context, reviewer, taskID, head string, at time.Time) (*ReviewedHead, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft, err := f.get(taskID)
	if err != nil {
		return nil, err
	}
	h, ok := ft.marks.heads[reviewer]
	if !ok {
		h = ReviewedHead{Reviewer: reviewer, TaskID: taskID}
	}
	h.See(head, at)
	if err := f.write(taskID, "seen", markRecord{On: true, Head: &h}, ft); err != nil {
		return nil, err
	}
	return &h, nil
}

// ReviewState reads reviewer's state on a task from memory.
func (f *File) ReviewState(_ context.Context, reviewer, taskID string) (*ReviewState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft, err := f.get(taskID)
	if err != nil {
		return nil, err
	}
	st := &ReviewState{Viewed: []ViewedFile{}, Resolved: []ResolvedThread{}}
	for k, v := range ft.marks.viewed {
		if k[0] == reviewer {
			st.Viewed = append(st.Viewed, v)
		}
	}
	sort.Slice(st.Viewed, func(i, j int) bool { return st.Viewed[i].Path < st.Viewed[j].Path })
	for _, r := range ft.marks.resolved {
		st.Resolved = append(st.Resolved, r)
	}
	sort.Slice(st.Resolved, func(i, j int) bool { return st.Resolved[i].ThreadID < st.Resolved[j].ThreadID })
	if h, ok := ft.marks.heads[reviewer]; ok {
		st.Head = &h
	}
	return st, nil
}
