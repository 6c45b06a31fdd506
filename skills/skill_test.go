// Package skills holds the assistant skill packages; this test keeps
// skills/instore-dev from drifting away from the API it describes. It
// lives outside the package directory, so copying that directory into an
// assistant's skills folder copies no Go code.
package skills

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/instore-dev/instore"
)

const skillDir = "instore-dev"

// The files the specification's layout lists.
var layout = []string{
	"SKILL.md",
	"references/online-api.md",
	"references/access-api-2.md",
	"references/sandbox.md",
	"references/guardrails.md",
	"references/epas.md",
	"references/paas.md",
	"references/softpos.md",
	"examples/prompts.md",
}

// apiFacts is what the OpenAPI documents and the code lists define.
type apiFacts struct {
	ops      map[string]string // "METHOD path" -> document file
	paths    map[string]bool
	headers  map[string]bool // lower case
	fields   map[string]bool // property, parameter and form field names
	enums    map[string]bool // string enum values
	problems map[string]bool // problem names (urn:instore:problem:<name>)
	codes    map[string]instore.Code
	statuses map[string]instore.Code // transaction status, print status and payment method codes
	text     string                  // every document's text, for headers named in prose
}

func loadFacts(t *testing.T) *apiFacts {
	t.Helper()
	f := &apiFacts{
		ops: map[string]string{}, paths: map[string]bool{}, headers: map[string]bool{}, fields: map[string]bool{},
		enums: map[string]bool{}, problems: map[string]bool{}, codes: map[string]instore.Code{}, statuses: map[string]instore.Code{},
	}
	docs, _ := filepath.Glob("../api/*.yaml")
	if len(docs) == 0 {
		t.Fatal("no api/*.yaml")
	}
	var text strings.Builder
	for _, path := range docs {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		text.Write(b)
		doc, err := openapi3.NewLoader().LoadFromData(b)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		name := filepath.Base(path)
		for p, item := range doc.Paths.Map() {
			f.paths[p] = true
			for m, op := range item.Operations() {
				f.ops[m+" "+p] = name
				for _, pr := range append(slices.Clone(item.Parameters), op.Parameters...) {
					f.param(pr.Value)
				}
				if op.RequestBody != nil && op.RequestBody.Value != nil {
					for _, mt := range op.RequestBody.Value.Content {
						f.schema(mt.Schema, map[*openapi3.Schema]bool{})
					}
				}
				for _, r := range op.Responses.Map() {
					if r.Value == nil {
						continue
					}
					for h := range r.Value.Headers {
						f.headers[strings.ToLower(h)] = true
					}
					for _, mt := range r.Value.Content {
						f.schema(mt.Schema, map[*openapi3.Schema]bool{})
					}
				}
			}
		}
		for _, s := range doc.Components.Schemas {
			f.schema(s, map[*openapi3.Schema]bool{})
		}
		for _, p := range doc.Components.Parameters {
			f.param(p.Value)
		}
		for h := range doc.Components.Headers {
			f.headers[strings.ToLower(h)] = true
		}
		for _, s := range doc.Components.SecuritySchemes {
			switch v := s.Value; {
			case v.Type == "apiKey" && v.In == "header":
				f.headers[strings.ToLower(v.Name)] = true
			case v.Type == "http":
				f.headers["authorization"] = true
			}
		}
	}
	f.text = text.String()
	// Headers every request or answer has, named in the documents' prose.
	for _, h := range []string{"Content-Type", "Accept", "Allow"} {
		if strings.Contains(strings.ToLower(f.text), strings.ToLower(h)+":") || strings.Contains(f.text, "`"+h+"`") {
			f.headers[strings.ToLower(h)] = true
		}
	}
	// Problem names the documents use, as a type or in a code span.
	for _, m := range regexp.MustCompile("urn:instore:problem:([A-Za-z0-9-]+)|`([a-z]+(?:-[a-z]+)*)`").FindAllStringSubmatch(f.text, -1) {
		f.problems[m[1]+m[2]] = true
	}
	meta := instore.DefaultMetadata()
	for _, c := range meta.ErrorCodes {
		f.codes[c.Code] = c
	}
	for _, list := range [][]instore.Code{meta.TransactionStatuses, meta.PrintStatuses, meta.PaymentMethods} {
		for _, c := range list {
			f.statuses[c.Code] = c
		}
	}
	return f
}

func (f *apiFacts) param(p *openapi3.Parameter) {
	if p == nil {
		return
	}
	if p.In == "header" {
		f.headers[strings.ToLower(p.Name)] = true
	} else {
		f.fields[p.Name] = true
	}
	f.schema(p.Schema, map[*openapi3.Schema]bool{})
}

func (f *apiFacts) schema(ref *openapi3.SchemaRef, seen map[*openapi3.Schema]bool) {
	if ref == nil || ref.Value == nil || seen[ref.Value] {
		return
	}
	s := ref.Value
	seen[s] = true
	for name, p := range s.Properties {
		f.fields[name] = true
		f.schema(p, seen)
	}
	for _, e := range s.Enum {
		if v, ok := e.(string); ok {
			f.enums[v] = true
		}
	}
	f.schema(s.Items, seen)
	for _, list := range [][]*openapi3.SchemaRef{s.OneOf, s.AnyOf, s.AllOf} {
		for _, x := range list {
			f.schema(x, seen)
		}
	}
}

// problemName reports whether name is a problem of the code table
// (package instore) and of the documents.
func (f *apiFacts) problemName(name string) bool {
	known := name == instore.EInternal || instore.HTTPStatus(name) != 500 || f.codes[name].Code != ""
	return known && f.problems[name]
}

// skillFile is one markdown file of the package, split into prose (with
// its inline code spans) and fenced code blocks.
type skillFile struct {
	name, text, prose, code string
	spans                   []string
}

var fenceRE = regexp.MustCompile("(?s)```[a-z]*\n(.*?)```")
var spanRE = regexp.MustCompile("`([^`\n]+)`")

func readSkill(t *testing.T) []skillFile {
	t.Helper()
	var files []skillFile
	err := filepath.WalkDir(skillDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".md") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(skillDir, path)
		sf := skillFile{name: filepath.ToSlash(rel), text: string(b)}
		var code strings.Builder
		for _, m := range fenceRE.FindAllStringSubmatch(sf.text, -1) {
			code.WriteString(m[1])
		}
		sf.code = code.String()
		sf.prose = fenceRE.ReplaceAllString(sf.text, "")
		for _, m := range spanRE.FindAllStringSubmatch(sf.prose, -1) {
			sf.spans = append(sf.spans, m[1])
		}
		files = append(files, sf)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func TestLayout(t *testing.T) {
	for _, name := range layout {
		if _, err := os.Stat(filepath.Join(skillDir, name)); err != nil {
			t.Errorf("the package lacks %s: %v", name, err)
		}
	}
	b, err := os.ReadFile(filepath.Join(skillDir, "SKILL.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?s)^---\n(.*?)\n---\n`).FindStringSubmatch(string(b))
	if m == nil {
		t.Fatal("SKILL.md has no front matter")
	}
	if !regexp.MustCompile(`(?m)^name: instore-dev$`).MatchString(m[1]) || !regexp.MustCompile(`(?m)^description: \S.{40,}$`).MatchString(m[1]) {
		t.Errorf("SKILL.md front matter = %q, want name: instore-dev and a description", m[1])
	}
	// Every relative link resolves.
	for _, sf := range readSkill(t) {
		for _, l := range regexp.MustCompile(`\]\(([^)#:]+)(#[^)]*)?\)`).FindAllStringSubmatch(sf.text, -1) {
			target := filepath.Join(skillDir, filepath.Dir(sf.name), l[1])
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s links to %s, which does not exist", sf.name, l[1])
			}
		}
	}
}

// TestPromptsListTheSpecificationsApps checks examples/prompts.md offers
// the prompts the specification names.
func TestPromptsListTheSpecificationsApps(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(skillDir, "examples/prompts.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Online API purchase app", "Access API terminal management app", "EPAS sample ECR app", "SoftPOS app-to-app app"} {
		if !regexp.MustCompile(`(?m)^#+ .*` + regexp.QuoteMeta(want)).Match(b) {
			t.Errorf("examples/prompts.md has no heading for %q", want)
		}
	}
}

// TestHonestAboutScope checks that each surface reference says whether
// this project implements it.
func TestHonestAboutScope(t *testing.T) {
	cases := []struct {
		file, want string
	}{
		{"references/online-api.md", "This project implements"},
		{"references/access-api-2.md", "This project implements"},
		{"references/sandbox.md", "This project implements"},
		{"references/epas.md", "This project does not implement"},
		{"references/paas.md", "This project does not implement"},
		{"references/softpos.md", "This project does not implement"},
	}
	for _, tc := range cases {
		b, err := os.ReadFile(filepath.Join(skillDir, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), tc.want) {
			t.Errorf("%s does not say %q", tc.file, tc.want)
		}
	}
}

var (
	opRE      = regexp.MustCompile(`\b(GET|POST|PUT|PATCH|DELETE) (/[A-Za-z0-9_./{}-]*[A-Za-z0-9_}])`)
	urlPathRE = regexp.MustCompile(`(?:<[A-Z_]*BASE_URL>|\$\{?INSTORE_[A-Z_]+_URL\}?|https?://[a-z0-9.:]+)(/[A-Za-z0-9_./{}$-]*[A-Za-z0-9_}])`)
	headerRE  = regexp.MustCompile(`^([A-Z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)+|Authorization|Location|ETag|Accept|Allow)(?::.*)?$`)
	curlHdrRE = regexp.MustCompile(`-H ["']([A-Za-z][A-Za-z0-9-]*):`)
	fieldRE   = regexp.MustCompile(`^[a-z][A-Za-z0-9]*(?:_[a-z]+)*$`)
	dottedRE  = regexp.MustCompile(`^[a-z][A-Za-z0-9]*(?:\.[a-z][A-Za-z0-9]*)+$`)
	jsonKeyRE = regexp.MustCompile(`"([a-z][A-Za-z0-9_]*)"\s*:`)
	upperRE   = regexp.MustCompile(`^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*$`)
	snakeRE   = regexp.MustCompile(`\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b`)
	wpRE      = regexp.MustCompile(`\bWP\d\d\b`)
	codeIDRE  = regexp.MustCompile(`\b([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*) \((\d+)\)`)
	idCodeRE  = regexp.MustCompile(`\b(\d+) ([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)\b`)
	rowRE     = regexp.MustCompile(`(?m)^\| *(\d+) *\| *` + "`?" + `([A-Z][A-Z0-9_]+)` + "`?" + ` *\| *([^|]*?) *\|`)
	statusRE  = regexp.MustCompile("\\b([45]\\d\\d)\\b`?,? `?(WP\\d\\d|[a-z]+(?:-[a-z]+)*)`?")
	problemRE = regexp.MustCompile(`urn:instore:problem:([A-Za-z0-9-]+)`)
)

// words that are code spans but no API name: literals.
var literals = map[string]bool{"true": true, "false": true, "null": true}

// TestReferencesMatchTheAPI: every method and path, header, field name and
// code the package mentions exists in api/*.yaml and the code lists.
func TestReferencesMatchTheAPI(t *testing.T) {
	f := loadFacts(t)
	for _, sf := range readSkill(t) {
		t.Run(sf.name, func(t *testing.T) {
			bad := func(kind, what string) {
				t.Errorf("%s: %s %q is not in api/*.yaml or the code lists", sf.name, kind, what)
			}
			for _, m := range opRE.FindAllStringSubmatch(sf.text, -1) {
				if _, ok := f.ops[m[1]+" "+m[2]]; !ok {
					bad("operation", m[1]+" "+m[2])
				}
			}
			for _, m := range urlPathRE.FindAllStringSubmatch(sf.code, -1) {
				p := regexp.MustCompile(`\$[A-Za-z_]+|\$\{[A-Za-z_]+\}|<[A-Z_]+>`).ReplaceAllString(m[1], "X")
				if !f.pathMatches(p) {
					bad("path", m[1])
				}
			}
			for _, m := range curlHdrRE.FindAllStringSubmatch(sf.code, -1) {
				if !f.headers[strings.ToLower(m[1])] {
					bad("header", m[1])
				}
			}
			for _, m := range jsonKeyRE.FindAllStringSubmatch(sf.code+"\n"+strings.Join(sf.spans, "\n"), -1) {
				if !f.fields[m[1]] {
					bad("field", m[1])
				}
			}
			for _, s := range sf.spans {
				switch {
				case literals[s]:
				case headerRE.MatchString(s):
					if h := headerRE.FindStringSubmatch(s)[1]; !f.headers[strings.ToLower(h)] {
						bad("header", h)
					}
				case fieldRE.MatchString(s):
					if !f.fields[s] && !f.enums[s] && !f.problemName(s) {
						bad("field", s)
					}
				case dottedRE.MatchString(s):
					for _, part := range strings.Split(s, ".") {
						if !f.fields[part] {
							bad("field", part)
						}
					}
				case strings.Contains(s, "-") && regexp.MustCompile(`^[a-z]+(?:-[a-z]+)+$`).MatchString(s):
					if !f.problemName(s) {
						bad("problem", s)
					}
				case upperRE.MatchString(s) && !wpRE.MatchString(s) && !strings.HasPrefix(s, "INSTORE_"):
					if f.statuses[s].Code == "" && !f.enums[s] {
						bad("code", s)
					}
				}
			}
			for _, m := range problemRE.FindAllStringSubmatch(sf.text, -1) {
				if m[1] != "" && !f.problemName(m[1]) && !strings.HasPrefix(m[1], "WP") {
					bad("problem", m[1])
				}
			}
			for _, w := range wpRE.FindAllString(sf.text, -1) {
				if f.codes[w].Code == "" {
					bad("error code", w)
				}
			}
			for _, w := range snakeRE.FindAllString(sf.text, -1) {
				if f.statuses[w].Code == "" && !f.enums[w] && !strings.HasPrefix(w, "INSTORE_") && !placeholder(sf.text, w) {
					bad("code", w)
				}
			}
			// A code with its id in parentheses, "TECHNICAL_ERROR (8)",
			// or before it, "11 TRANSACTION_DECLINED", carries that id.
			check := func(code, id string) {
				c, ok := f.statuses[code]
				if n, _ := strconv.Atoi(id); ok && c.ID != n {
					t.Errorf("%s: %s is id %d in the code lists, the text says %s", sf.name, code, c.ID, id)
				}
			}
			for _, m := range codeIDRE.FindAllStringSubmatch(sf.text, -1) {
				check(m[1], m[2])
			}
			for _, m := range idCodeRE.FindAllStringSubmatch(sf.text, -1) {
				check(m[2], m[1])
			}
			// Code list tables reproduce the lists exactly.
			for _, m := range rowRE.FindAllStringSubmatch(sf.text, -1) {
				id, _ := strconv.Atoi(m[1])
				c, ok := f.codes[m[2]]
				if !ok {
					c, ok = f.statuses[m[2]]
				}
				if ok && (c.ID != id || m[3] != "" && !strings.HasPrefix(m[3], c.Description)) {
					t.Errorf("%s: table row %d %s %q, the code lists say %d %s %q", sf.name, id, m[2], m[3], c.ID, c.Code, c.Description)
				}
			}
			// "409 WP09", "`409` `not-reversible`": the status the code
			// table gives.
			for _, m := range statusRE.FindAllStringSubmatch(sf.text, -1) {
				code := m[2]
				if !wpRE.MatchString(code) && !f.problemName(code) {
					continue
				}
				if got, _ := strconv.Atoi(m[1]); instore.HTTPStatus(code) != got {
					t.Errorf("%s: says %s for %s, the code table says %d", sf.name, m[1], code, instore.HTTPStatus(code))
				}
			}
		})
	}
}

// placeholder reports whether w is written as a placeholder, <W>, such as
// <ACCESS_TOKEN>.
func placeholder(text, w string) bool {
	return strings.Contains(text, "<"+w+">") && !regexp.MustCompile(`[^<]\b`+w+`\b[^>]`).MatchString(text)
}

// pathMatches reports whether p, with placeholders replaced by X, is a
// path of the documents.
func (f *apiFacts) pathMatches(p string) bool {
	for doc := range f.paths {
		pat := "^" + regexp.MustCompile(`\\\{[A-Za-z]+\\\}`).ReplaceAllString(regexp.QuoteMeta(doc), `[^/]+`) + "$"
		if regexp.MustCompile(pat).MatchString(p) {
			return true
		}
	}
	return false
}

// TestReferencesCoverTheAPI: every operation of the OpenAPI documents is
// named, method and path, in the references.
func TestReferencesCoverTheAPI(t *testing.T) {
	f := loadFacts(t)
	named := map[string]bool{}
	for _, sf := range readSkill(t) {
		if strings.HasPrefix(sf.name, "references/") || sf.name == "SKILL.md" {
			for _, m := range opRE.FindAllStringSubmatch(sf.text, -1) {
				named[m[1]+" "+m[2]] = true
			}
		}
	}
	var missing []string
	for op, doc := range f.ops {
		if !named[op] {
			missing = append(missing, fmt.Sprintf("%s (%s)", op, doc))
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("the references never name %s", m)
	}
}

// TestCodeListsComplete: the references reproduce every entry of the
// errorCodes, transactionStatuses and printStatuses lists.
func TestCodeListsComplete(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(skillDir, "references/online-api.md"))
	if err != nil {
		t.Fatal(err)
	}
	meta := instore.DefaultMetadata()
	for _, list := range [][]instore.Code{meta.ErrorCodes, meta.TransactionStatuses, meta.PrintStatuses} {
		for _, c := range list {
			row := regexp.MustCompile(`(?m)^\| *` + strconv.Itoa(c.ID) + ` *\| *` + "`?" + c.Code + "`?" + ` *\| *` + regexp.QuoteMeta(c.Description) + ` *\|`)
			if !row.Match(b) {
				t.Errorf("references/online-api.md has no row | %d | %s | %s |", c.ID, c.Code, c.Description)
			}
		}
	}
}

// TestNoSecrets: the package holds placeholders, never a credential.
func TestNoSecrets(t *testing.T) {
	secret := regexp.MustCompile(`\b(isk|ics|ids)_[A-Za-z0-9]{16,}|eyJ[A-Za-z0-9_-]{20,}\.|\b(cus|mer|cli)_[0-9a-f]{16,}`)
	for _, sf := range readSkill(t) {
		if m := secret.FindString(sf.text); m != "" {
			t.Errorf("%s holds what looks like a credential or identifier: %q; use a placeholder such as <ACCESS_TOKEN>", sf.name, m)
		}
	}
}
