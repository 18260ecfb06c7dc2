package httpapi

import (
	"context"

	"lazy/api"
)

// RawFiles serves a changed file's own bytes, streamed: the "raw file" link
// of a file too large to show, or binary. It is no command (a stream of
// bytes, not JSON): the daemon's review has it; where Deps.RawFiles is nil
// (the dev server) the route says so.
type RawFiles interface {
	RawFile(ctx context.Context, ref, path, side string) (*api.RawFile, error)
}
