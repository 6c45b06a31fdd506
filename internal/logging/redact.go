package logging

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"
)

// fingerprintPrefix marks a value replaced by its fingerprint.
const fingerprintPrefix = "fp:"

// fingerprintHex is how many hex characters of the HMAC a fingerprint keeps:
// 40 bits tell thousands of terminals apart yet reveal nothing useful.
const fingerprintHex = 10

// processKey is the fingerprint key used when none is configured, drawn once
// so that every logger of the process fingerprints alike.
var processKey = sync.OnceValue(func() []byte {
	key := make([]byte, 32)
	rand.Read(key) // never fails since Go 1.24
	return key
})

// Fingerprint returns the "fp:" form that the redacting handler puts in place
// of value, so that other packages can log a fingerprint explicitly and have it
// match the redacted lines. A nil or empty key means the per-process random
// key, as in [Options].
func Fingerprint(key []byte, value string) string {
	if len(key) == 0 {
		key = processKey()
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(value))
	var sum [sha256.Size]byte
	return formatFingerprint(mac.Sum(sum[:0]))
}

func formatFingerprint(sum []byte) string {
	var buf [len(fingerprintPrefix) + fingerprintHex]byte
	copy(buf[:], fingerprintPrefix)
	hex.Encode(buf[len(fingerprintPrefix):], sum[:fingerprintHex/2])
	return string(buf[:])
}

// Credential shapes, recognised in any string value and in messages. They are
// applied in this order: a bearer token is fingerprinted as a whole, so that
// it matches the same token logged under a key, and a JWT before the prefixed
// words so that an "isk_" glued to a JWT cannot leave the JWT's tail in clear.
var (
	// bearerPattern matches "Bearer <credential>"; submatch 1 is replaced.
	// The scheme is case-insensitive in HTTP, so is the match.
	bearerPattern = regexp.MustCompile(`\b[Bb][Ee][Aa][Rr][Ee][Rr]\s+(\S+)`)
	// jwtPattern matches three or more base64url parts separated by dots, the
	// first a JSON header ("eyJ" is base64 for `{"`). The last part may be empty
	// (alg "none"); a JWE's five parts are taken whole.
	jwtPattern = regexp.MustCompile(`eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]*)+`)
	// prefixedPattern matches the project's credentials and identifiers:
	// subscription keys (isk_), client secrets (ics_), device secrets (ids_),
	// merchant, customer, client and key ids (mer_, cus_, cli_, key_).
	prefixedPattern = regexp.MustCompile(`\b(?:isk|ics|ids|mer|cus|cli|key)_[A-Za-z0-9_-]+`)
)

// mayContainCredential reports whether s could match one of the credential
// patterns. It is a cheap superset of them, so that the regular expressions
// run only on the rare strings that need them, and a clean string costs a
// single pass without allocation.
func mayContainCredential(s string) bool {
	for i := 0; i < len(s); i++ {
		if !credentialBytes[s[i]] {
			continue
		}
		switch s[i] {
		case '_':
			if i >= 3 {
				switch s[i-3 : i] {
				case "isk", "ics", "ids", "mer", "cus", "cli", "key":
					return true
				}
			}
		case 'J':
			if i >= 2 && s[i-2] == 'e' && s[i-1] == 'y' {
				return true
			}
		case 'b', 'B':
			if len(s)-i > len("bearer") && strings.EqualFold(s[i:i+len("bearer")], "bearer") {
				return true
			}
		}
	}
	return false
}

// credentialBytes marks the bytes at which mayContainCredential looks closer.
var credentialBytes = [256]bool{'_': true, 'J': true, 'b': true, 'B': true}

// sensitiveKeys name the attributes whose whole value is fingerprinted,
// normalized by normalizeKey. A key matches when its normalized form ends
// with one of them ("X-Api-Key", "sessionToken", "deviceSerial"), optionally
// followed by a plural "s" ("terminalIds").
var sensitiveKeys = []string{
	"token", "accesstoken", "authorization", "bearer",
	"subscriptionkey", "ocpapimsubscriptionkey", "apikey", "key", "signingkey", "idempotencykey",
	"secret", "clientsecret", "devicesecret", "password",
	"merchantid", "merchant", "customerid", "customer", "clientid",
	"terminalid", "terminal", "serialnumber", "serial", "linkcode",
}

// keySuffixes indexes sensitiveKeys by last byte, leaving out the keys that
// end with another one ("apikey" ends with "key"), so that a key is checked
// against two or three candidates at most.
var keySuffixes, keyTailLen = func() ([256][]string, int) {
	var idx [256][]string
	longest := 0
	for _, k := range sensitiveKeys {
		redundant := false
		for _, other := range sensitiveKeys {
			if other != k && strings.HasSuffix(k, other) {
				redundant = true
				break
			}
		}
		if !redundant {
			idx[k[len(k)-1]] = append(idx[k[len(k)-1]], k)
			longest = max(longest, len(k))
		}
	}
	return idx, longest + len("s")
}()

// keyTailMax bounds keyTailLen so the normalized tail of a key fits on the stack.
const keyTailMax = 32

// isSensitiveKey reports whether an attribute named key, inside the group
// named parent (empty at the top level), holds a value to fingerprint. The
// group name counts, so that "client" > "id" is as sensitive as "clientId".
func isSensitiveKey(parent, key string) bool {
	var buf [keyTailMax]byte
	tail := buf[:keyTailLen]
	n := appendTail(tail, len(tail), key)
	if n > 0 && parent != "" {
		n = appendTail(tail, n, parent)
	}
	t := tail[n:]
	if matchesSuffix(t) {
		return true
	}
	return len(t) > 1 && t[len(t)-1] == 's' && matchesSuffix(t[:len(t)-1])
}

// appendTail writes the normalized end of s (lower-case, without '_', '-' and
// '.') before tail[n:], back to front, and returns the new start of the tail.
func appendTail(tail []byte, n int, s string) int {
	start := n
	for i := len(s) - 1; i >= 0 && n > 0; i-- {
		c := s[i]
		switch {
		case c >= utf8.RuneSelf:
			// Rare: Unicode case mapping can yield ASCII (KELVIN SIGN is 'k').
			return appendLowerTail(tail, start, strings.ToLower(s))
		case c == '_' || c == '-' || c == '.':
			continue
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		n--
		tail[n] = c
	}
	return n
}

// appendLowerTail is appendTail for an s already in lower case.
func appendLowerTail(tail []byte, n int, s string) int {
	for i := len(s) - 1; i >= 0 && n > 0; i-- {
		if c := s[i]; c != '_' && c != '-' && c != '.' {
			n--
			tail[n] = c
		}
	}
	return n
}

func matchesSuffix(t []byte) bool {
	if len(t) == 0 {
		return false
	}
	for _, k := range keySuffixes[t[len(t)-1]] {
		if len(t) >= len(k) && string(t[len(t)-len(k):]) == k {
			return true
		}
	}
	return false
}

// NewRedactingHandler returns a handler that passes records to next with
// every secret and identifier replaced by its [Fingerprint] under key (nil: the
// per-process random key):
//
//   - the whole value of an attribute whose key names a secret or an
//     identifier (token, authorization, subscriptionKey, clientSecret,
//     merchantId, customer, terminalId, serialNumber, linkCode, idempotencyKey
//     and so on, in any case and with any '_', '-' or '.'), and every value
//     inside a group under such a key. Empty values and booleans stay as they are;
//   - within every other string value, error text and formatted value, and
//     within the message: JWTs, "Bearer <credential>", and the project's
//     isk_, ics_, ids_, mer_, cus_, cli_ and key_ words.
//
// slog.LogValuer values are resolved first, so what they log is redacted too.
func NewRedactingHandler(next slog.Handler, key []byte) slog.Handler {
	if len(key) == 0 {
		key = processKey()
	}
	key = append([]byte(nil), key...)
	r := &redactor{}
	r.macs.New = func() any { return hmac.New(sha256.New, key) }
	return &redactingHandler{next: next, r: r}
}

var _ slog.Handler = (*redactingHandler)(nil)

type redactingHandler struct {
	next  slog.Handler
	r     *redactor
	scope scope // the groups opened by WithGroup
}

// scope says where an attribute sits, for deciding whether its key is sensitive.
type scope struct {
	group     string // the innermost group's name, "" at the top level
	sensitive bool   // some enclosing group's key is sensitive
}

// enter returns the scope of the attributes of group name opened in s.
func (s scope) enter(name string) scope {
	if name == "" { // an inline group
		return s
	}
	return scope{group: name, sensitive: s.sensitive || isSensitiveKey(s.group, name)}
}

func (h *redactingHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

func (h *redactingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	redacted := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		redacted[i], _ = h.r.attr(a, h.scope)
	}
	return &redactingHandler{next: h.next.WithAttrs(redacted), r: h.r, scope: h.scope}
}

func (h *redactingHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	return &redactingHandler{next: h.next.WithGroup(name), r: h.r, scope: h.scope.enter(name)}
}

// Handle passes r on untouched when it has nothing to redact, and otherwise a
// copy with the redacted message and attributes.
func (h *redactingHandler) Handle(ctx context.Context, r slog.Record) error {
	msg, msgChanged := h.r.text(r.Message)

	// Find the first attribute that changes, redacting each one once.
	first, i := -1, 0
	var firstAttr slog.Attr
	r.Attrs(func(a slog.Attr) bool {
		if ra, changed := h.r.attr(a, h.scope); changed {
			first, firstAttr = i, ra
			return false
		}
		i++
		return true
	})
	if first < 0 && !msgChanged {
		return h.next.Handle(ctx, r)
	}

	out := slog.NewRecord(r.Time, r.Level, msg, r.PC)
	i = 0
	r.Attrs(func(a slog.Attr) bool {
		switch {
		case first < 0 || i < first:
			out.AddAttrs(a)
		case i == first:
			out.AddAttrs(firstAttr)
		default:
			ra, _ := h.r.attr(a, h.scope)
			out.AddAttrs(ra)
		}
		i++
		return true
	})
	return h.next.Handle(ctx, out)
}

// redactor holds the fingerprint key, as a pool of keyed HMACs.
type redactor struct {
	macs sync.Pool // of hash.Hash
}

func (r *redactor) fingerprint(value string) string {
	mac := r.macs.Get().(hash.Hash)
	mac.Reset()
	mac.Write([]byte(value))
	var sum [sha256.Size]byte
	fp := formatFingerprint(mac.Sum(sum[:0]))
	r.macs.Put(mac)
	return fp
}

// attr returns a redacted in scope s, and whether it differs from a. A
// resolved slog.LogValuer always differs, so that next does not resolve it
// again past the redaction.
func (r *redactor) attr(a slog.Attr, s scope) (slog.Attr, bool) {
	changed := false
	if a.Value.Kind() == slog.KindLogValuer {
		a.Value = a.Value.Resolve()
		changed = true
	}
	if a.Value.Kind() == slog.KindGroup {
		g, gchanged := r.group(a.Value.Group(), s.enter(a.Key))
		if gchanged {
			a.Value = slog.GroupValue(g...)
		}
		return a, changed || gchanged
	}

	var v slog.Value
	var vchanged bool
	if s.sensitive || isSensitiveKey(s.group, a.Key) {
		v, vchanged = r.whole(a.Value)
	} else {
		v, vchanged = r.within(a.Value)
	}
	if vchanged {
		a.Value = v
	}
	return a, changed || vchanged
}

// group redacts the attributes of a group, copying them only on the first change.
func (r *redactor) group(attrs []slog.Attr, s scope) ([]slog.Attr, bool) {
	var out []slog.Attr
	for i, a := range attrs {
		ra, changed := r.attr(a, s)
		if changed && out == nil {
			out = make([]slog.Attr, len(attrs))
			copy(out, attrs[:i])
		}
		if out != nil {
			out[i] = ra
		}
	}
	if out == nil {
		return attrs, false
	}
	return out, true
}

// whole fingerprints the value of a sensitive attribute, formatted as fmt
// would. Empty values stay empty, and booleans, which cannot identify
// anything, stay as they are.
func (r *redactor) whole(v slog.Value) (slog.Value, bool) {
	switch v.Kind() {
	case slog.KindBool:
		return v, false
	case slog.KindAny:
		switch x := v.Any().(type) {
		case nil:
			return v, false
		case []byte: // as the text handler shows it, not as fmt does
			if len(x) == 0 {
				return v, false
			}
			return slog.StringValue(r.fingerprint(string(x))), true
		}
	}
	s := v.String()
	if s == "" {
		return v, false
	}
	return slog.StringValue(r.fingerprint(s)), true
}

// within redacts the credentials found inside a value that is not sensitive
// as a whole.
func (r *redactor) within(v slog.Value) (slog.Value, bool) {
	switch v.Kind() {
	case slog.KindString:
		if s, changed := r.text(v.String()); changed {
			return slog.StringValue(s), true
		}
	case slog.KindAny:
		if s, changed := r.anyValue(v.Any()); changed {
			return slog.StringValue(s), true
		}
	}
	return v, false
}

// anyValue looks for credentials in the ways the text and JSON handlers may
// render x. When one is found, x is replaced by its redacted fmt form.
func (r *redactor) anyValue(x any) (redacted string, changed bool) {
	var text string
	defer func() {
		// A method of x panicked (say a nil pointer's Error). next recovers
		// from the same panic with a placeholder; if the fmt form could be
		// had, log it instead of calling the method again.
		if recover() != nil && text != "" {
			redacted, changed = r.text(text)
			changed = true
		}
	}()
	switch x := x.(type) {
	case nil:
		return "", false
	case error:
		return r.text(x.Error())
	case []byte:
		return r.text(string(x))
	}
	text = fmt.Sprintf("%+v", x)
	if redacted, changed = r.text(text); changed {
		return redacted, true
	}
	// The JSON form may show what the fmt form hides (a String method
	// in front of exported fields, a MarshalJSON).
	if j, err := json.Marshal(x); err == nil && mayContainCredential(string(j)) {
		if _, changed := r.text(string(j)); changed {
			return text, true
		}
	}
	return text, false
}

// text replaces the credentials found in s by their fingerprints.
func (r *redactor) text(s string) (string, bool) {
	if !mayContainCredential(s) {
		return s, false
	}
	out := r.replace(bearerPattern, s)
	if strings.Contains(out, "eyJ") {
		out = r.replace(jwtPattern, out)
	}
	if strings.IndexByte(out, '_') >= 0 {
		out = r.replace(prefixedPattern, out)
	}
	return out, out != s
}

// replace fingerprints every match of re in s, or its first submatch if re has one.
func (r *redactor) replace(re *regexp.Regexp, s string) string {
	matches := re.FindAllStringSubmatchIndex(s, -1)
	if matches == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range matches {
		start, end := m[0], m[1]
		if len(m) >= 4 && m[2] >= 0 {
			start, end = m[2], m[3]
		}
		b.WriteString(s[last:start])
		b.WriteString(r.fingerprint(s[start:end]))
		last = end
	}
	b.WriteString(s[last:])
	return b.String()
}
