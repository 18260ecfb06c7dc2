package supervisor

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"lazy/grain/etcdtest"
)

// testCA is a CA made in the test, and what it issues.
type testCA struct {
	t    *testing.T
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // its PEM certificate
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().AddDate(1, 0, 0),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &testCA{t: t, dir: t.TempDir(), cert: cert, key: key}
	ca.file = ca.write(name+".pem", "CERTIFICATE", der)
	return ca
}

func (ca *testCA) write(name, kind string, der []byte) string {
	p := filepath.Join(ca.dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		ca.t.Fatal(err)
	}
	return p
}

// leaf issues name.pem and name-key.pem for hosts, valid from..until, for
// the usages given (none: server and client).
func (ca *testCA) leaf(name string, hosts []string, from, until time.Time, usages ...x509.ExtKeyUsage) (certFile, keyFile string) {
	ca.t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		ca.t.Fatal(err)
	}
	if len(usages) == 0 {
		usages = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	}
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
		NotBefore: from, NotAfter: until, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usages}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		ca.t.Fatal(err)
	}
	return ca.write(name+".pem", "CERTIFICATE", der), ca.write(name+"-key.pem", "EC PRIVATE KEY", mustMarshalKey(key))
}

// TestCheckMemberCert: each certificate wrong for a member is refused with
// the file, the cause and the fix; a right one passes.
func TestCheckMemberCert(t *testing.T) {
	now := time.Now()
	ca, other := newTestCA(t, "lazy cluster CA"), newTestCA(t, "another CA")
	year := now.AddDate(1, 0, 0)
	good, goodKey := ca.leaf("m1", []string{"10.0.0.5", "m1.lan"}, now.Add(-time.Hour), year)
	wrongHost, wrongHostKey := ca.leaf("wrong", []string{"a.example"}, now.Add(-time.Hour), year)
	expired, expiredKey := ca.leaf("expired", []string{"10.0.0.5"}, now.AddDate(0, -2, 0), now.AddDate(0, -1, 0))
	early, earlyKey := ca.leaf("early", []string{"10.0.0.5"}, now.AddDate(0, 1, 0), now.AddDate(0, 2, 0))
	foreign, foreignKey := other.leaf("foreign", []string{"10.0.0.5"}, now.Add(-time.Hour), year)
	serverOnly, serverOnlyKey := ca.leaf("server", []string{"10.0.0.5"}, now.Add(-time.Hour), year, x509.ExtKeyUsageServerAuth)
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name string
		m    MemberCert
		want []string // in the sentence; none: accepted
	}{
		{"good by IP", MemberCert{good, goodKey, ca.file, "10.0.0.5:26500"}, nil},
		{"good by name", MemberCert{good, goodKey, ca.file, "m1.lan:26500"}, nil},
		{"any address", MemberCert{wrongHost, wrongHostKey, ca.file, "0.0.0.0:26500"}, nil},
		{"wrong host", MemberCert{wrongHost, wrongHostKey, ca.file, "10.0.0.5:26500"},
			[]string{"cluster.tls_cert " + wrongHost, "its names are [a.example] but cluster.advertise is 10.0.0.5:26500", "SAN includes 10.0.0.5", "--host 10.0.0.5", "docs/SCALE-OUT.md Certificates"}},
		{"wrong name", MemberCert{good, goodKey, ca.file, "m2.lan:26500"}, []string{"its names are [m1.lan 10.0.0.5] but cluster.advertise is m2.lan:26500"}},
		{"expired", MemberCert{expired, expiredKey, ca.file, "10.0.0.5:1"},
			[]string{"cluster.tls_cert " + expired, "expired on " + stamp(now.AddDate(0, -1, 0)), "valid from " + stamp(now.AddDate(0, -2, 0)), "issue a new one"}},
		{"not yet valid", MemberCert{early, earlyKey, ca.file, "10.0.0.5:1"},
			[]string{"cluster.tls_cert " + early, "valid only from " + stamp(now.AddDate(0, 1, 0)), "correct the clock"}},
		{"another CA", MemberCert{foreign, foreignKey, ca.file, "10.0.0.5:1"},
			[]string{"cluster.tls_cert " + foreign, "issued by CN=another CA (key " + keyID(other.cert.SubjectKeyId) + "), not by cluster.tls_ca " + ca.file + ", which is CN=lazy cluster CA (key " + keyID(ca.cert.SubjectKeyId) + ")", "the same on every member"}},
		{"key of another certificate", MemberCert{good, wrongHostKey, ca.file, "10.0.0.5:1"},
			[]string{"cluster.tls_key " + wrongHostKey, "not the key of cluster.tls_cert " + good}},
		{"a certificate for a key", MemberCert{good, good, ca.file, "10.0.0.5:1"}, []string{"cluster.tls_key " + good, "point cluster.tls_key at the PEM key"}},
		{"server only", MemberCert{serverOnly, serverOnlyKey, ca.file, "10.0.0.5:1"}, []string{"not good for TLS clients", "both serves and dials"}},
		{"CA missing", MemberCert{good, goodKey, ca.file + ".gone", "10.0.0.5:1"}, []string{"cluster.tls_ca " + ca.file + ".gone", "no such file"}},
		{"CA garbage", MemberCert{good, goodKey, garbage, "10.0.0.5:1"}, []string{"cluster.tls_ca " + garbage, "holds no PEM certificate"}},
		{"CA is a member's", MemberCert{good, goodKey, good, "10.0.0.5:1"}, []string{"cluster.tls_ca " + good, "CN=m1 in it is not a CA certificate"}},
		{"cert garbage", MemberCert{garbage, goodKey, ca.file, "10.0.0.5:1"}, []string{"cluster.tls_cert " + garbage, "holds no PEM certificate"}},
		{"cert missing", MemberCert{good + ".gone", goodKey, ca.file, "10.0.0.5:1"}, []string{"cluster.tls_cert " + good + ".gone", "no such file"}},
	} {
		leaf, err := CheckMemberCert(c.m, now)
		if c.want == nil {
			if err != nil || leaf == nil {
				t.Errorf("%s: refused: %v", c.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		t.Logf("%s: %v", c.name, err)
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: no %q in\n%v", c.name, w, err)
			}
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: not one sentence: %q", c.name, err)
		}
	}
}

// TestEtcdTLSRefused: a member whose certificate etcd's CA did not issue,
// or that does not trust etcd's certificate, hears "TLS to etcd failed"
// and why at once, from a real etcd; a right one passes, and an etcd that
// does not answer is left to the join.
func TestEtcdTLSRefused(t *testing.T) {
	now := time.Now()
	ca, other := newTestCA(t, "lazy cluster CA"), newTestCA(t, "another CA")
	etcdCert, etcdKey := ca.leaf("etcd", []string{"127.0.0.1"}, now.Add(-time.Hour), now.AddDate(1, 0, 0))
	probe, err := LoadLinkTLS(etcdCert, etcdKey, ca.file)
	if err != nil {
		t.Fatal(err)
	}
	etcd := etcdtest.StartTLS(t, &etcdtest.TLS{Cert: etcdCert, Key: etcdKey, CA: ca.file, Client: probe.Client})

	good, goodKey := ca.leaf("m1", []string{"127.0.0.1"}, now.Add(-time.Hour), now.AddDate(1, 0, 0))
	foreign, foreignKey := other.leaf("m2", []string{"127.0.0.1"}, now.Add(-time.Hour), now.AddDate(1, 0, 0))
	member := func(cert, key, caFile string) *LinkTLS {
		l, err := LoadLinkTLS(cert, key, caFile)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	if err := ProbeEtcdTLS([]string{etcd.Endpoint}, member(good, goodKey, ca.file).Client, 5*time.Second); err != nil {
		t.Fatalf("a member of etcd's CA: %v", err)
	}
	// trusting both CAs, the member accepts etcd's certificate and etcd
	// refuses the member's; trusting its own CA only, it refuses etcd's
	both := filepath.Join(t.TempDir(), "both.pem")
	a, _ := os.ReadFile(ca.file)
	b, _ := os.ReadFile(other.file)
	if err := os.WriteFile(both, append(a, b...), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, cause string
		l           *LinkTLS
	}{
		{"etcd refuses the member's certificate", "remote error: tls:", member(foreign, foreignKey, both)},
		{"the member does not trust etcd's", "certificate signed by unknown authority", member(foreign, foreignKey, other.file)},
	} {
		err := ProbeEtcdTLS([]string{etcd.Endpoint}, c.l.Client, 5*time.Second)
		if err == nil || !strings.Contains(err.Error(), "TLS to etcd failed: "+etcd.Endpoint) || !strings.Contains(err.Error(), c.cause) {
			t.Errorf("%s: %v", c.name, err)
		}
		t.Logf("%s: %v", c.name, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "https://" + ln.Addr().String()
	ln.Close()
	if err := ProbeEtcdTLS([]string{dead}, member(good, goodKey, ca.file).Client, 2*time.Second); err != nil {
		t.Errorf("an etcd that does not answer is the join's to report: %v", err)
	}
}
