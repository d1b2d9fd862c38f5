package worker

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

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
		// Temporal Cloud (and a cluster that gives nid no operator
		// rights) leaves it to the operator: say exactly what to run.
		return fmt.Errorf("registering search attributes on namespace %s: %w\n%s", namespace, err, SearchAttributeCommands(namespace, missing))
	}
	return nil
}

// SearchAttributeCommands says how an operator adds the missing search
// attributes: with the Temporal CLI on a cluster, with tcld on Temporal
// Cloud.
func SearchAttributeCommands(namespace string, missing map[string]enumspb.IndexedValueType) string {
	names := slices.Sorted(maps.Keys(missing))
	cli := "temporal operator search-attribute create --namespace " + namespace
	cloud := "tcld namespace search-attributes add --namespace " + namespace
	for _, name := range names {
		typ := strings.TrimPrefix(missing[name].String(), "INDEXED_VALUE_TYPE_")
		typ = strings.ToUpper(typ[:1]) + strings.ToLower(typ[1:])
		cli += " --name " + name + " --type " + typ
		cloud += " --search-attribute " + name + "=" + typ
	}
	return "nid cannot add them itself; add them once, then start nid again:\n  " + cli +
		"\nor, on Temporal Cloud:\n  " + cloud
}
