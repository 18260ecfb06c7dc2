package supervisor

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The links between members are mutual TLS when the cluster has its own
// CA: every member presents a certificate the CA signed and accepts only
// peers with one, so a host on the network can neither read a call (an
// accept carries the approval passphrase) nor place one.

// LinkTLS is the TLS of this member's links: what it serves with and what
// it dials with.
type LinkTLS struct {
	Server, Client *tls.Config
	// NotAfter is when the member's certificate expires.
	NotAfter time.Time
}

// LoadLinkTLS reads a member's certificate and key and the cluster's CA
// (PEM files).
func LoadLinkTLS(certFile, keyFile, caFile string) (*LinkTLS, error) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("cluster.tls_cert / cluster.tls_key: %w (make them with `lazy cluster cert`)", err)
	}
	raw, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("cluster.tls_ca: %w (make it with `lazy cluster cert`)", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(raw) {
		return nil, fmt.Errorf("cluster.tls_ca: %s holds no PEM certificate", caFile)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("cluster.tls_cert: %w", err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}); err != nil {
		return nil, fmt.Errorf("cluster.tls_cert %s is not signed by cluster.tls_ca %s: %w", certFile, caFile, err)
	}
	return &LinkTLS{
		Server:   &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert},
		Client:   &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{pair}, RootCAs: pool},
		NotAfter: leaf.NotAfter,
	}, nil
}

// MakeCA writes a new cluster CA (ca.pem, ca-key.pem) into dir, unless dir
// has one: then it is kept, so members made later join the same cluster.
// It reports whether it made one.
func MakeCA(dir string) (bool, error) {
	certFile, keyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	if _, err := os.Stat(certFile); err == nil {
		if _, _, err := loadCA(dir); err != nil {
			return false, err
		}
		return false, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return false, err
	}
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "lazy cluster CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().AddDate(10, 0, 0),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, err
	}
	if err := writePEM(keyFile, "EC PRIVATE KEY", mustMarshalKey(key), 0o600); err != nil {
		return false, err
	}
	return true, writePEM(certFile, "CERTIFICATE", der, 0o644)
}

// MakeMemberCert writes name.pem and name-key.pem into dir: a member's
// certificate for hosts (the host of its cluster.advertise, names or IPs),
// signed by dir's CA, good for serving and dialling.
func MakeMemberCert(dir, name string, hosts []string) (certFile, keyFile string, err error) {
	if len(hosts) == 0 {
		return "", "", errors.New("a member certificate needs the host other members reach it at (its cluster.advertise host)")
	}
	ca, caKey, err := loadCA(dir)
	if err != nil {
		return "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().AddDate(2, 0, 0),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	if err := writePEM(keyFile, "EC PRIVATE KEY", mustMarshalKey(key), 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, writePEM(certFile, "CERTIFICATE", der, 0o644)
}

func loadCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem"))
	if err != nil {
		return nil, nil, fmt.Errorf("the cluster CA in %s: %w (make one with `lazy cluster cert --dir %s`)", dir, err, dir)
	}
	ca, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, nil, err
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok || !ca.IsCA {
		return nil, nil, fmt.Errorf("%s is not a CA lazy made (an ECDSA CA certificate and key)", dir)
	}
	return ca, key, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

func mustMarshalKey(k *ecdsa.PrivateKey) []byte {
	b, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		panic(err) // a P-256 key always marshals
	}
	return b
}

// writePEM writes one block to a new file (an existing one is not
// overwritten: a key in use is never replaced by accident).
func writePEM(path, kind string, der []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%s exists: remove it first to make a new one, or use it as it is", path)
		}
		return err
	}
	if err := pem.Encode(f, &pem.Block{Type: kind, Bytes: der}); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
