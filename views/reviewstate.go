package views

import "lazy/api"

// ApplyReviewState marks what the reviewer's state says on the view: a
// file viewed at the content its diff has now (a mark on another content
// is void), a thread resolved with no message since it was resolved.
func ApplyReviewState(d *DiffView, orphans []ThreadView, st *api.ReviewState) {
	if st == nil {
		return
	}
	mark := func(ts []ThreadView) {
		for i := range ts {
			r, ok := st.Resolved[ts[i].ID]
			if ok && r.Messages == len(ts[i].Messages) {
				ts[i].Resolved = true
				if d.Commentable { // an ended task's queued comments never go
					ts[i].QueuedResolved = r.Queued
				}
			}
		}
	}
	for fi := range d.Files {
		f := &d.Files[fi]
		f.Viewed = f.Hash != "" && st.Viewed[f.Path] == f.Hash
		for hi := range f.Hunks {
			for ri := range f.Hunks[hi].Rows {
				mark(f.Hunks[hi].Rows[ri].Threads)
			}
		}
	}
	mark(orphans)
}
