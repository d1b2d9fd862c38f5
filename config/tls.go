package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strings"
	"unicode"
)

// ClientTLS returns the TLS configuration nid dials a cluster with, or nil
// when neither temporal.tls nor temporal.apiKey is set. An API key alone
// gets TLS with the system's CAs, as Temporal's own clients do: a bearer
// token must not cross the network in the clear; to a loopback address it
// crosses none, and goes in plaintext unless temporal.tls is set. Load has already checked
// the files; an error here names the key whose file changed since.
func (t Temporal) ClientTLS() (*tls.Config, error) {
	conf, ps := t.clientTLS()
	return conf, joinLines(ps)
}

func (t Temporal) clientTLS() (*tls.Config, []problem) {
	if !t.TLS.On() && (t.APIKey == "" || LoopbackAddress(t.Address)) {
		return nil, nil
	}
	conf := &tls.Config{ServerName: t.TLS.ServerName, MinVersion: tls.VersionTLS12}
	var ps []problem
	add := func(key, format string, args ...any) {
		ps = append(ps, problem{"temporal.tls." + key, fmt.Sprintf(format, args...)})
	}
	if f := t.TLS.CAFile; f != "" {
		data, err := os.ReadFile(f)
		conf.RootCAs = x509.NewCertPool()
		switch {
		case err != nil:
			add("caFile", "%v", err)
		case !conf.RootCAs.AppendCertsFromPEM(data):
			add("caFile", "%s holds no PEM certificate", f)
		}
	}
	cert, key := t.TLS.CertFile, t.TLS.KeyFile
	switch {
	case cert != "" && key == "":
		add("keyFile", "missing: temporal.tls.certFile %s needs its private key", cert)
	case key != "" && cert == "":
		add("certFile", "missing: temporal.tls.keyFile %s needs its certificate", key)
	case cert != "":
		certPEM, certErr := os.ReadFile(cert)
		keyPEM, keyErr := os.ReadFile(key)
		if certErr != nil {
			add("certFile", "%v", certErr)
		}
		if keyErr != nil {
			add("keyFile", "%v", keyErr)
		}
		if certErr != nil || keyErr != nil {
			break
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			add("certFile", "%s with temporal.tls.keyFile %s is not a certificate and its private key: %v", cert, key, err)
			break
		}
		conf.Certificates = []tls.Certificate{pair}
	}
	return conf, ps
}

// apiKeyProblem says what is wrong with an API key, if anything. A key
// pasted with its line break would otherwise fail on every call with a
// message about headers.
func apiKeyProblem(key string) string {
	if strings.IndexFunc(key, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return "contains white space or control characters (a line break pasted with it?)"
	}
	return ""
}

// LoopbackAddress reports whether host:port is on this host's loopback,
// where nothing crosses a network: an API key goes there in plaintext
// unless temporal.tls says otherwise, as to a `nid server` (which listens
// on 127.0.0.1 only) or to one reached through an SSH tunnel.
func LoopbackAddress(address string) bool {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
