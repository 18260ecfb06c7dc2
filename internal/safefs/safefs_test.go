package safefs

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// planted is a directory as an agent could leave it: real files beside
// links to a secret outside, to a directory outside, a dangling link, a
// link to a pipe and to a device.
type planted struct {
	root, outside, secret string
}

func plant(t *testing.T) planted {
	t.Helper()
	base := t.TempDir()
	p := planted{root: filepath.Join(base, "home"), outside: filepath.Join(base, "outside")}
	for _, d := range []string{p.root, p.outside, filepath.Join(p.root, "real")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	p.secret = filepath.Join(p.outside, "passwd")
	write(t, p.secret, "root:x:0:0:secret")
	write(t, filepath.Join(p.root, "real", "file"), "inside")
	if err := syscall.Mkfifo(filepath.Join(p.root, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{
		"to-secret":  p.secret,
		"to-outside": p.outside,
		"dangling":   filepath.Join(p.outside, "nothing-yet"),
		"to-fifo":    filepath.Join(p.root, "fifo"),
		"to-zero":    "/dev/zero",
		"inside":     "real/file", // stays inside: still never followed
		"to-dotdot":  "../outside",
	} {
		if err := os.Symlink(target, filepath.Join(p.root, name)); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func open(t *testing.T, path string) *Dir {
	t.Helper()
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// untouched fails the test when anything outside the root changed.
func (p planted) untouched(t *testing.T) {
	t.Helper()
	if got := read(t, p.secret); got != "root:x:0:0:secret" {
		t.Errorf("the file outside holds %q", got)
	}
	ents, err := os.ReadDir(p.outside)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 {
		t.Errorf("the directory outside holds %d entries, want only passwd", len(ents))
	}
}

func TestReadNeverFollowsALink(t *testing.T) {
	p := plant(t)
	d := open(t, p.root)
	if b, err := d.ReadFile("real/file", 100); err != nil || string(b) != "inside" {
		t.Fatalf("a real file: %q %v", b, err)
	}
	for _, name := range []string{"to-secret", "to-outside/passwd", "dangling", "inside", "to-dotdot/passwd", "to-zero"} {
		b, err := d.ReadFile(name, 1<<20)
		if !errors.Is(err, ErrLink) {
			t.Errorf("read %s: got %q, %v; want ErrLink", name, b, err)
		}
	}
	for _, name := range []string{"../outside/passwd", p.secret, "real/../../outside/passwd"} {
		if _, err := d.ReadFile(name, 100); !errors.Is(err, ErrEscape) {
			t.Errorf("read %s: %v, want ErrEscape", name, err)
		}
	}
	// a pipe is refused at once, never waited on
	done := make(chan error, 1)
	go func() { _, err := d.ReadFile("fifo", 100); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) {
			t.Errorf("read a pipe: %v, want ErrNotRegular", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reading a pipe blocked")
	}
	write(t, filepath.Join(p.root, "big"), strings.Repeat("x", 101))
	if _, err := d.ReadFile("big", 100); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a file over the limit: %v", err)
	}
}

func TestWriteReplacesALinkNeverItsTarget(t *testing.T) {
	p := plant(t)
	d := open(t, p.root)
	for _, name := range []string{"to-secret", "dangling", "inside", "to-zero"} {
		if err := d.WriteFile(name, []byte("mark"), 0o600); err != nil {
			t.Fatalf("write %s: %v", name, err)
		}
		fi, err := os.Lstat(filepath.Join(p.root, name))
		if err != nil || !fi.Mode().IsRegular() || read(t, filepath.Join(p.root, name)) != "mark" {
			t.Errorf("%s after the write: %v %v, want a regular file holding the mark", name, fi.Mode(), err)
		}
	}
	if got := read(t, filepath.Join(p.root, "real", "file")); got != "inside" {
		t.Errorf("the in-root link's target was written: %q", got)
	}
	// a parent that is a link: refused, nothing written beyond it
	for _, name := range []string{"to-outside/passwd", "to-outside/new", "to-dotdot/new"} {
		if err := d.WriteFile(name, []byte("evil"), 0o600); !errors.Is(err, ErrLink) {
			t.Errorf("write %s: %v, want ErrLink", name, err)
		}
	}
	if err := d.WriteFile("../outside/new", []byte("evil"), 0o600); !errors.Is(err, ErrEscape) {
		t.Errorf("write beyond the root: %v", err)
	}
	p.untouched(t)
	if _, err := os.Stat(filepath.Join(p.outside, "nothing-yet")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the dangling link's target was created: %v", err)
	}
	// no temporary file is left behind
	ents, _ := os.ReadDir(p.root)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

func TestMkdirRemoveRenameStayInside(t *testing.T) {
	p := plant(t)
	d := open(t, p.root)
	if err := d.MkdirAll("a/b/c", 0o700); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(p.root, "a/b/c")); err != nil || !fi.IsDir() {
		t.Fatalf("mkdir: %v", err)
	}
	if err := d.MkdirAll("to-outside/x", 0o700); !errors.Is(err, ErrLink) {
		t.Errorf("mkdir through a link: %v", err)
	}
	if err := d.MkdirAll("dangling", 0o700); !errors.Is(err, ErrLink) {
		t.Errorf("mkdir at a dangling link: %v", err)
	}
	// RemoveAll of a link removes the link; of a directory holding links,
	// the links, never what they point at
	if err := os.Symlink(p.outside, filepath.Join(p.root, "a", "b", "out")); err != nil {
		t.Fatal(err)
	}
	if err := d.RemoveAll("a"); err != nil {
		t.Fatal(err)
	}
	if err := d.RemoveAll("to-outside"); err != nil {
		t.Fatal(err)
	}
	if err := d.RemoveAll("to-dotdot/passwd"); !errors.Is(err, ErrLink) {
		t.Errorf("remove through a link: %v", err)
	}
	if err := d.Remove("to-secret"); err != nil {
		t.Fatal(err)
	}
	if err := d.RemoveAll("not-there/at-all"); err != nil {
		t.Errorf("remove what is not there: %v", err)
	}
	// rename replaces a link at the destination, never writes its target
	if err := d.Rename("real/file", "dangling"); err != nil {
		t.Fatal(err)
	}
	if err := d.Rename("inside", "to-dotdot/stolen"); !errors.Is(err, ErrLink) {
		t.Errorf("rename into a linked directory: %v", err)
	}
	p.untouched(t)
	if got := read(t, filepath.Join(p.root, "dangling")); got != "inside" {
		t.Errorf("renamed file: %q", got)
	}
	if fi, err := d.Stat("to-zero"); !errors.Is(err, ErrLink) {
		t.Errorf("stat of a link: %v %v", fi, err)
	}
	if fi, err := d.Stat("real"); err != nil || !fi.IsDir() {
		t.Errorf("stat of a directory: %v %v", fi, err)
	}
}

func TestOpenRefusesARootThatIsALink(t *testing.T) {
	p := plant(t)
	if _, err := Open(filepath.Join(p.root, "to-outside")); !errors.Is(err, ErrLink) {
		t.Errorf("open a linked root: %v, want ErrLink", err)
	}
}

func TestWalkListsOnlyWhatIsBeneath(t *testing.T) {
	p := plant(t)
	write(t, filepath.Join(p.outside, "other"), "outside")
	d := open(t, p.root)
	var got []string
	err := d.Walk(func(e Entry) error {
		kind := "other"
		switch {
		case e.File != nil:
			var buf bytes.Buffer
			if _, err := buf.ReadFrom(e.File); err != nil {
				return err
			}
			kind = "file:" + buf.String()
		case e.Info.IsDir():
			kind = "dir"
		}
		got = append(got, e.Rel+"="+kind)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"fifo=other", "real=dir", "real/file=file:inside"}
	if !slices.Equal(got, want) {
		t.Errorf("walk: got %v, want %v", got, want)
	}
}

// TestWalkSwap swaps a directory for a link to the outside while a walk
// runs: what the walk reads is always beneath the root.
func TestWalkSwap(t *testing.T) {
	p := plant(t)
	write(t, filepath.Join(p.outside, "other"), "outside")
	dir := filepath.Join(p.root, "sw")
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = os.RemoveAll(dir)
			_ = os.MkdirAll(dir, 0o700)
			_ = os.WriteFile(filepath.Join(dir, "other"), []byte("inside"), 0o600)
			_ = os.RemoveAll(dir)
			_ = os.Symlink(p.outside, dir)
		}
	}()
	d := open(t, p.root)
	for i := 0; i < 300; i++ {
		err := d.Walk(func(e Entry) error {
			if e.File != nil {
				var buf bytes.Buffer
				if _, err := buf.ReadFrom(e.File); err != nil {
					return err
				}
				if buf.String() == "outside" || buf.String() == "root:x:0:0:secret" {
					t.Errorf("walk %d read %s from outside", i, e.Rel)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	<-done
}
