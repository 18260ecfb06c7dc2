//go:build !linux

package safefs

import (
	"io/fs"
	"os"
)

// Dir is a directory opened as a root. Off Linux there is no openat2(2):
// Open always fails with ErrUnsupported, and the daemon does not touch an
// agent's files there.
type Dir struct{ path string }

// Open fails: see ErrUnsupported.
func Open(path string) (*Dir, error) { return nil, pathError("open", path, ErrUnsupported) }

func (d *Dir) Close() error                                        { return nil }
func (d *Dir) Path() string                                        { return d.path }
func (d *Dir) OpenFile(string, int, fs.FileMode) (*os.File, error) { return nil, ErrUnsupported }
func (d *Dir) OpenDir(string) (*Dir, error)                        { return nil, ErrUnsupported }
func (d *Dir) ReadFile(string, int64) ([]byte, error)              { return nil, ErrUnsupported }
func (d *Dir) WriteFile(string, []byte, fs.FileMode) error         { return ErrUnsupported }
func (d *Dir) Stat(string) (fs.FileInfo, error)                    { return nil, ErrUnsupported }
func (d *Dir) MkdirAll(string, fs.FileMode) error                  { return ErrUnsupported }
func (d *Dir) Remove(string) error                                 { return ErrUnsupported }
func (d *Dir) RemoveAll(string) error                              { return ErrUnsupported }
func (d *Dir) Rename(string, string) error                         { return ErrUnsupported }
func (d *Dir) Walk(func(Entry) error) error                        { return ErrUnsupported }
