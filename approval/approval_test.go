package approval

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSaveCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "passphrase")
	if err := Check(path, "whatever1"); !errors.Is(err, ErrNotSet) {
		t.Fatalf("unset: %v", err)
	}
	if err := Save(path, "short"); err == nil {
		t.Fatal("a short passphrase was accepted")
	}
	if err := Save(path, "correct horse battery"); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	b, _ := os.ReadFile(path)
	if st.Mode().Perm() != 0o600 || strings.Contains(string(b), "horse") || !strings.HasPrefix(string(b), "$argon2id$") {
		t.Fatalf("stored: mode %v %q", st.Mode().Perm(), b)
	}
	if err := Check(path, "correct horse battery"); err != nil {
		t.Fatal(err)
	}
	if err := Check(path, "wrong horse battery"); !errors.Is(err, ErrWrong) {
		t.Fatalf("wrong: %v", err)
	}
}
