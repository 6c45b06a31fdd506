// Package instore is the contract of the instore payment service: the
// resources (merchants, credentials, terminals, transactions, print jobs,
// software updates, webhooks) and their wire forms, the error vocabulary
// and problem codes, the code lists of the specification, the money rules
// (payback.go), and the interfaces the application runs on (the Store, the Gateway, the Clock).
//
// It does no I/O and starts no goroutine, and imports nothing outside the
// standard library (imports_test.go keeps it so). The pure lifecycles
// (transactions, print jobs, software updates, webhook deliveries) are in
// package lifecycle, on this package alone. The application, the
// Service that runs every operation on it, is internal/service; the
// adapters (HTTP, the terminal gateway, SQL) live under internal/ and
// depend on this package, never the reverse.
package instore
