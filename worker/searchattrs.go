package worker

import (
	"context"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/nid-dev/nid/workflows"
)

// EnsureSearchAttributes registers nid's search attributes on a cluster nid
// did not start itself, adding only the missing ones. A name registered with
// another type is an error: nid ls would read it wrong.
func EnsureSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	have, err := c.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		return fmt.Errorf("listing search attributes: %w", err)
	}
	missing := map[string]enumspb.IndexedValueType{}
	for name, typ := range workflows.SearchAttributes() {
		got, ok := have.GetCustomAttributes()[name]
		switch {
		case !ok:
			missing[name] = typ
		case got != typ:
			return fmt.Errorf("search attribute %s is registered as %s; nid needs %s", name, got, typ)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
		Namespace: namespace, SearchAttributes: missing,
	})
	if err != nil {
		return fmt.Errorf("registering search attributes: %w", err)
	}
	return nil
}
