package loadtest

import (
	"context"
	"fmt"

	"github.com/instore-dev/instore"
)

// PreAuthScenario measures the life of a pre-authorisation (not in "all"):
// purchase's measurement, with each life a PRE_AUTH, an INCREMENT of it and
// its CAPTURE with a tip, one after the other on the same terminal, each
// followed to its approval; against the same raw-commit baseline.
const PreAuthScenario = "preauth"

// The amounts of a pre-auth life, in minor units: what the pre-auth holds,
// the increment, and the capture's total and its tip (within the default
// capture tolerance of 20 % over the authorised amount).
const (
	preAuthAmount    = 10000
	preAuthIncrement = 2500
	preAuthCapture   = 13000
	preAuthTip       = 500
)

// nominalCommitsPerPreAuthLife is the commits of a pre-auth life as the
// code makes them, used only when the store cannot be read to count them:
// the pre-auth's six (as a purchase's), then four each for the increment
// and the capture (created, acknowledged, one progress stage: the terminal
// completes them without the card; the result, with its pre-auth's change
// in the same commit).
const nominalCommitsPerPreAuthLife = 14

// preAuthLife is one pre-auth life on a terminal: the PRE_AUTH (approved
// with an OPEN authorisation of preAuthAmount), an INCREMENT of
// preAuthIncrement and a CAPTURE of preAuthCapture with preAuthTip, each
// approved (the capture with its total and tip as sent).
func preAuthLife(ctx context.Context, c *ecrCaller, terminalID string, recent *refRing) error {
	pre, err := c.sale(ctx, "/preauthorization", map[string]any{"terminalId": terminalID, "amount": preAuthAmount, "currency": "SEK"}, recent)
	if err != nil {
		return err
	}
	if err := wantApproved(pre, "pre-auth"); err != nil {
		return err
	}
	if a := pre.Authorization; a == nil || a.State != instore.AuthOpen || a.AuthorizedAmount != preAuthAmount {
		return fmt.Errorf("pre-auth %s approved with authorization %+v, want OPEN for %d", pre.Ref, a, preAuthAmount)
	}
	inc, err := c.sale(ctx, "/increment", map[string]any{"onlineAPIRefId": pre.Ref, "amount": preAuthIncrement}, recent)
	if err != nil {
		return err
	}
	if err := wantApproved(inc, "increment"); err != nil {
		return err
	}
	capture, err := c.sale(ctx, "/capture", map[string]any{"onlineAPIRefId": pre.Ref, "amount": preAuthCapture, "tipAmount": preAuthTip}, recent)
	if err != nil {
		return err
	}
	if err := wantApproved(capture, "capture"); err != nil {
		return err
	}
	if capture.TotalAmount != preAuthCapture || capture.TipAmount != preAuthTip {
		return fmt.Errorf("capture %s: totalAmount %d, tipAmount %d; want %d, %d", capture.Ref, capture.TotalAmount, capture.TipAmount, preAuthCapture, preAuthTip)
	}
	return nil
}

// checkPreAuths reads the run's transactions in the store after a preauth
// run: every completed PRE_AUTH must be APPROVED and CAPTURED, authorised
// for preAuthAmount+preAuthIncrement and captured for preAuthCapture, with
// one approved INCREMENT of preAuthIncrement and one approved CAPTURE of
// preAuthCapture-preAuthTip plus preAuthTip. It returns how many pre-auths
// it checked and how many broke a rule.
func (e *env) checkPreAuths(ctx context.Context) (checked, bad int64, err error) {
	db, err := e.storeDB("_query_only=on&_busy_timeout=5000")
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	q := fmt.Sprintf(`SELECT COUNT(*), COALESCE(SUM(CASE WHEN p.status_id = 0 AND p.auth_state = 'CAPTURED'
			AND p.amount = %d AND p.authorized_amount = %d AND p.captured_amount = %d
			AND (SELECT COUNT(*) FROM transactions i WHERE i.original_id = p.id AND i.type = 'INCREMENT'
				AND i.status_id = 0 AND i.amount = %d) = 1
			AND (SELECT COUNT(*) FROM transactions c WHERE c.original_id = p.id AND c.type = 'CAPTURE'
				AND c.status_id = 0 AND c.amount = %d AND c.tip_amount = %d) = 1
			AND (SELECT COUNT(*) FROM transactions o WHERE o.original_id = p.id) = 2
		THEN 0 ELSE 1 END), 0)
		FROM transactions p WHERE p.type = 'PRE_AUTH' AND p.completed_at IS NOT NULL AND p.merchant_id = `+placeholder(e.backend),
		preAuthAmount, preAuthAmount+preAuthIncrement, preAuthCapture, preAuthIncrement, preAuthCapture-preAuthTip, preAuthTip)
	if err := db.QueryRowContext(ctx, q, e.merchantID).Scan(&checked, &bad); err != nil {
		return 0, 0, fmt.Errorf("check the pre-auths: %w", err)
	}
	return checked, bad, nil
}
