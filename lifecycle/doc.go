// Package lifecycle holds the lives of the resources, each as a pure
// function of (state, event): transactions (transaction.go: Create, Next,
// NextPair, Pairs, Due), print jobs (print.go: NextPrint,
// PrintDue), software updates (update.go: NextUpdate, UpdateBusy),
// webhook deliveries (webhook.go: NextDelivery, RetryWait,
// DisabledReason) and the merchant's changes of a webhook endpoint
// (webhook.go: NextWebhook). They do no I/O and read no clock: the
// caller (internal/service, internal/webhook, internal/sqlstore) reads the
// state, calls the function, writes what it returns and carries out the
// effects. Each has a table test over every (state, event) pair.
// docs/lifecycle.md has a table per lifecycle.
//
// It imports the root package (the contract) and the standard library
// only (imports_test.go in the root keeps it so).
package lifecycle
