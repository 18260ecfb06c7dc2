// Package canary owns the decoy secrets of a sandbox home and finds them in
// bytes. Every task's agent home holds decoys where tools keep real secrets
// (an SSH private key, cloud credentials, .netrc, a GitHub CLI token); an
// agent that reads one and sends it anywhere gives itself away. A Maker
// derives each task's decoys from a secret key of the daemon's and the
// task's id, so they are unique per task, unguessable from inside a
// sandbox, and the same after a restart without a row stored per task. A
// Set finds any decoy's distinctive part in a request in one pass.
//
// It must not write files (agent.WriteDecoys does, beneath the home without
// following links) and holds no real secret: a decoy is random, shaped like
// the real thing, and opens nothing.
package canary

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"strings"
)

// File is one decoy file: its path relative to the home (slash-separated),
// its bytes and its mode.
type File struct {
	Path string
	Body []byte
	Mode uint32
}

// Decoys are one task's decoy files and their distinctive parts (Marks):
// the random strings an outbound request must never carry. Every mark is at
// least Window bytes of [A-Za-z0-9_], so it survives JSON, form and URL
// encoding unchanged.
type Decoys struct {
	Files []File
	Marks []string
}

// Maker derives decoys from its key.
type Maker struct{ key []byte }

// NewMaker makes decoys under key (at least 16 bytes of secret).
func NewMaker(key []byte) *Maker { return &Maker{key: append([]byte(nil), key...)} }

const (
	alnum  = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	upper  = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567" // an AWS access key id's alphabet
)

// For is the decoys of the task with this id: the same for the same key and
// id, unrelated for any other.
func (m *Maker) For(taskID string) Decoys {
	mac := hmac.New(sha256.New, m.key)
	mac.Write([]byte("lazy canary v1\x00" + taskID))
	var seed [32]byte
	copy(seed[:], mac.Sum(nil))
	src := rand.NewChaCha8(seed)
	r := rand.New(src)
	pick := func(n int, alphabet string) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(b)
	}
	var d Decoys
	key, pub, mark := sshKey(src, r)
	d.Files = append(d.Files,
		File{Path: ".ssh/id_ed25519", Body: key, Mode: 0o600},
		File{Path: ".ssh/id_ed25519.pub", Body: pub, Mode: 0o644})
	d.Marks = append(d.Marks, mark)

	keyID, secret := "AKIA"+pick(16, upper), pick(40, alnum)
	d.Files = append(d.Files, File{Path: ".aws/credentials", Mode: 0o600, Body: []byte(
		"[default]\naws_access_key_id = " + keyID + "\naws_secret_access_key = " + secret + "\n")})
	d.Marks = append(d.Marks, keyID, secret)

	netrc := githubToken("ghp_", pick(30, alnum))
	d.Files = append(d.Files, File{Path: ".netrc", Mode: 0o600, Body: []byte(
		"machine github.com\n  login x-access-token\n  password " + netrc + "\n")})
	gh := githubToken("gho_", pick(30, alnum))
	d.Files = append(d.Files, File{Path: ".config/gh/hosts.yml", Mode: 0o600, Body: []byte(
		"github.com:\n    users:\n        dev:\n            oauth_token: " + gh + "\n    git_protocol: https\n    oauth_token: " + gh + "\n    user: dev\n")})
	d.Marks = append(d.Marks, netrc, gh)
	return d
}

// githubToken is a token in GitHub's shape: prefix, 30 random characters
// and their CRC32 in base62 (6 characters), as secret scanners check.
func githubToken(prefix, random string) string {
	c := crc32.ChecksumIEEE([]byte(random))
	var b [6]byte
	for i := 5; i >= 0; i-- {
		b[i] = base62[c%62]
		c /= 62
	}
	return prefix + random + string(b[:])
}

// sshKey is an unencrypted OpenSSH ed25519 private key as ssh-keygen writes
// it (70 columns), its public key line, and its mark: the longest run of
// letters and digits of one line of the file that encodes only the private
// seed (at least 28 characters; keys are drawn until one has it).
func sshKey(src *rand.ChaCha8, r *rand.Rand) (key, pub []byte, mark string) {
	const comment = "dev@workstation"
	for {
		var seed [32]byte
		_, _ = src.Read(seed[:])
		priv := ed25519.NewKeyFromSeed(seed[:])
		pk := priv.Public().(ed25519.PublicKey)
		pubBlob := sshString(nil, []byte("ssh-ed25519"))
		pubBlob = sshString(pubBlob, pk)

		check := r.Uint32()
		var sec []byte
		sec = binary.BigEndian.AppendUint32(sec, check)
		sec = binary.BigEndian.AppendUint32(sec, check)
		sec = sshString(sec, []byte("ssh-ed25519"))
		sec = sshString(sec, pk)
		seedAt := len(sec) + 4 // the private key string's bytes start with the seed
		sec = sshString(sec, priv)
		sec = sshString(sec, []byte(comment))
		for i := byte(1); len(sec)%8 != 0; i++ {
			sec = append(sec, i)
		}
		blob := append([]byte("openssh-key-v1\x00"), sshString(nil, []byte("none"))...)
		blob = sshString(blob, []byte("none"))
		blob = sshString(blob, nil)
		blob = binary.BigEndian.AppendUint32(blob, 1)
		blob = sshString(blob, pubBlob)
		secAt := len(blob) + 4
		blob = sshString(blob, sec)

		text := base64.StdEncoding.EncodeToString(blob)
		from := secAt + seedAt // the seed's first byte in blob
		// characters made of seed bits only: from ceil(8·from/6) to
		// floor(8·(from+32)/6)
		lo, hi := (8*from+5)/6, 8*(from+32)/6
		best := ""
		run := 0
		for i := lo; i < hi; i++ {
			c := text[i]
			if i%70 == 0 || c == '+' || c == '/' { // a line break, or not [A-Za-z0-9]
				run = 0
			}
			if c == '+' || c == '/' {
				continue
			}
			run++
			if run > len(best) {
				best = text[i-run+1 : i+1]
			}
		}
		if len(best) < 28 {
			continue
		}
		var b strings.Builder
		b.WriteString("-----BEGIN OPENSSH PRIVATE KEY-----\n")
		for i := 0; i < len(text); i += 70 {
			b.WriteString(text[i:min(i+70, len(text))])
			b.WriteByte('\n')
		}
		b.WriteString("-----END OPENSSH PRIVATE KEY-----\n")
		line := "ssh-ed25519 " + base64.StdEncoding.EncodeToString(pubBlob) + " " + comment + "\n"
		return []byte(b.String()), []byte(line), best
	}
}

func sshString(b, s []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}
