// Package workflows holds nid's durable, deterministic workflows: Session
// (one per agent seat, forever), Rotation (a child per rotation) and Group
// (policy and inbox). messages.go names every signal, query and update and
// their payloads; the CLI and the HTTP server use those names and never spell
// one twice.
//
// Only deterministic code lives here: workflow.Now, workflow.Go, selectors
// and activities; no wall clock, no goroutines, no unsorted map iteration.
package workflows
