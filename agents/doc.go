// Package agents drives the coding agents nid runs and the programs they
// need: one adapter per vendor (claude.go, codex*.go, exec.go, sim.go), the
// registry of kinds (kinds.go), the processes they run in (proc.go,
// live.go, pidfile.go), the sandbox each vendor enforces (sandbox.go) and
// the one git runner (git.go, gitread.go).
//
// An adapter implements Agent: it runs a turn, compacts, stops, and reports
// usage, the conversation id, rate limits and failures in one shape
// (TurnReport, Usage, Error), whatever its CLI prints. Everything else that
// differs between kinds is one entry of Kinds: configuration validation,
// nid doctor and the worker read the entry, so nothing else names a kind.
// An adapter whose vendor has an interactive CLI also implements Attacher
// (attach.go, handback.go): nid attach runs that CLI, built by the same
// code as a turn's process, and the hand-back reads the vendor's own
// records of what the person did.
// The conformance suite (conformance_test.go) is the checklist every kind
// passes against the real CLIs, pinned in testdata/agents/package.json,
// and a fake model server on 127.0.0.1.
//
// Every git call goes through RunGit (RepoGit, RemoteGit, WorktreeGit):
// it reads no system or global configuration and switches off every hook,
// filter and driver a repository's config could name, because an agent
// writes in the repositories it runs in.
//
// This package knows nothing of Temporal: package activities, the layer
// Temporal calls, checks each request, finds the session's places in the
// worker's own nid.yaml and records, and calls an adapter or the git
// runner with them. Adapters log through the Logger the context carries
// (WithLogger).
package agents
