package worker

import (
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
)

func TestSearchAttributeCommands(t *testing.T) {
	got := SearchAttributeCommands("prod.a1b2c", map[string]enumspb.IndexedValueType{
		"NidRotations": enumspb.INDEXED_VALUE_TYPE_INT,
		"NidHost":      enumspb.INDEXED_VALUE_TYPE_KEYWORD,
	})
	require.Equal(t, "nid cannot add them itself; add them once, then start nid again:\n"+
		"  temporal operator search-attribute create --namespace prod.a1b2c --name NidHost --type Keyword --name NidRotations --type Int\n"+
		"or, on Temporal Cloud:\n"+
		"  tcld namespace search-attributes add --namespace prod.a1b2c --search-attribute NidHost=Keyword --search-attribute NidRotations=Int", got)
}
