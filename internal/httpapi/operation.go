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
	return Decoded(op, JSONAnswer[Out](status))
}

// JSONAnswer answers status with the operation's result as JSON.
func JSONAnswer[Out any](status int) func(http.ResponseWriter, Out) error {
	return func(w http.ResponseWriter, out Out) error { return WriteJSON(w, status, out) }
}

// ListAnswer answers 200 with the operation's result as the one member of
// an object: {"<member>": [...]}.
func ListAnswer[T any](member string) func(http.ResponseWriter, []T) error {
	return func(w http.ResponseWriter, vs []T) error {
		return WriteJSON(w, http.StatusOK, map[string]any{member: vs})
	}
}

// Named is the whole of a handler whose operation acts on the resource
// the path value param names (GET /webhooks/{webhookId}) and takes no
// body: it calls op with the principal and that value, and answers with
// answer(w, op's result). An error of op is returned as it is.
func Named[Out any](param string, op func(context.Context, *instore.Principal, string) (Out, error), answer func(http.ResponseWriter, Out) error) AuthedFunc {
	return func(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
		out, err := op(r.Context(), p, r.PathValue(param))
		if err != nil {
			return err
		}
		return answer(w, out)
	}
}

// Listed is the whole of a handler whose operation lists the principal's
// resources: it answers 200 with them as ListAnswer(member) does.
func Listed[T any](member string, op func(context.Context, *instore.Principal) ([]T, error)) AuthedFunc {
	return func(w http.ResponseWriter, r *http.Request, p *instore.Principal) error {
		vs, err := op(r.Context(), p)
		if err != nil {
			return err
		}
		return ListAnswer[T](member)(w, vs)
	}
}
