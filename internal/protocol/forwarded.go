package protocol

// Offline approvals (docs/terminal-protocol.md, "Offline approvals"): a
// terminal whose card network is down may approve a purchase at or below
// its floor limit on its own and keep it in its offline queue; its result
// says so (Result.Offline). When the network returns it forwards the
// queue, in order, and reports each outcome with a forwarded message (Ref:
// the transaction), which it keeps and resends, same message id, after
// every hello until the server confirms it. The server applies it once: a
// resent one changes nothing and is confirmed again; one on a transaction
// it does not know, or that was not approved offline, is confirmed and
// ignored, so that it never blocks the terminal.

import "time"

// Forwarded is the data of a forwarded message: whether the issuer
// declined the offline approval Ref when the terminal forwarded it, and
// when it did.
type Forwarded struct {
	// Declined is required: true when the issuer declined it (the
	// merchant is not paid), false when it accepted it.
	Declined *bool `json:"declined"`
	// ForwardedAt is when the terminal forwarded it (RFC 3339), required.
	ForwardedAt time.Time `json:"forwardedAt"`
}

// Validate checks a forwarded report.
func (f *Forwarded) Validate() error {
	switch {
	case f.Declined == nil:
		return errorf("data.declined", "required: true when the issuer declined the approval, false when it accepted it")
	case f.ForwardedAt.IsZero():
		return errorf("data.forwardedAt", "required: when the terminal forwarded the approval (RFC 3339)")
	case f.ForwardedAt.Year() < 2000 || f.ForwardedAt.Year() > 9999:
		return errorf("data.forwardedAt", "must be a time from the year 2000 to 9999")
	}
	return nil
}
