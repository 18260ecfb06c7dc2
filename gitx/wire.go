package gitx

import "lazy/api"

// WireFiles converts a parsed git diff to its wire form. Lines are copied in
// one allocation per file.
func WireFiles(fs []File) []api.File {
	out := make([]api.File, len(fs))
	for i, f := range fs {
		n := 0
		for _, h := range f.Hunks {
			n += len(h.Lines)
		}
		lines := make([]api.Line, 0, n)
		hunks := make([]api.Hunk, len(f.Hunks))
		for j, h := range f.Hunks {
			start := len(lines)
			for _, l := range h.Lines {
				lines = append(lines, api.Line{Kind: api.LineKind(l.Kind), Old: l.Old, New: l.New, Text: l.Text, NoEOL: l.NoEOL})
			}
			hunks[j] = api.Hunk{OldStart: h.OldStart, OldLines: h.OldLines, NewStart: h.NewStart, NewLines: h.NewLines,
				Section: h.Section, Lines: lines[start:len(lines):len(lines)]}
		}
		out[i] = api.File{OldPath: f.OldPath, NewPath: f.NewPath, IsNew: f.IsNew, IsDelete: f.IsDelete, IsRename: f.IsRename,
			IsBinary: f.IsBinary, Hunks: hunks, Added: f.Added, Deleted: f.Deleted}
	}
	return out
}

// Wire converts a dry-run merge to its wire form.
func (m MergeCheck) Wire() api.MergeCheck {
	return api.MergeCheck{Clean: m.Clean, Conflicts: m.Conflicts, Ahead: m.Ahead, Behind: m.Behind}
}
