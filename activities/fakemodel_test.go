package activities_test

import (
	"testing"

	"github.com/nid-dev/nid/internal/fakemodel"
)

// The suite's names for the fake model the end-to-end tests share.
type (
	fakeReply   = fakemodel.Reply
	fakeRequest = fakemodel.Request
	fakeModel   = fakemodel.Model
)

func startFakeModel(t *testing.T) *fakeModel { return fakemodel.Start(t) }
