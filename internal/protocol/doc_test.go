package protocol

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/instore-dev/instore"
)

// TestDocExamples checks that every example message in
// docs/terminal-protocol.md is valid, so that the document and the code
// cannot drift apart.
func TestDocExamples(t *testing.T) {
	doc, err := os.ReadFile("../../docs/terminal-protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte(`{"type":`)) {
			continue
		}
		n++
		env, err := Decode(line)
		if err != nil {
			t.Errorf("Decode(%s) = %v", line, err)
			continue
		}
		dst := NewData(env.Type)
		if dst == nil {
			continue
		}
		if err := DecodeData(env, dst); err != nil {
			t.Errorf("DecodeData(%s) = %v", line, err)
		}
	}
	if n < 10 {
		t.Errorf("found %d examples in the document, want every message type's", n)
	}
}

// TestDocLimits checks that docs/terminal-protocol.md and the Online
// API's document state the limits the code enforces.
func TestDocLimits(t *testing.T) {
	for file, want := range map[string][]string{
		"../../docs/terminal-protocol.md": {fmt.Sprintf("**%d bytes**", MaxFrameBytes), fmt.Sprintf("section 3 (%d bytes)", MaxFrameBytes),
			fmt.Sprintf("= %d bytes per receipt", MaxLinesBytes)},
		"../../api/online-api.yaml": {fmt.Sprintf("`POST /print` takes up to %d bytes", instore.MaxPrintBodyBytes)},
	} {
		doc, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !bytes.Contains(doc, []byte(w)) {
				t.Errorf("%s does not say %q", file, w)
			}
		}
	}
}
