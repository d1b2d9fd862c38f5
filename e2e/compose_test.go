package e2e

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// The cluster docker-compose.yml starts is reachable from this host only:
// anything that reaches its frontend can steer every session, and its Web
// UI checks no Host header, so each published port is bound to 127.0.0.1,
// and the Web UI is read-only as nid up's is.
func TestComposePublishesOnLoopbackOnly(t *testing.T) {
	b, err := os.ReadFile("../docker-compose.yml")
	require.NoError(t, err)
	var compose struct {
		Services map[string]struct {
			Ports       []any             `yaml:"ports"`
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(b, &compose))
	var published []string
	for name, svc := range compose.Services {
		for _, p := range svc.Ports {
			// The short form only: the long form's host_ip is easy to
			// leave out, and a port without one listens everywhere.
			port, ok := p.(string)
			require.True(t, ok, "%s publishes %v: write it as \"127.0.0.1:HOST:CONTAINER\"", name, p)
			require.True(t, strings.HasPrefix(port, "127.0.0.1:") && strings.Count(port, ":") == 2,
				"%s publishes %q: bind it to 127.0.0.1 (\"127.0.0.1:HOST:CONTAINER\")", name, port)
			published = append(published, name+" "+port)
		}
	}
	slices.Sort(published)
	require.Equal(t, []string{"temporal 127.0.0.1:7233:7233", "temporal-ui 127.0.0.1:8233:8080"}, published)
	require.Equal(t, "true", compose.Services["temporal-ui"].Environment["TEMPORAL_DISABLE_WRITE_ACTIONS"], "the Web UI is read-only")
}

// docker-compose.yml is one Compose understands: the docker CLI's compose
// plugin where it is installed, else Debian's docker-compose (make deps
// installs it), each with the nid-worker profile too. Neither needs a
// Docker daemon to check a file.
func TestComposeFileIsValid(t *testing.T) {
	var compose []string
	if exec.Command("docker", "compose", "version").Run() == nil {
		compose = []string{"docker", "compose"}
	} else if path, err := exec.LookPath("docker-compose"); err == nil {
		compose = []string{path}
	} else if os.Getenv("CI") == "true" {
		t.Fatal("neither docker compose nor docker-compose is installed (make deps installs docker-compose)")
	} else {
		t.Skip("neither docker compose nor docker-compose is installed: apt-get install docker-compose to run this test")
	}
	for _, profile := range [][]string{nil, {"--profile", "worker"}} {
		args := append(append(slices.Clone(compose[1:]), profile...), "--file", "../docker-compose.yml", "config", "--quiet")
		out, err := exec.Command(compose[0], args...).CombinedOutput()
		require.NoError(t, err, "%s %s:\n%s", compose[0], strings.Join(args, " "), out)
	}
}
