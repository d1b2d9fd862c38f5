package clustertest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/internal/clustertest"
)

// TestClusterServesWithSQLVisibility: the cluster answers, and a custom
// search attribute added to it is listed, as nid's are when a worker
// starts.
func TestClusterServesWithSQLVisibility(t *testing.T) {
	cl := clustertest.Start(t)
	c, err := client.Dial(client.Options{HostPort: cl.Address, Namespace: clustertest.Namespace})
	require.NoError(t, err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace:        clustertest.Namespace,
		SearchAttributes: map[string]enumspb.IndexedValueType{"NidProbe": enumspb.INDEXED_VALUE_TYPE_KEYWORD},
	})
	require.NoError(t, err)
	list, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: clustertest.Namespace})
	require.NoError(t, err)
	require.Equal(t, enumspb.INDEXED_VALUE_TYPE_KEYWORD, list.GetCustomAttributes()["NidProbe"])
}
