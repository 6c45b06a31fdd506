// Package testmetrics reads Prometheus samples in tests.
package testmetrics

import dto "github.com/prometheus/client_model/go"

// Find returns the first sample of mf whose labels include every name and
// value of want, or nil when there is none (or mf is nil).
func Find(mf *dto.MetricFamily, want map[string]string) *dto.Metric {
metric:
	for _, m := range mf.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue metric
			}
		}
		return m
	}
	return nil
}
