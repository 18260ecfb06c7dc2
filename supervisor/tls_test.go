package supervisor

import (
	"lazy/actors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLinkTLSFiles: what LoadLinkTLS refuses, and that MakeCA keeps a CA
// it finds.
func TestLinkTLSFiles(t *testing.T) {
	dir := t.TempDir()
	if _, _, err := MakeMemberCert(dir, "a", []string{"127.0.0.1"}); err == nil || !strings.Contains(err.Error(), "lazy cluster cert") {
		t.Errorf("a member certificate without a CA: %v", err)
	}
	if made, err := MakeCA(dir); err != nil || !made {
		t.Fatalf("MakeCA: %v %v", made, err)
	}
	ca, _ := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if made, err := MakeCA(dir); err != nil || made {
		t.Fatalf("MakeCA again: %v %v", made, err)
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "ca.pem")); string(again) != string(ca) {
		t.Fatal("MakeCA replaced the CA it found")
	}
	if fi, err := os.Stat(filepath.Join(dir, "ca-key.pem")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the CA key: %v %v", fi.Mode(), err)
	}
	cert, key, err := MakeMemberCert(dir, "a", []string{"127.0.0.1", "a.example"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := MakeMemberCert(dir, "a", []string{"127.0.0.1"}); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("a second certificate over the first: %v", err)
	}
	if _, err := LoadLinkTLS(cert, key, filepath.Join(dir, "ca.pem")); err != nil {
		t.Fatal(err)
	}
	otherDir := t.TempDir()
	if _, err := MakeCA(otherDir); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadLinkTLS(cert, key, filepath.Join(otherDir, "ca.pem")); err == nil || !strings.Contains(err.Error(), "not signed by") {
		t.Errorf("a certificate of another CA: %v", err)
	}
	if _, err := LoadLinkTLS(cert, filepath.Join(otherDir, "ca-key.pem"), filepath.Join(dir, "ca.pem")); err == nil {
		t.Error("a certificate with another key was loaded")
	}
	if _, err := LoadLinkTLS(cert, key, cert+".missing"); err == nil || !strings.Contains(err.Error(), "cluster.tls_ca") {
		t.Errorf("a missing CA: %v", err)
	}
}

// TestEtcdOverHTTPSNeedsACertificate: a member told to reach etcd over
// https without a certificate of its own refuses to start, and says what
// to set.
func TestEtcdOverHTTPSNeedsACertificate(t *testing.T) {
	dir := t.TempDir()
	_, err := New(Config{Core: testCore(t, filepath.Join(dir, "proxy-tokens.json")), Task: &actors.TaskDeps{},
		Cluster: &ClusterOptions{Name: "lazy-test", Etcd: []string{"https://127.0.0.1:1"}, Host: "127.0.0.1", Secret: []byte("a secret of this test cluster")}})
	if err == nil || !strings.Contains(err.Error(), "cluster.tls_cert") {
		t.Fatalf("got %v", err)
	}
}
