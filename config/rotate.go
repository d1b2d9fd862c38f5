package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// rotateExample is what a rotate policy looks like on the command line.
const rotateExample = `{"mode":"handoff","maxTurns":40}`

// ApplyRotateJSON lays the JSON object js over base and validates the result:
// only the fields js names change, so `{"maxTurns":40}` keeps base's mode and
// contextPercent. Unknown fields are an error that names them and lists the
// allowed ones; so is anything but an object. On error it returns base
// unchanged and every problem at once.
func ApplyRotateJSON(base Rotate, js string) (Rotate, error) {
	dec := json.NewDecoder(strings.NewReader(js))
	dec.UseNumber()
	var raw any
	if err := dec.Decode(&raw); err != nil {
		return base, fmt.Errorf("rotate: %q is not JSON (%v); write an object such as %s", js, err, rotateExample)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return base, fmt.Errorf("rotate: %q has more after its JSON object; write one object such as %s", js, rotateExample)
	}
	if _, ok := raw.(map[string]any); !ok {
		return base, fmt.Errorf("rotate: %s is not a JSON object; write one such as %s", describe(raw), rotateExample)
	}
	r := base
	var d decoder
	d.decode("", raw, reflect.ValueOf(&r).Elem())
	if err := joinLines(merge(d.problems, r.problems(""))); err != nil {
		return base, err
	}
	return r, nil
}
