package embedded

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/subtle"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"strings"
	"time"

	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/config"
)

// The embedded server is nid's control plane: whoever can call it can start
// a session's workflow with any input, signal it, or read every session.
// It stands on two of the server's own mechanisms:
//
//   - The public frontend, the one port clients reach, maps a request to
//     claims with tokenClaims (the right bearer credential is an admin,
//     anything else has no role) and the server's default authorizer
//     refuses a request without a role with PermissionDenied.
//   - The server's own traffic never reaches that frontend: its system
//     worker and its services call an internal frontend, which grants
//     every caller the system's claims, and they reach it, and each other's
//     history and matching ports, over mutual TLS with a certificate made
//     in memory at each start (internodeTLS). Those ports listen on
//     loopback too, and without mTLS any local process could call them
//     directly, below every authorizer.

// tokenSubject names a caller that presented the credential, in the
// server's principal and logs.
const tokenSubject = "nid"

// tokenClaims maps the bearer credential to claims: an admin of the whole
// server for the right one, no role for none or a wrong one. It never
// fails a request itself: an error would be logged as a server error on
// every refused call, and a claim without a role is refused anyway.
type tokenClaims struct {
	want []byte
}

var _ authorization.ClaimMapper = tokenClaims{}

// newTokenClaims is the claim mapper for the credential token.
func newTokenClaims(token string) tokenClaims {
	return tokenClaims{want: []byte("Bearer " + token)}
}

// GetClaims implements authorization.ClaimMapper.
func (m tokenClaims) GetClaims(info *authorization.AuthInfo) (*authorization.Claims, error) {
	if info == nil || len(m.want) == len("Bearer ") {
		return &authorization.Claims{}, nil
	}
	got := strings.TrimSpace(info.AuthToken)
	if subtle.ConstantTimeCompare([]byte(got), m.want) != 1 {
		return &authorization.Claims{}, nil
	}
	return &authorization.Claims{Subject: tokenSubject, System: authorization.RoleAdmin, AuthType: "nid-token"}, nil
}

// internodeName is the name the internode certificate carries and the
// services check when they dial each other.
const internodeName = "internode.nid.invalid"

// internodeTLS is mutual TLS between the server's services and its
// internal frontend, with a CA and one certificate made for this start
// and kept only in memory: every service runs in this process, so none
// needs it across a restart, and no file of it can leak.
func internodeTLS() (config.GroupTLS, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return config.GroupTLS{}, err
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "nid embedded Temporal internode CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return config.GroupTLS{}, fmt.Errorf("internode CA: %w", err)
	}
	ca, err = x509.ParseCertificate(caDER)
	if err != nil {
		return config.GroupTLS{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return config.GroupTLS{}, err
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: internodeName},
		DNSNames:     []string{internodeName},
		IPAddresses:  []net.IP{net.ParseIP(host)},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return config.GroupTLS{}, fmt.Errorf("internode certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return config.GroupTLS{}, err
	}
	// The server takes certificate data as base64 of the PEM file.
	b64 := func(typ string, der []byte) string {
		return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}
	caData := b64("CERTIFICATE", caDER)
	return config.GroupTLS{
		Server: config.ServerTLS{
			CertData:          b64("CERTIFICATE", leafDER),
			KeyData:           b64("EC PRIVATE KEY", keyDER),
			ClientCAData:      []string{caData},
			RequireClientAuth: true,
		},
		Client: config.ClientTLS{ServerName: internodeName, RootCAData: []string{caData}},
	}, nil
}
