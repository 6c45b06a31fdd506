package keysetting_test

import (
	"context"
	"encoding/base64"
	"errors"
	"testing"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/internal/keysetting"
)

// settings is a store of settings in memory.
type settings struct {
	m   map[string]string
	err error
}

func (s *settings) Setting(_ context.Context, name string) (string, error) {
	if s.err != nil {
		return "", s.err
	}
	v, ok := s.m[name]
	if !ok {
		return "", instore.ErrNotFound
	}
	return v, nil
}

func (s *settings) InitSetting(_ context.Context, name, value string) (string, error) {
	if s.err != nil {
		return "", s.err
	}
	if v, ok := s.m[name]; ok {
		return v, nil
	}
	s.m[name] = value
	return value, nil
}

// TestKey: Init and Load store one key and then return it; Load draws a
// key only when the setting is absent; a short or damaged value and the
// store's errors are reported as the Key says.
func TestKey(t *testing.T) {
	ctx := context.Background()
	draws := 0
	k := keysetting.Key{Setting: "k", Name: "test key", MinBytes: 32, Invalid: "test key is invalid",
		Random: func(b []byte) error {
			draws++
			for i := range b {
				b[i] = byte(draws)
			}
			return nil
		}}
	st := &settings{m: map[string]string{}}
	first, err := k.Load(ctx, st)
	if err != nil || len(first) != 32 || first[0] != 1 || draws != 1 {
		t.Fatalf("Load = %x, %v after %d draws", first, err, draws)
	}
	if again, err := k.Load(ctx, st); err != nil || string(again) != string(first) || draws != 1 {
		t.Errorf("Load again = %x, %v after %d draws, want the same key and no draw", again, err, draws)
	}
	if again, err := k.Init(ctx, st); err != nil || string(again) != string(first) || draws != 2 {
		t.Errorf("Init = %x, %v after %d draws, want the stored key", again, err, draws)
	}

	st.m["k"] = base64.StdEncoding.EncodeToString(make([]byte, 16))
	if _, err := k.Load(ctx, st); err == nil || err.Error() != "test key is invalid" {
		t.Errorf("Load of a short key: %v", err)
	}
	st.m["k"] = "%%%"
	if _, err := k.Init(ctx, st); err == nil || err.Error() != "test key is invalid" {
		t.Errorf("Init of a damaged key: %v", err)
	}

	down := errors.New("down")
	st.err = down
	for name, load := range map[string]func(context.Context, keysetting.Reader) ([]byte, error){
		"Load": k.Load, "Init": func(ctx context.Context, st keysetting.Reader) ([]byte, error) { return k.Init(ctx, st) },
	} {
		if _, err := load(ctx, st); !errors.Is(err, down) || err.Error() != "test key: down" {
			t.Errorf("%s with the store down: %v", name, err)
		}
	}
	bad := errors.New("no randomness")
	k.Random = func([]byte) error { return bad }
	if _, err := k.Init(ctx, &settings{m: map[string]string{}}); err != bad {
		t.Errorf("Init without randomness: %v, want it as it is", err)
	}
}
