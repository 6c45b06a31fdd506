// Package crashtest holds the crash test of the whole service (its tests
// only): it builds the instore binary, provisions it with `instore admin`,
// runs `instore serve` (SQLite, and PostgreSQL when
// INSTORE_TEST_DATABASE_URL is set) with virtual terminals in processes of
// their own (`instore terminal`), drives concurrent purchases with
// Idempotency-Key and retries as an ECR does, kills the server with
// SIGKILL at random moments and restarts it on the same data, and checks
// after each restart that nothing acknowledged was lost, that no key has
// two transactions, that no transaction stays PENDING past its deadline
// and that every terminal still takes a payment, none having answered a
// sale TERMINAL_IS_BUSY while the service counted it idle (busy with a sale
// the service had ended). Chosen kills follow: between
// a terminal's ack and the 201, and during ECR confirmation windows (a sale
// left unconfirmed across the kill is still reversed on its terminal after
// the restart, a confirmed one is not). Throughout, a back office follows the
// event stream (GET /events, server-sent events) from the first event,
// resuming with Last-Event-ID after each kill: at the end it must have been
// given exactly the events the JSON pages list, in order, once each.
//
// TestCrashCaptures, TestCrashPreAuthExpiry and TestCrashPreAuthLapse do
// the same for pre-authorisation: kills during increments, captures
// (racing voids and second captures) and refunds, around expiries, the
// service's VOID of one cut by a kill, and around the lapses of pre-auths
// whose terminal ID was linked to another device; their checks are in preauth_test.go, their grace in
// docs/testing.md ("The crash tests"). TestCrashForwards kills it while
// virtual terminals (run in the test's process, so that their offline
// queues outlive the server) sell offline and forward their offline
// approvals, the raw terminal's forward cut by a kill right after its
// `forwarded` message went out: each offline approval must end stored once
// as its terminal reported it (forward_check_test.go). TestCrashClose kills
// it while the ECR closes the virtual terminals' batches, and between the raw
// terminal's close and its answer, and its batch and the confirm: every
// batch a terminal closed must end stored once, CLOSED as the terminal
// listed it, compared as CompareBatch compares, in windows that follow each
// other (close_check_test.go). TestPatroniFailover runs the service on a
// PostgreSQL pair under Patroni and kills the primary's node during
// purchases: the synchronous standby is promoted and the same checks hold
// (patroni_test.go; INSTORE_PATRONI_ASYNC=1 is its control without
// synchronous replication, which must fail).
//
//	go test -run '^TestCrash$' -v ./internal/crashtest/                        # 3 rounds, about a minute
//	go test -run '^TestCrash(Captures|PreAuthExpiry|PreAuthLapse)$' -v ./internal/crashtest/  # pre-auths, under a minute each
//	go test -run '^TestCrashForwards$' -v ./internal/crashtest/                  # offline approvals, about 10 s a store
//	go test -run '^TestCrashClose$' -v ./internal/crashtest/                     # day closes, about 15 s a store
//	go test -run '^TestPatroniFailover$' -v ./internal/crashtest/                # database failover, about 80 s (two paths)
//	INSTORE_CRASH_SOAK=1 go test -run TestCrash -v -timeout 2h ./internal/crashtest/   # 40 rounds, longer runs
//
// INSTORE_CRASH_ROUNDS sets the number of rounds, INSTORE_CRASH_SEED the
// seed of the kill moments (logged at start; the processes' own timing is
// not reproduced). Every process it starts listens on or connects to
// loopback only, and only those processes are ever killed.
package crashtest
