package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/instore-dev/instore"
)

var settingTests = []test{
	{"Unset", func(t *testing.T, s instore.Store) {
		checkMissing(t, `Setting("signing_key")`, s.Setting, "signing_key", "")
	}},
	{"FirstWriterWins", func(t *testing.T, s instore.Store) {
		for _, tc := range []struct {
			name, value, want string
		}{
			{"signing_key", "first", "first"},
			{"signing_key", "second", "first"},
			{"other", "", ""},
			{"other", "x", ""},
		} {
			got, err := s.InitSetting(t.Context(), tc.name, tc.value)
			if err != nil {
				t.Fatalf("InitSetting(%q, %q) = %v", tc.name, tc.value, err)
			}
			if got != tc.want {
				t.Errorf("InitSetting(%q, %q) = %q, want %q", tc.name, tc.value, got, tc.want)
			}
			got, err = s.Setting(t.Context(), tc.name)
			if err != nil {
				t.Fatalf("Setting(%q) = %v", tc.name, err)
			}
			if got != tc.want {
				t.Errorf("Setting(%q) = %q, want %q", tc.name, got, tc.want)
			}
		}
	}},
	{"Put", func(t *testing.T, s instore.Store) {
		for _, tc := range []struct{ op, value, want string }{
			{"put", "first", "first"},
			{"put", "second", "second"},
			{"init", "third", "second"},
			{"put", "", ""},
		} {
			var err error
			if tc.op == "put" {
				err = s.PutSetting(t.Context(), "demo", tc.value)
			} else {
				_, err = s.InitSetting(t.Context(), "demo", tc.value)
			}
			if err != nil {
				t.Fatalf("%s %q: %v", tc.op, tc.value, err)
			}
			got, err := s.Setting(t.Context(), "demo")
			if err != nil || got != tc.want {
				t.Errorf("after %s %q Setting() = %q, %v; want %q", tc.op, tc.value, got, err, tc.want)
			}
		}
	}},
	{"Concurrent", func(t *testing.T, s instore.Store) {
		const n = 16
		var got [n]string
		errs := atOnce(n, func(i int) (err error) {
			got[i], err = s.InitSetting(t.Context(), "signing_key", fmt.Sprintf("value-%d", i))
			return err
		})
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("concurrent InitSetting: %v", err)
		}
		stored, err := s.Setting(t.Context(), "signing_key")
		if err != nil {
			t.Fatalf("Setting() = %v", err)
		}
		if !slices.Contains(got[:], stored) {
			t.Errorf("Setting() = %q, want one of the values written", stored)
		}
		for i, v := range got {
			if v != stored {
				t.Errorf("InitSetting(value-%d) = %q, want the stored value %q: writers disagree", i, v, stored)
			}
		}
	}},
}
