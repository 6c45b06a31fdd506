package strictjson

import (
	"errors"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

type sample struct {
	ID     string `json:"id"`
	Amount int64  `json:"amount"`
	Lines  []string
	Extra  map[string]int `json:"extra"`
}

func TestUnmarshal(t *testing.T) {
	const (
		ok = iota
		syntactic
		duplicate
		semantic
		unknown
		trailing
	)
	tests := []struct {
		name string
		in   string
		want int
	}{
		{"object", `{"id":"a","amount":1,"Lines":["x"]}`, ok},
		{"white space around", " \n{\"id\":\"a\"}\t ", ok},
		{"null members are absent", `{"id":null,"amount":null}`, ok},
		{"escaped NUL in a value", `{"id":"a\u0000b"}`, ok},
		{"name in another case", `{"ID":"a"}`, unknown},
		{"unknown name", `{"id":"a","x":1}`, unknown},
		{"duplicate name", `{"amount":100,"amount":99999}`, duplicate},
		{"duplicate name in a nested object", `{"Lines":[],"extra":{"a":1,"a":2}}`, duplicate},
		{"raw invalid UTF-8", "{\"id\":\"\xff\"}", syntactic},
		{"overlong encoding", "{\"id\":\"\xc0\x80\"}", syntactic},
		{"escaped lone surrogate", `{"id":"\ud800"}`, syntactic},
		{"raw control character", "{\"id\":\"a\tb\"}", syntactic},
		{"fraction for an integer", `{"amount":1.5}`, semantic},
		{"exponent for an integer", `{"amount":1e2}`, semantic},
		{"out of range", `{"amount":1e30}`, semantic},
		{"string for an integer", `{"amount":"1"}`, semantic},
		{"not an object", `[1]`, semantic},
		{"truncated", `{"id":"a"`, syntactic},
		{"two values", `{} {}`, trailing},
		{"garbage after the value", `{}x`, trailing},
		{"empty", ``, syntactic},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var dst sample
			err := Unmarshal([]byte(tt.in), &dst)
			var (
				syn *jsontext.SyntacticError
				sem *json.SemanticError
			)
			got := -1
			switch {
			case err == nil:
				got = ok
			case errors.Is(err, ErrTrailingData):
				got = trailing
			case errors.Is(err, jsontext.ErrDuplicateName):
				got = duplicate
			case errors.As(err, &syn):
				got = syntactic
			case errors.Is(err, json.ErrUnknownName):
				got = unknown
			case errors.As(err, &sem):
				got = semantic
			}
			if got != tt.want {
				t.Errorf("Unmarshal(%q) = %v (kind %d), want kind %d", tt.in, err, got, tt.want)
			}
			if v := Valid([]byte(tt.in)); v != (tt.want != syntactic && tt.want != duplicate && tt.want != trailing) {
				t.Errorf("Valid(%q) = %v", tt.in, v)
			}
		})
	}
}
