package daemon

import (
	"fmt"
	"sort"
	"strings"

	"lazy/task"
)

// notFoundNear is a task ref that matches no task, with the refs nearest
// to it (a typo of a code or a short id).
type notFoundNear struct {
	*task.NotFoundError
	near []string
}

func (e *notFoundNear) Error() string {
	return fmt.Sprintf("no task matches %q: did you mean %s? (`lazy task list` shows every task)", e.Input, strings.Join(e.near, " or "))
}

func (e *notFoundNear) Unwrap() error { return e.NotFoundError }

// nearRefs are the codes and short ids of ids within a typo of in: an
// edit distance of at most 2 (1 for inputs of 4 characters or fewer),
// case ignored, nearest first, at most three.
func nearRefs(in string, ids []task.Ident) []string {
	in = strings.ToLower(in)
	limit := 2
	if len(in) <= 4 {
		limit = 1
	}
	type cand struct {
		ref  string
		dist int
	}
	var cs []cand
	seen := map[string]bool{}
	for _, id := range ids {
		for _, ref := range []string{id.Code, task.ShortID(id.ID)} {
			if ref == "" || seen[ref] {
				continue
			}
			seen[ref] = true
			if d := editDistance(in, strings.ToLower(ref)); d <= limit {
				cs = append(cs, cand{ref, d})
			}
		}
	}
	sort.SliceStable(cs, func(i, j int) bool {
		if cs[i].dist != cs[j].dist {
			return cs[i].dist < cs[j].dist
		}
		return cs[i].ref < cs[j].ref
	})
	var out []string
	for i := 0; i < len(cs) && i < 3; i++ {
		out = append(out, cs[i].ref)
	}
	return out
}

// editDistance is the Damerau–Levenshtein distance (adjacent swaps count
// one) of a and b, byte-wise: refs are ASCII.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 30
	}
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := 0; j <= len(b); j++ {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
