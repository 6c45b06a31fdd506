package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"golang.org/x/term"

	"github.com/instore-dev/instore"
	"github.com/instore-dev/instore/client"
)

// stageLabels say what a transaction's progress means to a cashier.
var stageLabels = map[instore.Progress]string{
	instore.ProgressSent:           "sent to the terminal",
	instore.ProgressAcknowledged:   "acknowledged by the terminal",
	instore.ProgressWaitingForCard: "waiting for the card",
	instore.ProgressWaitingForPIN:  "waiting for the PIN",
	instore.ProgressAuthorizing:    "authorizing",
}

func stageLabel(p instore.Progress) string {
	if l, ok := stageLabels[p]; ok {
		return l
	}
	return strings.ToLower(string(p))
}

// isTerminal reports whether w is a terminal (and not a pipe or file).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// writeJSONLine writes v as one line of JSON.
func writeJSONLine(w io.Writer, v any) error {
	var b []byte
	switch x := v.(type) {
	case *client.Transaction:
		b = x.RawJSON()
	case *client.PrintJob:
		b = x.RawJSON()
	}
	if b == nil {
		var err error
		if b, err = json.Marshal(v); err != nil {
			return err
		}
	} else {
		var buf bytes.Buffer
		if json.Compact(&buf, b) == nil {
			b = buf.Bytes()
		}
	}
	_, err := fmt.Fprintf(w, "%s\n", b)
	return err
}

// output shows a transaction as it changes: for scripts one JSON line per
// version (the final one last); for people its stages, as a spinner line
// on a terminal or one line per stage elsewhere, then the final status.
type output struct {
	w                  io.Writer
	json, receipt, tty bool

	mu          sync.Mutex
	lastVersion int64
	lastStage   instore.Progress
	headed      bool
	label       string
	stop, done  chan struct{}
}

func newOutput(w io.Writer, asJSON, receipt bool) *output {
	return &output{w: w, json: asJSON, receipt: receipt, tty: !asJSON && isTerminal(w), lastVersion: -1}
}

// show prints a transaction once.
func (o *output) show(tx *client.Transaction) {
	if o.json {
		writeJSONLine(o.w, tx)
		return
	}
	io.WriteString(o.w, txBlock(tx, o.receipt))
}

// progress takes every version of a transaction being followed.
func (o *output) progress(tx *client.Transaction) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if tx.Version == o.lastVersion {
		return
	}
	o.lastVersion = tx.Version
	if o.json {
		writeJSONLine(o.w, tx)
		return
	}
	if !o.headed {
		o.headed = true
		fmt.Fprintf(o.w, "%s  %s\n", tx.OnlineAPIRefID, txSummary(tx))
	}
	if tx.Final() || tx.Progress == o.lastStage {
		return
	}
	o.lastStage = tx.Progress
	if !o.tty {
		fmt.Fprintf(o.w, "  %s\n", stageLabel(tx.Progress))
		return
	}
	o.label = stageLabel(tx.Progress)
	if o.stop == nil {
		o.stop, o.done = make(chan struct{}), make(chan struct{})
		go o.spin(o.stop, o.done)
	}
}

// spin redraws the progress line until stop is closed.
func (o *output) spin(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	frames := []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		o.mu.Lock()
		fmt.Fprintf(o.w, "\r\033[K%s %s", frames[i%len(frames)], o.label)
		o.mu.Unlock()
		select {
		case <-stop:
			return
		case <-tick.C:
		}
	}
}

// stopSpinner ends the progress line, if one runs.
func (o *output) stopSpinner() {
	o.mu.Lock()
	stop, done := o.stop, o.done
	o.stop = nil
	o.mu.Unlock()
	if stop == nil {
		return
	}
	close(stop)
	<-done
	io.WriteString(o.w, "\r\033[K")
}

// final shows the final version.
func (o *output) final(tx *client.Transaction) {
	o.stopSpinner()
	if o.json {
		o.progress(tx)
		return
	}
	io.WriteString(o.w, txBlock(tx, o.receipt))
}

// txSummary is "PURCHASE 12.50 SEK on terminal 10000001".
func txSummary(tx *client.Transaction) string {
	return fmt.Sprintf("%s %s %s on terminal %s", tx.Type, client.FormatAmount(tx.Amount, tx.Currency), tx.Currency, tx.TerminalID)
}

// txBlock shows a transaction for a person.
func txBlock(tx *client.Transaction, receipt bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %s", tx.Status, txSummary(tx))
	if !tx.Final() {
		fmt.Fprintf(&b, " (%s)", stageLabel(tx.Progress))
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "  %s\t%s\n", k, v)
		}
	}
	row("onlineAPIRefId", tx.OnlineAPIRefID)
	row("ecrReference", string(tx.ECRReference))
	if tx.CashbackAmount > 0 {
		row("cashback", client.FormatAmount(tx.CashbackAmount, tx.Currency)+" "+tx.Currency)
	}
	if tx.Tip != nil {
		row("tip", client.FormatAmount(tx.TipAmount, tx.Currency)+" "+tx.Currency+" ("+string(tx.Tip.Mode)+")")
		row("total", client.FormatAmount(tx.TotalAmount, tx.Currency)+" "+tx.Currency)
	}
	if string(tx.ErrorCode) != "" {
		desc := ""
		if c, ok := ecrCodeLists.ErrorCode(string(tx.ErrorCode)); ok {
			desc = " " + c.Description
		}
		row("error", string(tx.ErrorCode)+desc)
	}
	if r := tx.Result; r != nil {
		if r.PaymentMethod != nil {
			row("paid with", r.PaymentMethod.Code)
		} else if string(r.CardBrand) != "" || string(r.MaskedPAN) != "" {
			card := strings.TrimSpace(string(r.CardBrand) + " " + string(r.MaskedPAN))
			if string(r.EntryMode) != "" {
				card += " (" + string(r.EntryMode) + ")"
			}
			row("card", card)
		}
		row("authorization", string(r.AuthorizationCode))
	}
	row("confirmation", confirmationRow(tx))
	row("reverses", string(tx.Reverses))
	row("reversed by", string(tx.ReversedBy))
	row("created", tx.CreatedAt.UTC().Format(time.RFC3339))
	if tx.CompletedAt != nil {
		row("completed", tx.CompletedAt.UTC().Format(time.RFC3339))
	}
	tw.Flush()
	if receipt && tx.Result != nil && len(tx.Result.Receipt.Customer) > 0 {
		b.WriteString("\n")
		for _, l := range tx.Result.Receipt.Customer {
			fmt.Fprintf(&b, "    %s\n", l)
		}
	}
	return b.String()
}

// ecrCodeLists describe the codes stored on transactions (the list is the
// specification's; the service's own metadata says the same).
var ecrCodeLists = instore.DefaultMetadata()

func printMetadata(w io.Writer, m *client.Metadata) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, sec := range []struct {
		name string
		list []client.Code
	}{
		{"errorCodes", m.ErrorCodes}, {"transactionStatuses", m.TransactionStatuses},
		{"paymentMethods", m.PaymentMethods}, {"printStatuses", m.PrintStatuses},
	} {
		fmt.Fprintf(tw, "%s\n", sec.name)
		for _, c := range sec.list {
			fmt.Fprintf(tw, "  %d\t%s\t%s\n", c.ID, c.Code, c.Description)
		}
	}
	tw.Flush()
}

func printTerminals(w io.Writer, ts []*client.Terminal) {
	str := func(p *string) string {
		if p == nil || *p == "" {
			return "-"
		}
		return *p
	}
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TERMINAL ID\tLINKED\tONLINE\tBUSY\tMODEL\tSERIAL NUMBER\tSOFTWARE")
	for _, t := range ts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.TerminalID, yes(t.Linked), yes(t.Online), yes(t.Busy),
			str(t.Model), str(t.SerialNumber), str(t.SoftwareVersion))
	}
	tw.Flush()
}

func printPage(w io.Writer, page *client.TransactionPage) error {
	raw := make([]json.RawMessage, len(page.Transactions))
	for i, tx := range page.Transactions {
		if raw[i] = tx.RawJSON(); raw[i] == nil {
			raw[i], _ = json.Marshal(tx)
		}
	}
	var next *string
	if page.NextCursor != "" {
		next = &page.NextCursor
	}
	return writeJSONLine(w, struct {
		Transactions []json.RawMessage `json:"transactions"`
		NextCursor   *string           `json:"nextCursor"`
	}{raw, next})
}

func printList(w io.Writer, page *client.TransactionPage) {
	tl := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tl, "CREATED\tONLINEAPIREFID\tTYPE\tTERMINAL\tAMOUNT\tSTATUS\tECRREFERENCE")
	for _, tx := range page.Transactions {
		status := tx.Status
		if string(tx.ErrorCode) != "" {
			status += " " + string(tx.ErrorCode)
		}
		fmt.Fprintf(tl, "%s\t%s\t%s\t%s\t%s %s\t%s\t%s\n", tx.CreatedAt.UTC().Format(time.RFC3339), tx.OnlineAPIRefID, tx.Type, tx.TerminalID,
			client.FormatAmount(tx.Amount, tx.Currency), tx.Currency, status, string(tx.ECRReference))
	}
	tl.Flush()
	if len(page.Transactions) == 0 {
		fmt.Fprintln(w, "no transactions")
	}
	if page.NextCursor != "" {
		fmt.Fprintf(w, "more: --cursor %s\n", page.NextCursor)
	}
}

func printJob(w io.Writer, j *client.PrintJob, asJSON bool) {
	if asJSON {
		writeJSONLine(w, j)
		return
	}
	status := string(j.Status)
	if status == "" {
		status = "PRINTING"
	}
	fmt.Fprintf(w, "%s  print job %s on terminal %s\n", status, j.PrintID, j.TerminalID)
}
