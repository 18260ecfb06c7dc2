// Package approval keeps the approval passphrase: a slow argon2id hash in the
// state dir (never the passphrase itself), and its verification. A human
// enters the passphrase at the page or at a terminal; nothing an agent can
// call approves anything.
package approval

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/crypto/argon2"

	"lazy/errkind"
)

// Parameters of the hash (argon2id, RFC 9106's second recommendation).
const (
	memoryKiB = 64 * 1024
	passes    = 3
	lanes     = 2
	keyLen    = 32
	saltLen   = 16
	// MinLength is the shortest passphrase accepted.
	MinLength = 8
)

// Errors of verification.
var (
	ErrNotSet = errors.New("no approval passphrase is set: run `lazy passphrase set` at a terminal first")
	ErrWrong  = errkind.New(errkind.WrongPassphrase, "wrong approval passphrase; nothing was approved — try again")
)

// Hash returns the encoded argon2id hash of pass.
func Hash(pass string) (string, error) {
	if len(pass) < MinLength {
		return "", fmt.Errorf("the passphrase is too short: use at least %d characters", MinLength)
	}
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	key := argon2.IDKey([]byte(pass), salt, passes, memoryKiB, lanes, keyLen)
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, memoryKiB, passes, lanes, enc.EncodeToString(salt), enc.EncodeToString(key)), nil
}

// Verify checks pass against an encoded hash in constant time.
func Verify(encoded, pass string) error {
	parts := strings.Split(strings.TrimSpace(encoded), "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return errors.New("the stored passphrase hash is not argon2id: set the passphrase again with `lazy passphrase set`")
	}
	var m, t uint32
	var p uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &m, &t, &p); err != nil {
		return fmt.Errorf("the stored passphrase hash is damaged (%v): set it again with `lazy passphrase set`", err)
	}
	enc := base64.RawStdEncoding
	salt, err1 := enc.DecodeString(parts[4])
	want, err2 := enc.DecodeString(parts[5])
	if err1 != nil || err2 != nil {
		return errors.New("the stored passphrase hash is damaged: set it again with `lazy passphrase set`")
	}
	got := argon2.IDKey([]byte(pass), salt, t, m, p, uint32(len(want)))
	if subtle.ConstantTimeCompare(got, want) != 1 {
		return ErrWrong
	}
	return nil
}

// Save writes the hash of pass to path with mode 0600.
func Save(path, pass string) error {
	h, err := Hash(pass)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(h+"\n"), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}

// Check verifies pass against the hash stored at path.
func Check(path, pass string) error {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return ErrNotSet
	}
	if err != nil {
		return fmt.Errorf("read the passphrase hash: %w", err)
	}
	return Verify(string(b), pass)
}
