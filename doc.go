// Package instore is the domain of the instore payment service: merchants,
// credentials, terminals, transactions and print jobs, the code lists of the
// specification, the error vocabulary and the store interface.
//
// It knows nothing of HTTP, SQL or WebSockets. Adapters live under internal/
// and depend on this package, never the reverse.
package instore
