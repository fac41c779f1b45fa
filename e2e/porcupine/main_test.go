package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// check runs the command on a history given as lines and returns its exit status and
// the JSON verdict.
func check(t *testing.T, lines ...string) (int, Verdict) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run([]string{"-json"}, strings.NewReader(strings.Join(lines, "\n")), &out, &errOut)
	var v Verdict
	if code != 2 {
		if err := json.Unmarshal(out.Bytes(), &v); err != nil {
			t.Fatalf("verdict %q: %v (stderr %q)", out.String(), err, errOut.String())
		}
	}
	return code, v
}

func TestConcurrentWritesAndReadsAreLinearizable(t *testing.T) {
	code, v := check(t,
		`{"client":0,"kind":"put","key":"a","value":"1","call":0,"return":10,"outcome":"ok"}`,
		// Concurrent with the put: may see the old (absent) value or the new one.
		`{"client":1,"kind":"get","key":"a","value":null,"call":5,"return":15,"outcome":"ok"}`,
		`{"client":2,"kind":"get","key":"a","value":"1","call":6,"return":16,"outcome":"ok"}`,
		`{"client":0,"kind":"cas","key":"a","expected":"1","value":"2","swapped":true,"call":20,"return":30,"outcome":"ok"}`,
		`{"client":1,"kind":"cas","key":"a","expected":"1","value":"3","swapped":false,"call":31,"return":40,"outcome":"ok"}`,
		`{"client":2,"kind":"get","key":"a","value":"2","call":41,"return":50,"outcome":"ok"}`,
		`{"client":2,"kind":"put","key":"b","value":"x","call":41,"return":50,"outcome":"ok"}`,
	)
	if code != 0 || v.Verdict != "linearizable" || v.Operations != 7 || v.Keys != 2 {
		t.Fatalf("exit %d, %+v", code, v)
	}
}

func TestStaleReadAfterACompletedWriteIsAViolation(t *testing.T) {
	code, v := check(t,
		`{"client":0,"kind":"put","key":"a","value":"1","call":0,"return":10,"outcome":"ok"}`,
		`{"client":0,"kind":"put","key":"a","value":"2","call":20,"return":30,"outcome":"ok"}`,
		// Starts after the second put returned, yet reads the first.
		`{"client":1,"kind":"get","key":"a","value":"1","call":40,"return":50,"outcome":"ok"}`,
		`{"client":1,"kind":"put","key":"b","value":"x","call":40,"return":50,"outcome":"ok"}`,
	)
	if code != 1 || v.Verdict != "violation" || len(v.Violations) != 1 || v.Violations[0].Key != "a" {
		t.Fatalf("exit %d, %+v", code, v)
	}
	if x := v.Violations[0]; x.Operations != 3 || x.Linearized >= 3 || len(x.Unplaced) == 0 {
		t.Fatalf("%+v", x)
	}
}

func TestLostAcknowledgedWriteIsAViolation(t *testing.T) {
	code, v := check(t,
		`{"client":0,"kind":"put","key":"a","value":"1","call":0,"return":10,"outcome":"ok"}`,
		// The write was acknowledged; a later read finds the key absent.
		`{"client":1,"kind":"get","key":"a","value":null,"call":100,"return":110,"outcome":"ok"}`,
	)
	if code != 1 || v.Verdict != "violation" || v.Violations[0].Key != "a" {
		t.Fatalf("exit %d, %+v", code, v)
	}
}

func TestCasThatReportsTheWrongResultIsAViolation(t *testing.T) {
	code, v := check(t,
		`{"client":0,"kind":"put","key":"a","value":"1","call":0,"return":10,"outcome":"ok"}`,
		`{"client":1,"kind":"cas","key":"a","expected":"1","value":"2","swapped":false,"call":20,"return":30,"outcome":"ok"}`,
	)
	if code != 1 || v.Verdict != "violation" {
		t.Fatalf("exit %d, %+v", code, v)
	}
}

func TestUnknownOutcomesMayOrMayNotHaveHappened(t *testing.T) {
	put := `{"client":0,"kind":"put","key":"a","value":"1","call":0,"return":10,"outcome":"ok"}`
	timedOut := `{"client":0,"kind":"put","key":"a","value":"2","call":20,"return":2020,"outcome":"unknown"}`
	read := func(value string, call int) string {
		return `{"client":1,"kind":"get","key":"a","value":` + value + `,"call":` +
			strconv.Itoa(call) + `,"return":` + strconv.Itoa(call+5) + `,"outcome":"ok"}`
	}
	// Seen long after it timed out: it happened.
	if code, v := check(t, put, timedOut, read(`"2"`, 5000)); code != 0 || v.Unknown != 1 {
		t.Fatalf("seen: exit %d, %+v", code, v)
	}
	// Never seen: it did not happen (or not yet).
	if code, v := check(t, put, timedOut, read(`"1"`, 5000), read(`"1"`, 6000)); code != 0 {
		t.Fatalf("not seen: exit %d, %+v", code, v)
	}
	// Seen, then gone: no order explains it.
	if code, v := check(t, put, timedOut, read(`"2"`, 5000), read(`"1"`, 6000)); code != 1 {
		t.Fatalf("seen then gone: exit %d, %+v", code, v)
	}
	// An unknown cas that would have matched may have swapped; one that could not match
	// cannot have.
	casUnknown := `{"client":0,"kind":"cas","key":"a","expected":"1","value":"3","call":20,"outcome":"unknown"}`
	if code, _ := check(t, put, casUnknown, read(`"3"`, 5000)); code != 0 {
		t.Fatalf("unknown cas seen: exit %d", code)
	}
	casNoMatch := `{"client":0,"kind":"cas","key":"a","expected":"9","value":"3","call":20,"outcome":"unknown"}`
	if code, _ := check(t, put, casNoMatch, read(`"3"`, 5000)); code != 1 {
		t.Fatalf("unknown cas that cannot match, seen: exit %d", code)
	}
	// A failed write definitely did not happen: reading its value is a violation.
	failed := `{"client":0,"kind":"put","key":"a","value":"2","call":20,"return":30,"outcome":"failed"}`
	if code, v := check(t, put, failed, read(`"2"`, 5000)); code != 1 || v.Dropped != 1 {
		t.Fatalf("failed write seen: exit %d, %+v", code, v)
	}
	// An unanswered read constrains nothing.
	lostRead := `{"client":1,"kind":"get","key":"a","value":"7","call":30,"outcome":"unknown"}`
	if code, v := check(t, put, lostRead); code != 0 || v.Dropped != 1 {
		t.Fatalf("unanswered read: exit %d, %+v", code, v)
	}
}

func TestRegisterKindsAreAccepted(t *testing.T) {
	code, v := check(t,
		`{"client":0,"kind":"write","key":"row-1","value":"1","call":0,"return":10,"outcome":"ok"}`,
		`{"client":1,"kind":"read","key":"row-1","value":"1","call":20,"return":30,"outcome":"ok"}`,
	)
	if code != 0 || v.Verdict != "linearizable" {
		t.Fatalf("exit %d, %+v", code, v)
	}
}

func TestBadInputNamesTheLineAndField(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{`{"client":0,"kind":"delete","key":"a","call":0,"return":1,"outcome":"ok"}`, `line 2: field "kind"`},
		{`{"client":0,"kind":"put","key":"a","call":0,"return":1,"outcome":"ok"}`, `line 2: field "value"`},
		{`{"client":0,"kind":"cas","key":"a","expected":"1","value":"2","call":0,"return":1,"outcome":"ok"}`, `line 2: field "swapped"`},
		{`{"client":0,"kind":"get","key":"a","value":"1","call":5,"return":1,"outcome":"ok"}`, `line 2: field "return"`},
		{`{"client":0,"kind":"get","key":"a","value":"1","call":0,"return":1,"outcome":"maybe"}`, `line 2: field "outcome"`},
		{`{"client":0,"kind":"get","key":"","call":0,"return":1,"outcome":"ok"}`, `line 2: field "key"`},
		{`{"client":0,"kind":"get","key":"a","vaule":"1","call":0,"return":1,"outcome":"ok"}`, `line 2: not a history record`},
		{`not json`, `line 2: not a history record`},
	} {
		var out, errOut bytes.Buffer
		history := `{"client":0,"kind":"put","key":"a","value":"1","call":0,"return":1,"outcome":"ok"}` + "\n" + c.line
		if code := run(nil, strings.NewReader(history), &out, &errOut); code != 2 {
			t.Errorf("%s: exit %d, want 2", c.line, code)
		}
		if !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%s: %q does not contain %q", c.line, errOut.String(), c.want)
		}
	}
}

func TestViolationWritesTheVisualization(t *testing.T) {
	dir := t.TempDir()
	history := filepath.Join(dir, "h.jsonl")
	html := filepath.Join(dir, "h.html")
	lines := `{"client":0,"kind":"put","key":"a","value":"1","call":0,"return":10,"outcome":"ok"}
{"client":1,"kind":"get","key":"a","value":null,"call":100,"return":110,"outcome":"ok"}
`
	if err := os.WriteFile(history, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"-html", html, history}, nil, &out, &errOut); code != 1 {
		t.Fatalf("exit %d: %s %s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"violation:", `key "a"`, "get(a) → ∅", "visualization: " + html} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("%q does not contain %q", out.String(), want)
		}
	}
	page, err := os.ReadFile(html)
	if err != nil || !bytes.Contains(page, []byte("<html")) {
		t.Fatalf("visualization: %v, %d bytes", err, len(page))
	}
}

// TestLargeConcurrentHistoryIsCheckedQuickly: 4 clients, 8000 operations on 3 keys from a
// simulated atomic register (each operation takes effect at a random point of its
// interval; 1% of the writes time out, half of those never applied), the size of an e2e
// run, is found linearizable within seconds.
func TestLargeConcurrentHistoryIsCheckedQuickly(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	type sim struct {
		rec   Record
		point int64
		apply bool
	}
	var ops []sim
	for client := 0; client < 4; client++ {
		at := int64(0)
		for n := 0; n < 2000; n++ {
			call := at + rng.Int63n(1000)
			ret := call + 1 + rng.Int63n(5000)
			value := fmt.Sprintf("%d-%d", client, n)
			rec := Record{Client: client, Key: fmt.Sprintf("k%d", rng.Intn(3)), Call: call, Return: ret, Outcome: "ok"}
			s := sim{point: call + rng.Int63n(ret-call+1), apply: true}
			switch rng.Intn(3) {
			case 0:
				rec.Kind, rec.Value = "put", &value
			case 1:
				rec.Kind = "get"
			default:
				rec.Kind, rec.Value = "cas", &value
			}
			if rec.Kind != "get" && rng.Intn(100) == 0 {
				rec.Outcome = "unknown"
				s.apply = rng.Intn(2) == 0
			}
			s.rec = rec
			ops = append(ops, s)
			at = ret
			if rec.Outcome == "unknown" {
				at = ret + 3000
			}
		}
	}
	sort.Slice(ops, func(a, b int) bool { return ops[a].point < ops[b].point })
	state := map[string]*string{}
	var lines []string
	for i := range ops {
		s := &ops[i]
		cur := state[s.rec.Key]
		switch s.rec.Kind {
		case "put":
			if s.apply {
				state[s.rec.Key] = s.rec.Value
			}
		case "get":
			s.rec.Value = cur
		case "cas":
			// Expect the current value half the time.
			expected := "none"
			if cur != nil && rng.Intn(2) == 0 {
				expected = *cur
			}
			s.rec.Expected = &expected
			swapped := cur != nil && *cur == expected
			if s.rec.Outcome == "ok" {
				s.rec.Swapped = &swapped
			}
			if swapped && s.apply {
				state[s.rec.Key] = s.rec.Value
			}
		}
		line, err := json.Marshal(s.rec)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(line))
	}
	started := time.Now()
	code, v := check(t, lines...)
	if code != 0 || v.Operations != 8000 || v.Keys != 3 {
		t.Fatalf("exit %d, %+v", code, v)
	}
	if took := time.Since(started); took > 30*time.Second {
		t.Fatalf("checked in %v", took)
	}
	t.Logf("8000 operations (%d unknown) checked in %.3f s", v.Unknown, v.CheckSeconds)
}
