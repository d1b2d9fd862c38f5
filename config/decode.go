package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// problem is one thing wrong with a configuration, at a key path such as
// groups.web.sessions[0].name (empty for the whole value).
type problem struct {
	path string
	msg  string
}

func (p problem) String() string {
	if p.path == "" {
		return p.msg
	}
	return p.path + ": " + p.msg
}

// join appends key to a key path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// decoder lays the loosely typed maps that YAML, the environment, flags and
// JSON produce over a typed value. It keeps going after a bad key and
// collects a problem for each, so the user sees every mistake at once. Key
// names come from the koanf struct tags, so a field added to Config is known
// here without further work.
//
// Values are read weakly where the source cannot do better: environment
// variables are always strings, so "7233" is a number and "true" a bool.
// JSON can say what it means, so a strict decoder (nid group set, the API)
// refuses a string where a number or a bool belongs.
type decoder struct {
	problems []problem
	strict   bool
	// kinds says which sessions are sims, whose sim: block starts from
	// DefaultSim.
	kinds kinds
}

func (d *decoder) add(path, format string, args ...any) {
	d.problems = append(d.problems, problem{path: path, msg: fmt.Sprintf(format, args...)})
}

// movedKeys maps keys an older nid.yaml may hold to where they went, so the
// error says where rather than only that the key is unknown.
var movedKeys = map[string]string{
	"temporal.uiPort": "temporal.ui.port",
}

var (
	durationType = reflect.TypeFor[Duration]()
	groupType    = reflect.TypeFor[Group]()
	sessionType  = reflect.TypeFor[Session]()
)

// decode sets v from raw. A key with no value (YAML's `key:` or null) keeps
// what v already holds, which is its default.
func (d *decoder) decode(path string, raw any, v reflect.Value) {
	if raw == nil {
		return
	}
	if v.Type() == durationType {
		d.duration(path, raw, v)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		// An optional value (network: true|false): nil means unset.
		e := reflect.New(v.Type().Elem())
		before := len(d.problems)
		d.decode(path, raw, e.Elem())
		if len(d.problems) == before {
			v.Set(e)
		}
	case reflect.Struct:
		d.structure(path, raw, v)
	case reflect.Map:
		d.mapping(path, raw, v)
	case reflect.Slice:
		d.list(path, raw, v)
	case reflect.String:
		s, ok := asString(raw)
		if !ok {
			d.add(path, "%s is not a string", describe(raw))
			return
		}
		v.SetString(s)
	case reflect.Int, reflect.Int64, reflect.Float64, reflect.Bool:
		if _, isString := raw.(string); isString && d.strict {
			// "80" reads as 80 from the environment, but JSON meant it.
			var weak decoder
			if weak.scalar(path, raw, reflect.New(v.Type()).Elem()); len(weak.problems) > 0 {
				d.problems = append(d.problems, weak.problems...)
				return
			}
			want := "a number"
			if v.Kind() == reflect.Bool {
				want = "true or false"
			}
			d.add(path, "%s is a string: write %s without quotes", describe(raw), want)
			return
		}
		d.scalar(path, raw, v)
	default:
		// Only reachable by adding a field of a new kind to Config.
		panic(fmt.Sprintf("config: cannot decode into %s at %s", v.Type(), path))
	}
}

// scalar sets a number or a bool.
func (d *decoder) scalar(path string, raw any, v reflect.Value) {
	switch v.Kind() {
	case reflect.Int, reflect.Int64:
		n, msg := asInt(raw)
		if msg == "" && v.OverflowInt(n) {
			msg = "is too large"
		}
		if msg != "" {
			d.add(path, "%s %s", describe(raw), msg)
			return
		}
		v.SetInt(n)
	case reflect.Float64:
		f, ok := asFloat(raw)
		if !ok {
			d.add(path, "%s is not a number", describe(raw))
			return
		}
		v.SetFloat(f)
	case reflect.Bool:
		b, ok := asBool(raw)
		if !ok {
			d.add(path, "%s is not true or false", describe(raw))
			return
		}
		v.SetBool(b)
	}
}

// structKeys are the key names of a struct type in declaration order, and
// the field index of each.
type structKeys struct {
	names []string
	index map[string]int
}

// keyCache holds each struct type's keys: a file of a thousand sessions
// decodes the session type a thousand times, and every command reads it.
var keyCache sync.Map // reflect.Type → structKeys

func keys(t reflect.Type) structKeys {
	if k, ok := keyCache.Load(t); ok {
		return k.(structKeys)
	}
	k := structKeys{index: make(map[string]int, t.NumField())}
	for i := range t.NumField() {
		name := t.Field(i).Tag.Get("koanf")
		if name == "-" {
			// Filled in by nid, never read from a file.
			continue
		}
		k.names = append(k.names, name)
		k.index[name] = i
	}
	keyCache.Store(t, k)
	return k
}

func (d *decoder) structure(path string, raw any, v reflect.Value) {
	sk := keys(v.Type())
	names, index := sk.names, sk.index
	m, ok := raw.(map[string]any)
	if !ok {
		d.add(path, "%s is not a mapping (allowed keys: %s)", describe(raw), strings.Join(names, ", "))
		return
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		i, ok := index[k]
		if !ok {
			if to, moved := movedKeys[join(path, k)]; moved {
				d.add(join(path, k), "moved to %s", to)
			} else {
				d.add(join(path, k), "unknown key (allowed: %s)", strings.Join(names, ", "))
			}
			continue
		}
		d.decode(join(path, k), m[k], v.Field(i))
	}
}

func (d *decoder) mapping(path string, raw any, v reflect.Value) {
	m, ok := raw.(map[string]any)
	if !ok {
		d.add(path, "%s is not a mapping of names", describe(raw))
		return
	}
	if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		e := d.fresh(v.Type().Elem(), m[k])
		d.decode(join(path, k), m[k], e)
		v.SetMapIndex(reflect.ValueOf(k), e)
	}
}

func (d *decoder) list(path string, raw any, v reflect.Value) {
	items, ok := raw.([]any)
	if !ok {
		d.add(path, "%s is not a list", describe(raw))
		return
	}
	// Decoded in place: a fleet's thousand sessions are not each made
	// apart and copied in.
	s := reflect.MakeSlice(v.Type(), len(items), len(items))
	for i, item := range items {
		e := s.Index(i)
		d.setFresh(e, item)
		d.decode(fmt.Sprintf("%s[%d]", path, i), item, e)
	}
	v.Set(s)
}

const durationHint = "(use e.g. 500ms, 2s, 1m)"

func (d *decoder) duration(path string, raw any, v reflect.Value) {
	if s, ok := raw.(string); ok {
		dur, err := time.ParseDuration(strings.TrimSpace(s))
		if err != nil {
			d.add(path, "%q is not a duration %s", s, durationHint)
			return
		}
		v.SetInt(int64(dur))
		return
	}
	// A bare number is ambiguous (seconds? milliseconds?) unless it is 0.
	n, msg := asInt(raw)
	switch {
	case msg != "":
		d.add(path, "%s is not a duration %s", describe(raw), durationHint)
	case n != 0:
		d.add(path, "%s needs a unit %s", describe(raw), durationHint)
	default:
		v.SetInt(0)
	}
}

// fresh returns the value a new group or session starts from before its keys
// are laid over it, so each key left out keeps its default even when its
// siblings are set: `rotate: {maxTurns: 60}` keeps mode auto and
// contextPercent 85. Sim defaults apply only to sim sessions, because a sim
// block anywhere else is an error.
func (d *decoder) fresh(t reflect.Type, raw any) reflect.Value {
	v := reflect.New(t).Elem()
	d.setFresh(v, raw)
	return v
}

// setFresh sets the zero value v, which is addressable, to what fresh
// makes.
func (d *decoder) setFresh(v reflect.Value, raw any) {
	switch v.Type() {
	case groupType:
		v.Set(reflect.ValueOf(Group{Rotate: DefaultRotate(), Prompts: DefaultPrompts()}))
	case sessionType:
		// "agent" is Session.Agent's koanf key.
		m, _ := raw.(map[string]any)
		name, _ := m["agent"].(string)
		if k, ok := d.kinds.named(name); ok && k.Sim {
			v.Addr().Interface().(*Session).Sim = DefaultSim()
		}
	}
}

// describe renders a raw value for a problem message.
func describe(raw any) string {
	switch x := raw.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(x)
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	default:
		return fmt.Sprint(x)
	}
}

func asString(raw any) (string, bool) {
	switch x := raw.(type) {
	case string:
		return x, true
	case int, int64, uint64, float64, bool, json.Number:
		// YAML reads `name: 1` as a number; the user meant the text.
		return fmt.Sprint(x), true
	}
	return "", false
}

// asInt returns raw as a whole number, or what is wrong with it.
func asInt(raw any) (int64, string) {
	var f float64
	switch x := raw.(type) {
	case int:
		return int64(x), ""
	case int64:
		return x, ""
	case uint64:
		if x > math.MaxInt64 {
			return 0, "is too large"
		}
		return int64(x), ""
	case float64:
		f = x
	case json.Number:
		return parseInt(string(x))
	case string:
		return parseInt(strings.TrimSpace(x))
	default:
		return 0, "is not a number"
	}
	if f != math.Trunc(f) {
		return 0, "is not a whole number"
	}
	if f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, "is too large"
	}
	return int64(f), ""
}

func asFloat(raw any) (float64, bool) {
	switch x := raw.(type) {
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float64:
		return x, true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
		return f, err == nil
	}
	return 0, false
}

func parseInt(s string) (int64, string) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, ""
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return asInt(f)
	}
	return 0, "is not a number"
}

func asBool(raw any) (bool, bool) {
	switch x := raw.(type) {
	case bool:
		return x, true
	case string:
		b, err := strconv.ParseBool(strings.TrimSpace(x))
		return b, err == nil
	}
	return false, false
}
