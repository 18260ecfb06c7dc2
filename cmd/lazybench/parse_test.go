package main

import "testing"

// TestParseBench: figures on the benchmark's own line, and figures a log
// line of the code under test split from the benchmark's name.
func TestParseBench(t *testing.T) {
	out := "goos: linux\n" +
		"BenchmarkModelCallNoWatcher-2   \t    2000\t    409377 ns/op\t   61344 B/op\t     885 allocs/op\n" +
		"BenchmarkModelCallWatched-2     \t2026/11/26 04:54:48 httputil: ReverseProxy read error during body copy\n" +
		"    2000\t    465307 ns/op\t   77996 B/op\t    1343 allocs/op\n" +
		"BenchmarkGitPerTask/single-2 \t 3\t 1.5e+09 ns/op\t 12.00 git/task\n" +
		"BenchmarkGitPerTask/members=2-2      \t       3\t        35.00 git/task\t        24.00 target-git/task\t  316538 B/op\t    2308 allocs/op\n" +
		"--- BENCH: BenchmarkGitPerTask/members=2-2\n" +
		"    gitcount_bench_test.go:161: member a: 13.0 git processes per task\n" +
		"           8.0  git ls-remote --heads\n" +
		"PASS\n"
	got := parseBench(out)
	for name, want := range map[string]map[string]float64{
		"ModelCallNoWatcher":   {"ns/op": 409377, "B/op": 61344, "allocs/op": 885},
		"ModelCallWatched":     {"ns/op": 465307, "B/op": 77996, "allocs/op": 1343},
		"GitPerTask/single":    {"ns/op": 1.5e9, "git/task": 12},
		"GitPerTask/members=2": {"git/task": 35, "target-git/task": 24, "allocs/op": 2308},
	} {
		for unit, v := range want {
			if got[name][unit] != v {
				t.Errorf("%s %s: %v, want %v (all: %v)", name, unit, got[name][unit], v, got)
			}
		}
	}
}
