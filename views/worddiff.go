package views

import "unicode/utf8"

// maxWordCells bounds the word diff's table (tokens of the old line times
// tokens of the new one); longer pairs are shown without word marks.
const maxWordCells = 40000

// minCommon is the share of a pair's characters that must be unchanged for
// word marks to help: below it the line was rewritten, and marking nearly
// every word says less than the whole-line colour.
const minCommon = 0.4

// wordDiff marks the runs of words that differ between an old line and the
// new line that replaced it. It returns no marks when the lines have too
// little in common or are too long to compare.
func wordDiff(old, new string) (oldMarks, newMarks []Span) {
	if old == new {
		return nil, nil
	}
	a, b := words(old), words(new)
	if len(a)*len(b) > maxWordCells || len(a) == 0 || len(b) == 0 {
		return nil, nil
	}
	// lcs[i][j]: the longest common subsequence of a[i:] and b[j:], in bytes
	w := len(b) + 1
	lcs := make([]int32, (len(a)+1)*w)
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i].text(old) == b[j].text(new) {
				lcs[i*w+j] = lcs[(i+1)*w+j+1] + int32(a[i].end-a[i].start)
			} else {
				lcs[i*w+j] = max(lcs[(i+1)*w+j], lcs[i*w+j+1])
			}
		}
	}
	if float64(lcs[0]) < minCommon*float64(max(len(old), len(new))) {
		return nil, nil
	}
	keepA, keepB := make([]bool, len(a)), make([]bool, len(b))
	for i, j := 0, 0; i < len(a) && j < len(b); {
		switch {
		case a[i].text(old) == b[j].text(new):
			keepA[i], keepB[j] = true, true
			i, j = i+1, j+1
		case lcs[(i+1)*w+j] >= lcs[i*w+j+1]:
			i++
		default:
			j++
		}
	}
	return runs(a, keepA, old), runs(b, keepB, new)
}

// token is one word, run of spaces or other character of a line.
type token struct{ start, end int }

func (t token) text(s string) string { return s[t.start:t.end] }

// words splits s into words (letters, digits, _), runs of white space, and
// single other characters.
func words(s string) []token {
	var out []token
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		j := i + n
		switch {
		case isWord(r):
			for j < len(s) {
				r2, n2 := utf8.DecodeRuneInString(s[j:])
				if !isWord(r2) {
					break
				}
				j += n2
			}
		case r == ' ' || r == '\t':
			for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
				j++
			}
		}
		out = append(out, token{i, j})
		i = j
	}
	return out
}

func isWord(r rune) bool {
	return r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r > 127 && r != utf8.RuneError
}

// runs turns the tokens not kept into byte spans, joining neighbours (and
// white space between two changed tokens) into one run.
func runs(ts []token, keep []bool, s string) []Span {
	var out []Span
	for i := 0; i < len(ts); i++ {
		if keep[i] {
			continue
		}
		start, end := ts[i].start, ts[i].end
		for i+1 < len(ts) {
			switch {
			case !keep[i+1]:
				i++
				end = ts[i].end
				continue
			case i+2 < len(ts) && !keep[i+2] && isSpace(ts[i+1].text(s)):
				i += 2
				end = ts[i].end
				continue
			}
			break
		}
		out = append(out, Span{Start: start, End: end})
	}
	return out
}

func isSpace(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != ' ' && s[i] != '\t' {
			return false
		}
	}
	return s != ""
}
