package worker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
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
	if len(missing) > 0 {
		_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
			Namespace: namespace, SearchAttributes: missing,
		})
		if err != nil {
			// Temporal Cloud (and a cluster that gives nid no operator
			// rights) leaves it to the operator: say exactly what to run.
			return fmt.Errorf("registering search attributes on namespace %s: %w\n%s", namespace, err, SearchAttributeCommands(namespace, missing))
		}
	}
	return awaitSearchAttributes(ctx, c, namespace)
}

// searchAttributePatience is how long a worker waits for the cluster to take
// nid's search attributes into use; its namespace cache refreshes every few
// seconds.
const searchAttributePatience = 2 * time.Minute

// zeroLiteral is a value of each type in a visibility query.
var zeroLiteral = map[enumspb.IndexedValueType]string{
	enumspb.INDEXED_VALUE_TYPE_KEYWORD:  "''",
	enumspb.INDEXED_VALUE_TYPE_TEXT:     "''",
	enumspb.INDEXED_VALUE_TYPE_INT:      "0",
	enumspb.INDEXED_VALUE_TYPE_DOUBLE:   "0",
	enumspb.INDEXED_VALUE_TYPE_BOOL:     "false",
	enumspb.INDEXED_VALUE_TYPE_DATETIME: "'1970-01-01T00:00:00Z'",
}

// awaitSearchAttributes waits until the frontend accepts a query naming
// every one of nid's search attributes. The cluster stores the ones just
// added (by this worker or one starting beside it) at once, but its
// services use them only from their next namespace cache refresh: until
// then starting a group fails with "no mapping defined for search
// attribute".
func awaitSearchAttributes(ctx context.Context, c client.Client, namespace string) error {
	attrs := workflows.SearchAttributes()
	var terms []string
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		terms = append(terms, name+" = "+zeroLiteral[attrs[name]])
	}
	query := strings.Join(terms, " AND ")
	deadline := time.Now().Add(searchAttributePatience)
	for {
		_, err := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: namespace, Query: query})
		var notYet *serviceerror.InvalidArgument
		if err == nil || !errors.As(err, &notYet) {
			return err
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("namespace %s does not take nid's search attributes into use after %s: %w", namespace, searchAttributePatience, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
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
