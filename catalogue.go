package instore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Package is a software package of the catalogue: one release of the
// software of a device model. Packages are immutable once imported: a
// terminal may have installed one, so its version and digest never change.
type Package struct {
	ID string `json:"packageId"`
	// CustomerID restricts the package to one customer; empty: every
	// customer sees it.
	CustomerID string `json:"customerId,omitempty"`
	Model      string `json:"model"`
	Name       string `json:"name"`
	Version    string `json:"version"`
	// Mandatory: the newest mandatory package of a model sets the minimum
	// software version of that model's terminals; a terminal below it
	// answers purchases with TERMINAL_MUST_UPDATE (10) until it is updated.
	Mandatory  bool      `json:"mandatory"`
	SizeBytes  int64     `json:"sizeBytes"`
	SHA256     string    `json:"sha256"`
	ReleasedAt time.Time `json:"releasedAt"`
}

// Wire renders p as the Access API shows it (api/access-api.yaml, schema
// Package): the catalogue's own form without the customer the package is
// restricted to (CustomerID is omitted when empty).
func (p *Package) Wire() *Package {
	w := *p
	w.CustomerID = ""
	return &w
}

// Limits of the package catalogue.
const (
	MaxPackages       = 10000
	MaxPackageSize    = 1 << 40 // bytes
	maxPackageNameLen = 200
)

var (
	packageIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
	// versionPattern: one to four dot-separated numbers, such as 1.4.2.
	versionPattern = regexp.MustCompile(`^[0-9]{1,9}(\.[0-9]{1,9}){0,3}$`)
	sha256Pattern  = regexp.MustCompile(`^[0-9a-f]{64}$`)
	accountPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	serialPattern  = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
)

// ValidSerialNumber reports whether s has the shape of a device's serial
// number: 1-64 of A-Z a-z 0-9 . _ -.
func ValidSerialNumber(s string) bool { return serialPattern.MatchString(s) }

// ValidPackageID reports whether s has the shape of a packageId.
func ValidPackageID(s string) bool { return packageIDPattern.MatchString(s) }

// ValidVersion reports whether s is a version a package may have: one to
// four dot-separated numbers.
func ValidVersion(s string) bool { return versionPattern.MatchString(s) }

// CompareVersions compares two software versions part by part ("1.10" is
// above "1.9"): numerically where both parts are numbers, as text
// otherwise; a missing part counts as 0. It returns -1, 0 or +1. Devices
// report any text as their version; an empty one is below every other.
func CompareVersions(a, b string) int {
	if a == b {
		return 0
	}
	if a == "" || b == "" {
		if a == "" {
			return -1
		}
		return 1
	}
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := range max(len(pa), len(pb)) {
		x, y := "0", "0"
		if i < len(pa) {
			x = pa[i]
		}
		if i < len(pb) {
			y = pb[i]
		}
		nx, ex := strconv.ParseUint(x, 10, 64)
		ny, ey := strconv.ParseUint(y, 10, 64)
		var c int
		if ex == nil && ey == nil {
			c = cmpUint(nx, ny)
		} else {
			c = strings.Compare(x, y)
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Catalogue is the file `instore admin packages import` loads: a list of
// packages (docs/access-api.md describes it).
type Catalogue struct {
	Packages []*Package `json:"packages"`
}

// ParseCatalogue reads a package catalogue strictly (one JSON object, no
// unknown fields) and checks every package; the error lists every problem
// found, each named by its JSON pointer (/packages/3/version).
func ParseCatalogue(r io.Reader) ([]*Package, error) {
	b, err := io.ReadAll(io.LimitReader(r, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("read catalogue: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var c Catalogue
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("catalogue is not valid: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("catalogue is not valid: more than one JSON value")
	}
	var f FieldErrors
	switch {
	case c.Packages == nil:
		f.Add("/packages", "is required")
	case len(c.Packages) > MaxPackages:
		f.Add("/packages", "holds more than %d packages", MaxPackages)
	}
	seen := map[string]bool{}
	for i, p := range c.Packages {
		at := fmt.Sprintf("/packages/%d", i)
		if p == nil {
			f.Add(at, "must be an object")
			continue
		}
		p.check(&f, at)
		if seen[p.ID] {
			f.Add(at+"/packageId", "is given twice")
		}
		seen[p.ID] = true
		p.ReleasedAt = p.ReleasedAt.UTC().Truncate(time.Microsecond)
	}
	if err := f.Err(); err != nil {
		var e *Error
		errors.As(err, &e)
		msgs := make([]string, len(e.Fields))
		for i, fe := range e.Fields {
			msgs[i] = fe.Field + ": " + fe.Message
		}
		return nil, &Error{Code: EValidation, Detail: "The catalogue is not valid: " + strings.Join(msgs, "; "), Fields: e.Fields}
	}
	return c.Packages, nil
}

// check adds the problems of one package to f.
func (p *Package) check(f *FieldErrors, at string) {
	if !ValidPackageID(p.ID) {
		f.Add(at+"/packageId", "must be 1-64 of A-Z a-z 0-9 . _ -")
	}
	if p.CustomerID != "" && !accountPattern.MatchString(p.CustomerID) {
		f.Add(at+"/customerId", "is not a customer id")
	}
	if !ValidModel(p.Model) {
		f.Add(at+"/model", "must be one of %s", strings.Join(Models, ", "))
	}
	if strings.TrimSpace(p.Name) == "" || utf8.RuneCountInString(p.Name) > maxPackageNameLen || !utf8.ValidString(p.Name) {
		f.Add(at+"/name", "must be 1-%d characters", maxPackageNameLen)
	}
	if !ValidVersion(p.Version) {
		f.Add(at+"/version", "must be one to four dot-separated numbers, such as 1.4.2")
	}
	if p.SizeBytes < 1 || p.SizeBytes > MaxPackageSize {
		f.Add(at+"/sizeBytes", "must be 1 to %d", int64(MaxPackageSize))
	}
	if !sha256Pattern.MatchString(p.SHA256) {
		f.Add(at+"/sha256", "must be 64 lower-case hex digits")
	}
	if p.ReleasedAt.IsZero() {
		f.Add(at+"/releasedAt", "is required (RFC 3339)")
	}
}

// SamePackage reports whether two packages are the same release, so that
// importing a catalogue again changes nothing.
func SamePackage(a, b *Package) bool {
	return a.ID == b.ID && a.CustomerID == b.CustomerID && a.Model == b.Model && a.Name == b.Name &&
		a.Version == b.Version && a.Mandatory == b.Mandatory && a.SizeBytes == b.SizeBytes &&
		a.SHA256 == b.SHA256 && a.ReleasedAt.Equal(b.ReleasedAt)
}

// MinVersion returns the version set by the newest mandatory package of
// ps, which are one model's packages newest first ("" when none is
// mandatory).
func MinVersion(ps []*Package) string {
	for _, p := range ps {
		if p.Mandatory {
			return p.Version
		}
	}
	return ""
}
