package policy

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync"
)

// TraceLine is the --trace line for a refused destination (SPEC §4.6):
//
//	[hermetic] blocked http.connect host=example.com port=443 reason=not-allowlisted
func TraceLine(d Decision) string {
	host := d.Host
	if d.Reason == ReasonInvalidHost {
		host = strconv.Quote(host)
	}
	comp := string(d.Component)
	if comp == "" {
		comp = "net"
	}
	line := fmt.Sprintf("[hermetic] blocked %s.connect host=%s port=%d reason=%s", comp, host, d.Port, d.Reason)
	if d.Addr.IsValid() && d.Addr.String() != d.Host {
		line += " addr=" + d.Addr.String()
	}
	if d.Audited {
		line += " (audit: let through)"
	}
	return line
}

// TraceWriter writes a TraceLine for every denied decision.
type TraceWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// NewTraceWriter returns a Recorder that traces refusals to w.
func NewTraceWriter(w io.Writer) *TraceWriter { return &TraceWriter{w: w} }

// Record writes d's trace line if d was denied.
func (t *TraceWriter) Record(d Decision) {
	if d.Allowed() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintln(t.w, TraceLine(d))
}

// JSONWriter writes every decision as one JSON line. A write error is kept
// (see Err), reported once when it happens, and later decisions are still
// attempted, so that enforcement never depends on the log.
type JSONWriter struct {
	mu    sync.Mutex
	w     io.Writer
	err   error
	onErr func(error)
}

// NewJSONWriter returns a Recorder that logs decisions to w as JSON lines.
// If onErr is not nil it is called with the first write error as it
// happens, so that a user whose disk fills up learns it during the run.
func NewJSONWriter(w io.Writer, onErr func(error)) *JSONWriter {
	return &JSONWriter{w: w, onErr: onErr}
}

// Record appends d to the log.
func (j *JSONWriter) Record(d Decision) {
	b, err := json.Marshal(d)
	if err != nil {
		return
	}
	b = append(b, '\n')
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, err := j.w.Write(b); err != nil && j.err == nil {
		j.err = err
		if j.onErr != nil {
			j.onErr(err)
		}
	}
}

// Err returns the first write error, if any.
func (j *JSONWriter) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}

// Recorders fans one decision out to several recorders.
type Recorders []Recorder

// Record passes d to every recorder.
func (rs Recorders) Record(d Decision) {
	for _, r := range rs {
		r.Record(d)
	}
}
