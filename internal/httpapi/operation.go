package httpapi

import (
	"context"
	"net/http"

	"github.com/instore-dev/instore"
)

// Decoded is the whole of a handler whose operation takes a JSON body:
// it decodes the body strictly (DecodeJSON) into a new Req, calls op with
// it and the principal, and answers with answer(w, op's result). An error
// of the decoding or of op is returned as it is (its problem).
func Decoded[Req, Out any](op func(context.Context, *instore.Principal, *Req) (Out, error), answer func(http.ResponseWriter, Out) error) AuthedFunc {
	return func(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
		var req Req
		if err := DecodeJSON(r, &req); err != nil {
			return err
		}
		out, err := op(r.Context(), p, &req)
		if err != nil {
			return err
		}
		return answer(w, out)
	}
}

// DecodedClaimed is Decoded for an operation that also takes the
// request's idempotency claim (Claim: nil without an Idempotency-Key).
func DecodedClaimed[Req, Out any](op func(context.Context, *instore.Principal, *Req, *instore.IdempotencyClaim) (Out, error), answer func(http.ResponseWriter, Out) error) AuthedFunc {
	return func(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
		claim := Claim(r)
		return Decoded(func(ctx context.Context, p *instore.Principal, req *Req) (Out, error) {
			return op(ctx, p, req, claim)
		}, answer)(w, r, p)
	}
}

// DecodedJSON is Decoded answering status with op's result as JSON.
func DecodedJSON[Req, Out any](status int, op func(context.Context, *instore.Principal, *Req) (Out, error)) AuthedFunc {
	return Decoded(op, func(w http.ResponseWriter, out Out) error { return WriteJSON(w, status, out) })
}
