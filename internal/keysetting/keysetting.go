// Package keysetting keeps a random key in a store setting: the first node
// that needs it generates it and stores it, every node then reads the same
// one (the token signing key, the log fingerprint key, the listing cursor
// key).
package keysetting

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/instore-dev/instore"
)

// Store is the part of the store that keeps the key (instore.Store has it).
type Store interface {
	// InitSetting stores value under name unless a value is already
	// there, and returns the value that is.
	InitSetting(ctx context.Context, name, value string) (string, error)
}

// Reader is a Store that reads a setting too (instore.Store is one).
type Reader interface {
	Store
	// Setting returns the value of name, instore.ErrNotFound if none.
	Setting(ctx context.Context, name string) (string, error)
}

// Key describes one key kept in a setting.
type Key struct {
	// Setting is the name of the store setting that keeps it.
	Setting string
	// Name prefixes the errors of the store ("token signing key: ...").
	Name string
	// MinBytes is the shortest key the setting may hold.
	MinBytes int
	// Invalid is the error when the setting holds no key of MinBytes.
	Invalid string
	// Random fills a new key (32 bytes).
	Random func(b []byte) error
}

// Init stores a new key under k.Setting unless one is already there, and
// returns the key that is: it draws a new key at every call.
func (k Key) Init(ctx context.Context, st Store) ([]byte, error) {
	var b [32]byte
	if err := k.Random(b[:]); err != nil {
		return nil, err
	}
	v, err := st.InitSetting(ctx, k.Setting, base64.StdEncoding.EncodeToString(b[:]))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k.Name, err)
	}
	return k.decode(v)
}

// Load reads the key under k.Setting, and draws and stores a new one only
// if there is none.
func (k Key) Load(ctx context.Context, st Reader) ([]byte, error) {
	v, err := st.Setting(ctx, k.Setting)
	if errors.Is(err, instore.ErrNotFound) {
		return k.Init(ctx, st)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k.Name, err)
	}
	return k.decode(v)
}

// decode returns the key of the setting's value v.
func (k Key) decode(v string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(v)
	if err != nil || len(key) < k.MinBytes {
		return nil, errors.New(k.Invalid)
	}
	return key, nil
}

// CryptoRandom fills b from crypto/rand (a Key's Random outside the
// deterministic simulation).
func CryptoRandom(b []byte) error {
	_, err := rand.Read(b)
	return err
}
