package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/anishathalye/porcupine"
)

// Record is one line of a history as the tests write it: one operation of one client.
//
// The same shape serves a key-value store (put / get / cas) and single-row registers of
// a database (write / read / cas): a key is a register.
type Record struct {
	// Client is the test's id of the client that made the call.
	Client int `json:"client"`
	// Kind is put or write, get or read, or cas.
	Kind string `json:"kind"`
	// Key names the register.
	Key string `json:"key"`
	// Value is what a put wrote, what a get read (null: the key was absent) or what a
	// cas would write.
	Value *string `json:"value"`
	// Expected is the value a cas compared with (cas only).
	Expected *string `json:"expected,omitempty"`
	// Swapped is whether a cas found Expected and wrote Value (cas with outcome ok only).
	Swapped *bool `json:"swapped,omitempty"`
	// Call and Return are monotonic nanoseconds since an origin shared by every client.
	Call   int64 `json:"call"`
	Return int64 `json:"return"`
	// Outcome is ok (the server answered), failed (the operation definitely did not take
	// effect) or unknown (a timeout or a lost connection: it may or may not have).
	Outcome string `json:"outcome"`
}

// The kinds of operation, with the register names for the key-value ones.
const (
	kindWrite = "put"
	kindRead  = "get"
	kindCas   = "cas"
)

var kinds = map[string]string{
	"put": kindWrite, "write": kindWrite,
	"get": kindRead, "read": kindRead,
	"cas": kindCas,
}

// register is the state of one key: absent, or present with a value. Comparable, so
// porcupine's default equality (==) applies.
type register struct {
	present bool
	value   string
}

func (r register) String() string {
	if !r.present {
		return "∅"
	}
	return fmt.Sprintf("%q", r.value)
}

func registerOf(v *string) register {
	if v == nil {
		return register{}
	}
	return register{present: true, value: *v}
}

// input is what an operation asked for.
type input struct {
	kind     string
	key      string
	value    register // written (put, cas) or read (get)
	expected register // cas
	// unknown: the outcome is not known. Only writes are kept with an unknown outcome
	// (an unanswered read constrains nothing); such a write may have happened at any time
	// after its call, or never, which porcupine covers by an infinite return time.
	unknown bool
}

// output is what the server answered: for a cas, whether it swapped.
type output struct {
	swapped bool
}

// model is porcupine's partitioned key-value model: one register per key, checked
// separately (a history is linearizable if and only if every key's is).
var model = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		for _, op := range history {
			k := op.Input.(input).key
			byKey[k] = append(byKey[k], op)
		}
		return partitionsInKeyOrder(byKey)
	},
	Init: func() interface{} { return register{} },
	Step: func(state, in, out interface{}) (bool, interface{}) {
		s, i, o := state.(register), in.(input), out.(output)
		switch i.kind {
		case kindWrite:
			return true, i.value
		case kindRead:
			return i.value == s, s
		default: // cas
			matches := s == i.expected
			if i.unknown {
				// If it took effect at this point, it swapped exactly when the value matched.
				if matches {
					return true, i.value
				}
				return true, s
			}
			if o.swapped != matches {
				return false, s
			}
			if matches {
				return true, i.value
			}
			return true, s
		}
	},
	DescribeOperation: func(in, out interface{}) string { return describe(in.(input), out.(output)) },
	DescribeState:     func(state interface{}) string { return state.(register).String() },
}

// keyOf is the key of a porcupine operation of this model.
func keyOf(op porcupine.Operation) string { return op.Input.(input).key }

func partitionsInKeyOrder(byKey map[string][]porcupine.Operation) [][]porcupine.Operation {
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		out = append(out, byKey[k])
	}
	return out
}

func describe(i input, o output) string {
	q := "?"
	if !i.unknown {
		q = ""
	}
	switch i.kind {
	case kindWrite:
		return fmt.Sprintf("put(%s, %s)%s", i.key, i.value, q)
	case kindRead:
		return fmt.Sprintf("get(%s) → %s", i.key, i.value)
	default:
		if i.unknown {
			return fmt.Sprintf("cas(%s, %s → %s) → ?", i.key, i.expected, i.value)
		}
		return fmt.Sprintf("cas(%s, %s → %s) → %t", i.key, i.expected, i.value, o.swapped)
	}
}

// History is a parsed history, ready for porcupine.
type History struct {
	Ops []porcupine.Operation
	// Recorded counts every line; Unknown the writes kept with an unknown outcome;
	// Dropped the operations that constrain nothing (failed ones, unanswered reads).
	Recorded, Unknown, Dropped int
	Keys                       int
}

// InputError is a history that cannot be checked, naming the line and the field.
type InputError struct {
	Line  int
	Field string
	Msg   string
}

func (e *InputError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return fmt.Sprintf("line %d: field %q: %s", e.Line, e.Field, e.Msg)
}

// Parse reads a history, one JSON Record per line (blank lines are skipped).
func Parse(r io.Reader) (*History, error) {
	h := &History{}
	type pending struct {
		op        porcupine.Operation
		client    int
		unknown   bool
		callOrder int64
	}
	var ops []pending
	keys := map[string]bool{}
	var latest int64
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var rec Record
		dec := json.NewDecoder(bytes.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rec); err != nil {
			return nil, &InputError{Line: line, Msg: "not a history record: " + err.Error()}
		}
		h.Recorded++
		in, err := validate(line, &rec)
		if err != nil {
			return nil, err
		}
		if rec.Return > latest {
			latest = rec.Return
		}
		if rec.Call > latest {
			latest = rec.Call
		}
		if rec.Outcome == "failed" || (rec.Outcome == "unknown" && in.kind == kindRead) {
			h.Dropped++
			continue
		}
		in.unknown = rec.Outcome == "unknown"
		var out output
		if in.kind == kindCas && !in.unknown {
			out.swapped = *rec.Swapped
		}
		if in.unknown {
			h.Unknown++
		}
		keys[in.key] = true
		ops = append(ops, pending{
			op:      porcupine.Operation{Input: in, Output: out, Call: rec.Call, Return: rec.Return},
			client:  rec.Client,
			unknown: in.unknown,
		})
	}
	if err := sc.Err(); err != nil {
		return nil, &InputError{Line: line + 1, Msg: err.Error()}
	}
	// An unknown outcome never returns: after everything else, so that it may be placed
	// anywhere after its call, or (at the very end) not at all.
	never := latest + 1
	if never == math.MaxInt64 {
		return nil, &InputError{Line: line, Field: "return", Msg: "times too large"}
	}
	// Visualization lanes: a client that saw an unknown outcome goes on in a new lane, as
	// its unknown operation stays open until the end.
	lanes := map[[2]int]int{}
	generation := map[int]int{}
	for i := range ops {
		p := &ops[i]
		lane := [2]int{p.client, generation[p.client]}
		id, ok := lanes[lane]
		if !ok {
			id = len(lanes)
			lanes[lane] = id
		}
		p.op.ClientId = id
		if p.unknown {
			p.op.Return = never
			generation[p.client]++
		}
		h.Ops = append(h.Ops, p.op)
	}
	h.Keys = len(keys)
	return h, nil
}

func validate(line int, rec *Record) (input, error) {
	bad := func(field, msg string) (input, error) {
		return input{}, &InputError{Line: line, Field: field, Msg: msg}
	}
	kind, ok := kinds[rec.Kind]
	if !ok {
		return bad("kind", fmt.Sprintf("%q is not one of put, write, get, read, cas", rec.Kind))
	}
	if rec.Key == "" {
		return bad("key", "missing or empty")
	}
	if rec.Client < 0 {
		return bad("client", "negative")
	}
	switch rec.Outcome {
	case "ok", "failed", "unknown":
	default:
		return bad("outcome", fmt.Sprintf("%q is not one of ok, failed, unknown", rec.Outcome))
	}
	if rec.Call < 0 {
		return bad("call", "negative")
	}
	if rec.Outcome == "ok" && rec.Return < rec.Call {
		return bad("return", fmt.Sprintf("%d is before the call at %d", rec.Return, rec.Call))
	}
	in := input{kind: kind, key: rec.Key, value: registerOf(rec.Value)}
	switch kind {
	case kindWrite:
		if rec.Value == nil {
			return bad("value", "a "+rec.Kind+" needs the value it wrote")
		}
	case kindCas:
		if rec.Expected == nil {
			return bad("expected", "a cas needs the value it compared with")
		}
		if rec.Value == nil {
			return bad("value", "a cas needs the value it would write")
		}
		if rec.Outcome == "ok" && rec.Swapped == nil {
			return bad("swapped", "an answered cas needs whether it swapped")
		}
		in.expected = registerOf(rec.Expected)
	}
	if kind != kindCas && (rec.Expected != nil || rec.Swapped != nil) {
		return bad("expected", "only a cas has expected and swapped")
	}
	return in, nil
}

// describeOp is one operation as the verdict prints it: who, when, what.
func describeOp(op porcupine.Operation) string {
	ret := fmt.Sprintf("%d", op.Return)
	if op.Input.(input).unknown {
		ret = "∞"
	}
	return fmt.Sprintf("[%d, %s] lane %d: %s", op.Call, ret, op.ClientId,
		strings.TrimSpace(describe(op.Input.(input), op.Output.(output))))
}
