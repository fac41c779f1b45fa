// Command statecraft-porcupine checks a history of operations on registers (a key-value
// store's keys, or a database's single-row registers) for linearizability with porcupine.
//
// The history is JSON lines (see Record) on standard input or in the file named by the
// argument. Exit status: 0 linearizable, 1 not linearizable (the offending keys and their
// operations are printed; -html writes porcupine's visualization), 2 bad input or usage,
// 3 the checker ran out of time (-timeout) before deciding.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// Verdict is what a check found, as -json prints it.
type Verdict struct {
	// Verdict is linearizable, violation or unknown (the checker timed out).
	Verdict string `json:"verdict"`
	// Recorded lines; operations checked; writes of unknown outcome among them;
	// operations dropped (failed, or unanswered reads); keys.
	Recorded     int     `json:"recorded"`
	Operations   int     `json:"operations"`
	Unknown      int     `json:"unknown"`
	Dropped      int     `json:"dropped"`
	Keys         int     `json:"keys"`
	CheckSeconds float64 `json:"check_seconds"`
	// Violations: one per key whose history is not linearizable.
	Violations []Violation `json:"violations,omitempty"`
	// HTML is where the visualization was written, if asked.
	HTML string `json:"html,omitempty"`
}

// Violation is one key whose operations admit no linearization.
type Violation struct {
	Key        string `json:"key"`
	Operations int    `json:"operations"`
	// Linearized is the length of the longest linearizable prefix porcupine found.
	Linearized int `json:"linearized"`
	// Unplaced are the operations (up to 20, by call time) outside that prefix: the
	// first of them is where every attempt got stuck.
	Unplaced []string `json:"unplaced"`
}

const maxUnplaced = 20

// Check runs porcupine on h, with a timeout (0: none).
func Check(h *History, timeout time.Duration) (Verdict, porcupine.LinearizationInfo) {
	started := time.Now()
	result, info := porcupine.CheckOperationsVerbose(model, h.Ops, timeout)
	v := Verdict{
		Recorded: h.Recorded, Operations: len(h.Ops), Unknown: h.Unknown, Dropped: h.Dropped, Keys: h.Keys,
		CheckSeconds: time.Since(started).Seconds(),
	}
	switch result {
	case porcupine.Ok:
		v.Verdict = "linearizable"
	case porcupine.Illegal:
		v.Verdict = "violation"
		v.Violations = violations(h, info)
	default:
		v.Verdict = "unknown"
	}
	return v, info
}

// violations finds the partitions (keys, in the model's order) whose longest partial
// linearization leaves operations out.
func violations(h *History, info porcupine.LinearizationInfo) []Violation {
	var out []Violation
	partials := info.PartialLinearizations()
	for i, part := range model.Partition(h.Ops) {
		longest := 0
		placed := map[int]bool{}
		if i < len(partials) {
			for _, lin := range partials[i] {
				if len(lin) > longest {
					longest = len(lin)
					placed = map[int]bool{}
					for _, id := range lin {
						placed[id] = true
					}
				}
			}
		}
		if longest == len(part) {
			continue
		}
		var unplaced []porcupine.Operation
		for id, op := range part {
			if !placed[id] {
				unplaced = append(unplaced, op)
			}
		}
		sort.SliceStable(unplaced, func(a, b int) bool { return unplaced[a].Call < unplaced[b].Call })
		var lines []string
		for _, op := range unplaced {
			if len(lines) == maxUnplaced {
				break
			}
			lines = append(lines, describeOp(op))
		}
		out = append(out, Violation{Key: keyOf(part[0]), Operations: len(part), Linearized: longest, Unplaced: lines})
	}
	return out
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("statecraft-porcupine", flag.ContinueOnError)
	flags.SetOutput(stderr)
	html := flags.String("html", "", "write porcupine's HTML visualization of the history here")
	asJSON := flags.Bool("json", false, "print the verdict as one JSON object")
	timeout := flags.Duration("timeout", 5*time.Minute, "give up (exit 3) after this long; 0: never")
	flags.Usage = func() {
		fmt.Fprintln(stderr, "usage: statecraft-porcupine [-json] [-html FILE] [-timeout D] [HISTORY.jsonl]  (default: standard input)")
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		return 2
	}
	in := stdin
	name := "standard input"
	switch flags.NArg() {
	case 0:
	case 1:
		name = flags.Arg(0)
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		defer f.Close()
		in = f
	default:
		flags.Usage()
		return 2
	}
	h, err := Parse(in)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	v, info := Check(h, *timeout)
	if *html != "" {
		if err := porcupine.VisualizePath(model, info, *html); err != nil {
			fmt.Fprintf(stderr, "writing the visualization: %v\n", err)
		} else {
			v.HTML = *html
		}
	}
	if *asJSON {
		_ = json.NewEncoder(stdout).Encode(v)
	} else {
		printVerdict(stdout, v)
	}
	switch v.Verdict {
	case "linearizable":
		return 0
	case "violation":
		return 1
	default:
		return 3
	}
}

func printVerdict(w io.Writer, v Verdict) {
	fmt.Fprintf(w, "%s: %d operations checked (%d of unknown outcome; %d of %d recorded dropped: failed or unanswered reads) on %d keys in %.3f s\n",
		v.Verdict, v.Operations, v.Unknown, v.Dropped, v.Recorded, v.Keys, v.CheckSeconds)
	for _, x := range v.Violations {
		fmt.Fprintf(w, "key %q: no linearization of its %d operations; the longest linearizable prefix has %d; not placed:\n",
			x.Key, x.Operations, x.Linearized)
		for _, line := range x.Unplaced {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}
	if v.HTML != "" {
		fmt.Fprintf(w, "visualization: %s\n", v.HTML)
	}
}
