package config_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/nid-dev/nid/config"
	"github.com/nid-dev/nid/internal/testtls"
)

func TestTLSFilesAreCheckedAtLoad(t *testing.T) {
	pki := testtls.Write(t)
	notPEM := filepath.Join(t.TempDir(), "ca.txt")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600))
	missing := filepath.Join(t.TempDir(), "nope.pem")
	for _, tt := range []struct {
		name string
		tls  string
		want []string
	}{
		{"a CA file that is not there", "{caFile: " + missing + "}", []string{"temporal.tls.caFile: open " + missing + ": no such file or directory"}},
		{"a CA file with no certificate", "{caFile: " + notPEM + "}", []string{"temporal.tls.caFile: " + notPEM + " holds no PEM certificate"}},
		{"a certificate without its key", "{certFile: " + pki.ClientCert + "}",
			[]string{"temporal.tls.keyFile: missing: temporal.tls.certFile " + pki.ClientCert + " needs its private key"}},
		{"a key without its certificate", "{keyFile: " + pki.ClientKey + "}",
			[]string{"temporal.tls.certFile: missing: temporal.tls.keyFile " + pki.ClientKey + " needs its certificate"}},
		{"a key file that is not there", "{certFile: " + pki.ClientCert + ", keyFile: " + missing + "}",
			[]string{"temporal.tls.keyFile: open " + missing + ": no such file or directory"}},
		{"a certificate with another's key", "{certFile: " + pki.ClientCert + ", keyFile: " + pki.ServerKey + "}",
			[]string{"temporal.tls.certFile: " + pki.ClientCert + " with temporal.tls.keyFile " + pki.ServerKey +
				" is not a certificate and its private key: tls: private key does not match public key"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			yaml := "temporal:\n  address: temporal.example.com:7233\n  tls: " + tt.tls + "\n"
			_, err := config.Load(config.LoadOptions{Kinds: kinds(), File: writeFile(t, yaml), Environ: []string{}})
			require.Error(t, err)
			for _, line := range tt.want {
				require.Contains(t, err.Error(), line)
			}
		})
	}

	c, err := config.Load(config.LoadOptions{Kinds: kinds(), File: writeFile(t, "temporal:\n  address: 127.0.0.1:7233\n  tls:\n"+
		"    caFile: "+pki.CA+"\n    certFile: "+pki.ClientCert+"\n    keyFile: "+pki.ClientKey+"\n    serverName: localhost\n"), Environ: []string{}})
	require.NoError(t, err)
	conf, err := c.Temporal.ClientTLS()
	require.NoError(t, err)
	require.Equal(t, "localhost", conf.ServerName)
	require.Len(t, conf.Certificates, 1)
	require.NotNil(t, conf.RootCAs)
}

func TestTLSIsOffUnlessAskedFor(t *testing.T) {
	conf, err := config.Default().Temporal.ClientTLS()
	require.NoError(t, err)
	require.Nil(t, conf, "plain TCP to the embedded server")

	c, err := config.Load(config.LoadOptions{Kinds: kinds(), File: writeFile(t, ""),
		Environ: []string{"TEMPORAL_ADDRESS=ns.tmprl.cloud:7233", "TEMPORAL_API_KEY=secret"}})
	require.NoError(t, err)
	require.Equal(t, "secret", c.Temporal.APIKey)
	conf, err = c.Temporal.ClientTLS()
	require.NoError(t, err)
	require.NotNil(t, conf, "an API key never crosses the network in the clear")
	require.Nil(t, conf.RootCAs, "the system's CAs")
}
