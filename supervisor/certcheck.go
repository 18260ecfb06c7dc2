package supervisor

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"
)

// A member whose certificate is wrong for it (another host, another CA,
// out of date, a key that is not its own) would start and join, then fail
// every call to the tasks it hosts after a 30 s wait. CheckMemberCert finds
// each of these at start, before the member joins, and names the file, the
// cause and the fix in one sentence.

// certDocs is where a refusal sends the operator.
const certDocs = "see docs/SCALE-OUT.md Certificates"

// MemberCert is what a member checks its certificate against.
type MemberCert struct {
	Cert, Key, CA string // PEM files: cluster.tls_cert, tls_key, tls_ca
	Advertise     string // cluster.advertise, HOST:PORT
}

// CheckMemberCert checks the member's certificate and key and the cluster's
// CA at now: each parses, the key is the certificate's, the certificate is
// valid now, signed by the CA, good for serving and dialling, and names the
// host of Advertise. It returns the certificate.
func CheckMemberCert(m MemberCert, now time.Time) (*x509.Certificate, error) {
	roots, err := checkCA(m.CA, now)
	if err != nil {
		return nil, err
	}
	certPEM, err := os.ReadFile(m.Cert)
	if err != nil {
		return nil, fmt.Errorf("cluster.tls_cert %s: %w: point cluster.tls_cert at the member's certificate (`lazy cluster cert NAME --host HOST` makes one; %s)", m.Cert, err, certDocs)
	}
	leaf, err := firstCert(certPEM)
	if err != nil {
		return nil, fmt.Errorf("cluster.tls_cert %s: %v: point cluster.tls_cert at the member's PEM certificate (`lazy cluster cert NAME --host HOST` makes one; %s)", m.Cert, err, certDocs)
	}
	keyPEM, err := os.ReadFile(m.Key)
	if err != nil {
		return nil, fmt.Errorf("cluster.tls_key %s: %w: point cluster.tls_key at the key made with cluster.tls_cert (NAME-key.pem; %s)", m.Key, err, certDocs)
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		if parsesAsKey(keyPEM) {
			return nil, fmt.Errorf("cluster.tls_key %s: it is not the key of cluster.tls_cert %s (a key of another certificate): set the key made with that certificate, or make both anew with `lazy cluster cert` (%s)", m.Key, m.Cert, certDocs)
		}
		return nil, fmt.Errorf("cluster.tls_key %s: %v: point cluster.tls_key at the PEM key made with cluster.tls_cert (NAME-key.pem; %s)", m.Key, err, certDocs)
	}
	if now.Before(leaf.NotBefore) {
		return nil, fmt.Errorf("cluster.tls_cert %s: it is valid only from %s to %s, and this host's clock says %s: correct the clock, or issue a certificate valid now (%s)",
			m.Cert, stamp(leaf.NotBefore), stamp(leaf.NotAfter), stamp(now), certDocs)
	}
	if now.After(leaf.NotAfter) {
		return nil, fmt.Errorf("cluster.tls_cert %s: it expired on %s (valid from %s; now is %s): issue a new one with `lazy cluster cert NAME --host HOST`, install it and restart (%s)",
			m.Cert, stamp(leaf.NotAfter), stamp(leaf.NotBefore), stamp(now), certDocs)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("cluster.tls_cert %s: it is issued by %s, not by cluster.tls_ca %s, %s: issue the member's certificate with the cluster's CA (`lazy cluster cert` in the CA's directory), or set cluster.tls_ca to the CA that issued it, the same on every member and etcd (%s)",
			m.Cert, issuerName(leaf), m.CA, caNames(m.CA), certDocs)
	}
	if miss := missingUsages(leaf); len(miss) > 0 {
		return nil, fmt.Errorf("cluster.tls_cert %s: it is not good for %s, and a member both serves and dials with it: issue one for TLS server and client authentication (`lazy cluster cert` does; %s)",
			m.Cert, strings.Join(miss, " and "), certDocs)
	}
	host, _, err := net.SplitHostPort(m.Advertise)
	if err != nil {
		return nil, fmt.Errorf("cluster.advertise %q is not HOST:PORT: set the address other members reach this one at", m.Advertise)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return leaf, nil // any address: no one host to name
	}
	if err := leaf.VerifyHostname(host); err != nil {
		return nil, fmt.Errorf("cluster.tls_cert %s: its names are %v but cluster.advertise is %s: issue a certificate whose SAN includes %s (`lazy cluster cert NAME --host %s`; %s)",
			m.Cert, certNames(leaf), m.Advertise, host, host, certDocs)
	}
	return leaf, nil
}

// checkCA reads the cluster's CA file: every certificate in it parses and
// at least one is a CA valid at now.
func checkCA(file string, now time.Time) (*x509.CertPool, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("cluster.tls_ca %s: %w: point cluster.tls_ca at the cluster's CA certificate (ca.pem where `lazy cluster cert` made it; %s)", file, err, certDocs)
	}
	pool := x509.NewCertPool()
	var cas []*x509.Certificate
	for rest := raw; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("cluster.tls_ca %s: a certificate in it does not parse (%v): set cluster.tls_ca to the cluster's ca.pem (%s)", file, err, certDocs)
		}
		pool.AddCert(c)
		cas = append(cas, c)
	}
	if len(cas) == 0 {
		return nil, fmt.Errorf("cluster.tls_ca %s: it holds no PEM certificate: set cluster.tls_ca to the cluster's ca.pem (%s)", file, certDocs)
	}
	for _, c := range cas {
		if c.IsCA && !now.Before(c.NotBefore) && !now.After(c.NotAfter) {
			return pool, nil
		}
	}
	c := cas[0]
	if !c.IsCA {
		return nil, fmt.Errorf("cluster.tls_ca %s: %s in it is not a CA certificate (a member's?): set cluster.tls_ca to the cluster's ca.pem (%s)", file, c.Subject.String(), certDocs)
	}
	return nil, fmt.Errorf("cluster.tls_ca %s: the CA is valid only from %s to %s, and now is %s: make a new CA and new member certificates (%s)",
		file, stamp(c.NotBefore), stamp(c.NotAfter), stamp(now), certDocs)
}

func firstCert(raw []byte) (*x509.Certificate, error) {
	for rest := raw; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return nil, errors.New("it holds no PEM certificate")
		}
		if b.Type == "CERTIFICATE" {
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("its certificate does not parse (%v)", err)
			}
			return c, nil
		}
	}
}

// parsesAsKey reports whether raw is a private key on its own (so a pair
// that does not load is a key of another certificate).
func parsesAsKey(raw []byte) bool {
	b, _ := pem.Decode(raw)
	if b == nil {
		return false
	}
	if _, err := x509.ParsePKCS8PrivateKey(b.Bytes); err == nil {
		return true
	}
	if _, err := x509.ParseECPrivateKey(b.Bytes); err == nil {
		return true
	}
	_, err := x509.ParsePKCS1PrivateKey(b.Bytes)
	return err == nil
}

func missingUsages(c *x509.Certificate) []string {
	if len(c.ExtKeyUsage) == 0 || slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageAny) {
		return nil
	}
	var miss []string
	if !slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		miss = append(miss, "TLS servers")
	}
	if !slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
		miss = append(miss, "TLS clients")
	}
	return miss
}

// certNames are the names a certificate is good for (its SAN).
func certNames(c *x509.Certificate) []string {
	names := slices.Clone(c.DNSNames)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	if len(names) == 0 {
		return []string{"(none: no SAN)"}
	}
	return names
}

func caNames(file string) string {
	raw, _ := os.ReadFile(file)
	var names []string
	for rest := raw; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil {
			names = append(names, fmt.Sprintf("%s (key %s)", c.Subject.String(), keyID(c.SubjectKeyId)))
		}
	}
	return "which is " + strings.Join(names, ", ")
}

// issuerName is the name of a certificate's issuer and its key id: two
// CAs `lazy cluster cert` made in two directories have the same name.
func issuerName(c *x509.Certificate) string {
	return fmt.Sprintf("%s (key %s)", c.Issuer.String(), keyID(c.AuthorityKeyId))
}

func keyID(id []byte) string {
	if len(id) == 0 {
		return "(no key id)"
	}
	return fmt.Sprintf("%x", id[:min(len(id), 4)])
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }

// tlsFailure reports whether err is a TLS handshake failure (a
// certificate refused on either side) rather than a host that does not
// answer.
func tlsFailure(err error) bool {
	var (
		verify  *tls.CertificateVerificationError
		unknown x509.UnknownAuthorityError
		host    x509.HostnameError
		invalid x509.CertificateInvalidError
		alert   tls.AlertError
		rec     tls.RecordHeaderError
	)
	return errors.As(err, &verify) || errors.As(err, &unknown) || errors.As(err, &host) || errors.As(err, &invalid) ||
		errors.As(err, &alert) || errors.As(err, &rec) || strings.Contains(err.Error(), "remote error: tls:")
}

// ProbeEtcdTLS opens a TLS connection to each https etcd endpoint with the
// member's client certificate and asks for its health: a handshake refused
// on either side is "TLS to etcd failed" with its cause (not a 30 s wait
// that asks whether etcd runs). An endpoint that does not answer is left
// to the join, which says so.
func ProbeEtcdTLS(endpoints []string, client *tls.Config, timeout time.Duration) error {
	for _, e := range endpoints {
		if !strings.HasPrefix(e, "https://") {
			continue
		}
		hc := &http.Client{Timeout: timeout, Transport: &http.Transport{TLSClientConfig: client.Clone()}}
		resp, err := hc.Get(e + "/health")
		if err == nil {
			resp.Body.Close()
			continue
		}
		if tlsFailure(err) {
			return fmt.Errorf("cluster: TLS to etcd failed: %s: %v: etcd's certificate must be issued by cluster.tls_ca, name the host in cluster.etcd, and etcd must trust the same CA (--trusted-ca-file) for this member's certificate (%s)", e, unwrapURL(err), certDocs)
		}
	}
	return nil
}

func unwrapURL(err error) error {
	var u *url.Error
	if errors.As(err, &u) {
		return u.Err
	}
	return err
}
