package agents

import "testing"

// A kind's entry says it attaches exactly when its adapter can: the
// session workflow refuses nid attach by the entry, the worker by the
// adapter, and a person must get the same answer from both.
func TestAKindAttachesWhenItsAdapterCan(t *testing.T) {
	for _, k := range Kinds() {
		_, can := k.New().(Attacher)
		if can != k.Attaches {
			t.Errorf("%s: entry says Attaches %v, adapter is an Attacher: %v", k.Name, k.Attaches, can)
		}
	}
}
