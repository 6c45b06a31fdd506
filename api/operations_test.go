package api_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// operations is every operation of the document: method, path and
// operationId, as the route tables of internal/onlineapi register them.
var operations = []struct{ method, path, id string }{
	{"POST", "/oauth2/token", "createToken"},
	{"GET", "/in-store/api/v1/metadata", "getMetadata"},
	{"GET", "/in-store/api/v1/openapi.yaml", "getOpenAPIDocument"},
	{"POST", "/in-store/api/v1/terminal/link", "linkTerminal"},
	{"POST", "/in-store/api/v1/terminal/unlink", "unlinkTerminal"},
	{"GET", "/in-store/api/v1/terminals", "listTerminals"},
	{"GET", "/in-store/api/v1/terminal/{terminalId}", "getTerminal"},
	{"POST", "/in-store/api/v1/purchase", "createPurchase"},
	{"GET", "/in-store/api/v1/transaction/{onlineAPIRefId}", "getTransaction"},
	{"GET", "/in-store/api/v1/transaction/{onlineAPIRefId}/events", "getTransactionEvents"},
	{"POST", "/in-store/api/v1/transaction/{onlineAPIRefId}/confirm", "confirmTransaction"},
	{"POST", "/in-store/api/v1/cancel", "cancelTransaction"},
	{"POST", "/in-store/api/v1/refund", "createRefund"},
	{"POST", "/in-store/api/v1/reversal", "createReversal"},
	{"POST", "/in-store/api/v1/preauthorization", "createPreAuthorization"},
	{"POST", "/in-store/api/v1/increment", "createIncrement"},
	{"POST", "/in-store/api/v1/capture", "createCapture"},
	{"POST", "/in-store/api/v1/void", "createVoid"},
	{"GET", "/in-store/api/v1/transactions", "listTransactions"},
	{"POST", "/in-store/api/v1/print", "printOnTerminal"},
	{"GET", "/in-store/api/v1/print/{printId}", "getPrintJob"},
	{"GET", "/in-store/api/v1/events", "listEvents"},
	{"GET", "/in-store/api/v1/events/stream", "streamEvents"},
	{"POST", "/in-store/api/v1/webhooks", "createWebhook"},
	{"GET", "/in-store/api/v1/webhooks", "listWebhooks"},
	{"GET", "/in-store/api/v1/webhooks/{webhookId}", "getWebhook"},
	{"PATCH", "/in-store/api/v1/webhooks/{webhookId}", "updateWebhook"},
	{"DELETE", "/in-store/api/v1/webhooks/{webhookId}", "deleteWebhook"},
	{"POST", "/in-store/api/v1/webhooks/{webhookId}/rotate-secret", "rotateWebhookSecret"},
	{"GET", "/in-store/api/v1/webhooks/{webhookId}/deliveries", "listWebhookDeliveries"},
	{"POST", "/in-store/api/v1/webhooks/{webhookId}/deliveries/{deliveryId}/retry", "retryWebhookDelivery"},
	{"GET", "/sandbox/v1/devices", "listSandboxDevices"},
	{"POST", "/sandbox/v1/terminals/{terminalId}/next-outcome", "setNextOutcome"},
	{"POST", "/sandbox/v1/terminals/{terminalId}/offline", "setTerminalOffline"},
	{"POST", "/sandbox/v1/terminals/{terminalId}/online", "setTerminalOnline"},
	{"POST", "/sandbox/v1/terminals/{terminalId}/printer", "setNextPrintOutcome"},
	{"POST", "/sandbox/v1/terminals/{terminalId}/next-install", "setNextInstallOutcome"},
	{"POST", "/sandbox/v1/terminals/{terminalId}/next-tip", "setNextTip"},
	{"POST", "/sandbox/v1/terminals/{terminalId}/card-network", "setCardNetwork"},
	{"POST", "/sandbox/v1/terminals/{terminalId}/next-forward", "setNextForward"},
}

// TestOperations checks that the document has exactly the operations of the
// table, each with its operationId, a summary and a description.
func TestOperations(t *testing.T) {
	doc := loadOnline(t)
	want := map[string]string{}
	for _, o := range operations {
		want[o.method+" "+o.path] = o.id
	}
	got := map[string]string{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			got[method+" "+path] = op.OperationID
			if op.Summary == "" || op.Description == "" {
				t.Errorf("%s %s lacks a summary or a description", method, path)
			}
			for _, p := range op.Parameters {
				if p.Value != nil && p.Value.Description == "" {
					t.Errorf("%s %s: parameter %s has no description", method, path, p.Value.Name)
				}
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("operations (-want +got):\n%s", diff)
	}
}

// TestStatuses checks the statuses each operation documents: exactly the
// answers its handler and the domain give. Every guarded operation has 400:
// a credential header sent twice.
func TestStatuses(t *testing.T) {
	doc := loadOnline(t)
	want := map[string][]string{
		"createToken":            {"200", "400", "401", "413", "415", "429", "500"},
		"getMetadata":            {"200", "304", "400", "401", "429", "500"},
		"getOpenAPIDocument":     {"200", "400", "401", "429", "500"},
		"linkTerminal":           {"200", "400", "401", "403", "409", "413", "415", "422", "429", "500"},
		"unlinkTerminal":         {"200", "400", "401", "403", "409", "413", "415", "422", "429", "500"},
		"listTerminals":          {"200", "400", "401", "403", "429", "500"},
		"getTerminal":            {"200", "400", "401", "403", "429", "500"},
		"createPurchase":         {"201", "400", "401", "403", "409", "413", "415", "422", "429", "500", "504"},
		"getTransaction":         {"200", "400", "401", "403", "404", "429", "500"},
		"getTransactionEvents":   {"200", "400", "401", "403", "404", "429", "500"},
		"cancelTransaction":      {"202", "400", "401", "403", "409", "413", "415", "422", "429", "500"},
		"confirmTransaction":     {"200", "400", "401", "403", "404", "409", "413", "422", "429", "500"},
		"createRefund":           {"201", "400", "401", "403", "404", "409", "413", "415", "422", "429", "500", "504"},
		"createReversal":         {"201", "400", "401", "403", "404", "409", "413", "415", "422", "429", "500", "504"},
		"createPreAuthorization": {"201", "400", "401", "403", "409", "413", "415", "422", "429", "500", "504"},
		"createIncrement":        {"201", "400", "401", "403", "404", "409", "413", "415", "422", "429", "500", "504"},
		"createCapture":          {"201", "400", "401", "403", "404", "409", "413", "415", "422", "429", "500", "504"},
		"createVoid":             {"201", "400", "401", "403", "404", "409", "413", "415", "422", "429", "500", "504"},
		"listTransactions":       {"200", "400", "401", "403", "429", "500"},
		"printOnTerminal":        {"200", "400", "401", "403", "404", "409", "413", "415", "422", "429", "500"},
		"getPrintJob":            {"200", "400", "401", "403", "404", "429", "500"},
		"listEvents":             {"200", "400", "401", "403", "429", "500"},
		"streamEvents":           {"200", "400", "401", "403", "429", "500"},
		"createWebhook":          {"201", "400", "401", "403", "409", "413", "415", "422", "429", "500"},
		"listWebhooks":           {"200", "400", "401", "403", "429", "500"},
		"getWebhook":             {"200", "400", "401", "403", "404", "429", "500"},
		"updateWebhook":          {"200", "400", "401", "403", "404", "413", "415", "429", "500"},
		"deleteWebhook":          {"204", "400", "401", "403", "404", "429", "500"},
		"rotateWebhookSecret":    {"200", "400", "401", "403", "404", "409", "413", "422", "429", "500"},
		"listWebhookDeliveries":  {"200", "400", "401", "403", "404", "429", "500"},
		"retryWebhookDelivery":   {"202", "400", "401", "403", "404", "409", "413", "422", "429", "500"},
		"listSandboxDevices":     {"200", "400", "401", "403", "404", "429", "500"},
		"setNextOutcome":         {"200", "400", "401", "403", "404", "409", "413", "415", "429", "500"},
		"setTerminalOffline":     {"200", "400", "401", "403", "404", "409", "413", "429", "500"},
		"setTerminalOnline":      {"200", "400", "401", "403", "404", "409", "413", "429", "500"},
		"setNextPrintOutcome":    {"200", "400", "401", "403", "404", "409", "413", "415", "429", "500"},
		"setNextInstallOutcome":  {"200", "400", "401", "403", "404", "409", "413", "415", "429", "500"},
		"setNextTip":             {"200", "400", "401", "403", "404", "409", "413", "415", "429", "500"},
		"setCardNetwork":         {"200", "400", "401", "403", "404", "409", "413", "415", "429", "500"},
		"setNextForward":         {"200", "400", "401", "403", "404", "409", "413", "415", "429", "500"},
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			var got []string
			for code := range op.Responses.Map() {
				got = append(got, code)
			}
			slices.Sort(got)
			if diff := cmp.Diff(want[op.OperationID], got); diff != "" {
				t.Errorf("%s %s (%s) statuses (-want +got):\n%s", method, path, op.OperationID, diff)
			}
		}
	}
}
