package loadtest

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteJSON writes r as one line.
func (r *Result) WriteJSON(w io.Writer) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// WriteTable writes r for people.
func (r *Result) WriteTable(w io.Writer) error {
	var b strings.Builder
	store := r.Backend
	if r.Synchronous != "" {
		store += " synchronous=" + r.Synchronous
	}
	fmt.Fprintf(&b, "%s · %s · server: %s · %s\n", r.Scenario, store, r.Server, r.StartedAt.Format("2006-01-02 15:04 MST"))
	switch r.Scenario {
	case "metadata":
		fmt.Fprintf(&b, "%d clients with keep-alive per side, %.1f s measured per side", r.Clients, r.Ours.Seconds)
		if r.Rounds > 1 {
			fmt.Fprintf(&b, " in %d interleaved rounds (both servers up; the baseline first in rounds 1, 3, ..., instore in 2, 4, ...)", r.Rounds)
		}
		b.WriteString("\n")
	case "purchase", "mixed", PreAuthScenario:
		fmt.Fprintf(&b, "%d virtual terminals, %d ECR clients", r.Terminals, r.ECRs)
		if r.Scenario == PreAuthScenario {
			b.WriteString(" (a life: pre-auth, increment, capture with a tip)")
		}
		if r.Scenario == "mixed" {
			fmt.Fprintf(&b, ", %d metadata clients, %d status readers", r.Clients, r.Readers)
		}
		fmt.Fprintf(&b, ", %.1f s measured per side", r.Ours.Seconds)
		switch {
		case r.Rounds > 1 && r.Consumers != nil:
			fmt.Fprintf(&b, " in %d interleaved rounds (without the consumers first in rounds 1, 3, ..., with them in 2, 4, ...; the consumers on only in their windows)", r.Rounds)
		case r.Rounds > 1:
			fmt.Fprintf(&b, " in %d interleaved rounds (the raw commits first in rounds 1, 3, ..., instore in 2, 4, ...; the server idle in the commits' windows)", r.Rounds)
		}
		b.WriteString("\n")
	case WebhooksScenario:
		fmt.Fprintf(&b, "%d webhook endpoints of every event type; a backlog built by %d virtual terminals while the receiver held the requests, then drained by one node\n", r.Consumers.Webhooks, r.Terminals)
	case "sessions":
		fmt.Fprintf(&b, "%d idle terminal sessions, held %.1f s; rates and latencies are of session set-up (dial, hello, answer)\n", r.Sessions, r.HoldSeconds)
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	db := r.Backend == "postgres" && r.Scenario != "sessions"
	fmt.Fprintf(tw, "side\trate\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\terrors\tserver RSS\tserver CPU\tclient CPU\t")
	if db {
		fmt.Fprintf(tw, "postgres CPU\t")
	}
	fmt.Fprintf(tw, "\n")
	row := func(s Side) {
		cpu := "-"
		if s.ServerRSSBytes > 0 {
			cpu = fmt.Sprintf("%.0f%%", s.ServerCPU)
		}
		fmt.Fprintf(tw, "%s\t%s %s\t%.2f\t%.2f\t%.2f\t%.2f\t%d\t%s\t%s\t%.0f%%\t", s.Name, commas(s.Rate), s.Unit,
			s.P50Ms, s.P90Ms, s.P99Ms, s.P999Ms, s.Errors, mib(s.ServerRSSBytes), cpu, s.ClientCPU)
		if db {
			fmt.Fprintf(tw, "%.0f%%\t", s.DBCPU)
		}
		fmt.Fprintf(tw, "\n")
	}
	if r.Baseline.Name != "" {
		row(r.Baseline)
	}
	row(r.Ours)
	for _, p := range r.Parts {
		row(p)
	}
	if r.Storm != nil {
		row(r.Storm.Baseline)
		row(r.Storm.Ours)
	}
	tw.Flush()
	if c := r.Consumers; c != nil {
		fmt.Fprintf(&b, "consumers: %d webhook deliveries (%s/s), %d stream events (%s/s); bad signatures %d, out of order %d, sent again %d, stream disorder %d\n",
			c.Deliveries, commas(c.DeliveryRate), c.StreamEvents, commas(c.StreamRate), c.BadSignatures, c.OutOfOrder, c.Repeats, c.StreamDisorder)
		for _, l := range c.Lags {
			types := l.Types
			if types == "" {
				types = "every event"
			}
			fmt.Fprintf(&b, "webhook lag (event's createdAt to the receiver's 2xx), %d endpoints of %s: %d deliveries (%s/s), p50 %.0f ms, p99 %.0f ms, max %.0f ms; behind at a window's end at most %.0f ms\n",
				l.Endpoints, types, l.Deliveries, commas(l.Rate), l.P50Ms, l.P99Ms, l.MaxMs, l.BehindMaxMs)
		}
	}
	switch {
	case r.Consumers != nil && r.Scenario != WebhooksScenario:
		fmt.Fprintf(&b, "baseline: the same lives without the consumers; %.2f commits per life\n", r.CommitsPerLife)
		fmt.Fprintf(&b, "an ECR made %.2f HTTP requests per life\n", r.RequestsPerLife)
	case r.Scenario == WebhooksScenario:
	case r.Scenario == "purchase" || r.Scenario == "mixed" || r.Scenario == PreAuthScenario:
		fmt.Fprintf(&b, "baseline: %s raw single-row commits/s (%d writers) / %.2f commits per life = %s lives/s (its latencies are of one commit)\n",
			commas(r.RawCommitRate), r.CommitWriters, r.CommitsPerLife, commas(r.BaselineRate))
		fmt.Fprintf(&b, "an ECR made %.2f HTTP requests per life\n", r.RequestsPerLife)
		if r.DurableCommitsPerLife > 0 {
			fmt.Fprintf(&b, "the store committed %.2f durable and %.2f relaxed write transactions per life\n", r.DurableCommitsPerLife, r.RelaxedCommitsPerLife)
		}
		if r.Scenario == PreAuthScenario {
			fmt.Fprintf(&b, "%d pre-auths checked in the store after the run (CAPTURED with their life's amounts; any other is an error)\n", r.PreAuthsChecked)
		}
	case r.Scenario == "sessions":
		fmt.Fprintf(&b, "server RSS per session: ours %s, bare gorilla server %s", kib(r.BytesPerSession), kib(r.BaselineBytesPerSession))
		if r.SessionHeapBytes != 0 {
			fmt.Fprintf(&b, " (ours: Go heap %s, stacks %s, %.2f goroutines, %.2f file descriptors)", kib(r.SessionHeapBytes), kib(r.SessionStackBytes), r.SessionGoroutines, r.SessionFDs)
		}
		b.WriteString("\n")
		if st := r.Storm; st != nil {
			fmt.Fprintf(&b, "reconnect storm (every session dropped at once, %d redialling at a time, through the whole hello): %s against %s sessions/s, ratio %.2f (target >= %.1f)\n",
				stormDialers, commas(st.Ours.Rate), commas(st.Baseline.Rate), st.Ratio, st.Target)
		}
	}
	fmt.Fprintf(&b, "ratio %.2f", r.Ratio)
	if r.Met != nil {
		verdict := "met"
		if !*r.Met {
			verdict = "NOT met"
		}
		fmt.Fprintf(&b, " (target >= %.1f", r.Target)
		if r.SessionTargetBytes > 0 {
			fmt.Fprintf(&b, " and <= %s per session", kib(r.SessionTargetBytes))
		}
		fmt.Fprintf(&b, ": %s)", verdict)
	}
	b.WriteString("\n")
	if len(r.RoundRatios) > 1 {
		fmt.Fprintf(&b, "ratio per round: %s\n", formatRatios(r.RoundRatios))
	}
	for _, s := range append([]Side{r.Baseline, r.Ours}, r.Parts...) {
		if s.FirstError != "" {
			fmt.Fprintf(&b, "first error (%s): %s\n", s.Name, s.FirstError)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func commas(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	if v < 100 {
		s = fmt.Sprintf("%.1f", v)
	}
	intPart, frac, _ := strings.Cut(s, ".")
	var out []byte
	for i := range len(intPart) {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, intPart[i])
	}
	if frac != "" {
		return string(out) + "." + frac
	}
	return string(out)
}

func mib(b int64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

func kib(b float64) string { return fmt.Sprintf("%.2f KiB", b/1024) }
