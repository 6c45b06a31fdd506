// Package service is the application of the instore payment service: the
// Service, one per node, runs the Online API's and the Access API's
// operations and handles what terminals report, on the contract of the
// root package (package instore: resources, errors, rules, the Store and
// Gateway it is given). Rules, validation order, error codes and state
// changes are decided here or in the root, once; the adapters (HTTP, the
// terminal gateway, SQL, the cluster) only translate.
//
// Beside the operations it holds the node's runtime: the waits on a
// transaction's change (watch.go), the event sequencer (events.go), the
// streams' shared feed (feed.go), the timers of pending transactions
// (timers.go) and the sweeps (owed.go, update.go). Every time it reads or
// waits for is on its one Clock. It imports no adapter
// (imports_test.go in the root keeps it so).
package service
