// Package client is the Go SDK of the instore payment service: the Online
// API (/in-store/api/v1, for ECRs and back offices), Access API 2.0
// (terminal IDs and terminal software, on its own base URL) and the sandbox
// control API of a demo or sandbox server.
//
// Every method takes a context first and returns typed values or an error.
// An error the service answered is an *Error carrying the HTTP status, the
// problem type, the service error code (WP01...) and its id, the detail, the
// field errors and the request id:
//
//	tx, err := c.Purchase(ctx, client.PurchaseParams{TerminalID: id, Amount: 1250, Currency: "SEK"})
//	var e *client.Error
//	if errors.As(err, &e) && e.ErrorCode == instore.WP09 {
//		// the terminal is busy with e.OnlineAPIRefID
//	}
//
// # Call options and response metadata
//
// Every method takes CallOptions after its parameters. IdempotencyKey sends
// the caller's own Idempotency-Key on that one call; SaveResponse returns
// the answer's metadata, on success too: the status, the request id
// (X-Request-Id, to quote in support requests), whether the answer is a
// replay of an earlier request with the same key (Idempotent-Replayed), the
// key sent and the number of attempts:
//
//	var r client.Response
//	tx, err := c.Purchase(ctx, p, client.IdempotencyKey(sale.Key), client.SaveResponse(&r))
//	if err == nil && r.Replayed {
//		// the purchase sale.Key started before; nothing new was started
//	}
//
// Every request names the SDK in its User-Agent, "instore-go/<Version>",
// after the program's own name when Config.UserAgent gives one.
//
// # Safe retries
//
// Every POST carries an Idempotency-Key: the caller's (IdempotencyKey) or a
// random key per call, reused unchanged on every retry of that call, so a
// retried purchase never charges twice. The client retries only
// what is safe to retry: network errors, 429 (after Retry-After) and 5xx
// answers that carry no service error code, with exponential backoff and
// jitter. A 504 WP25 is a final answer (the transaction ended
// TECHNICAL_ERROR) and is not retried; neither is any 4xx.
//
// # Credentials
//
// Each surface takes a subscription key and either a static bearer token or
// OAuth 2.0 client credentials, with which the client obtains tokens from
// the surface's POST /oauth2/token, caches them and fetches a new one before
// the old one expires (and once more on a 401). FromEnv reads them from the
// environment (see the Env constants). Credentials are never logged: the
// optional Logger sees method, path template, status, duration, attempt and
// request id, never a header, body, terminal ID or token; Credentials format
// themselves as "set"/"unset".
package client
