package testmetrics_test

import (
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/instore-dev/instore/internal/testmetrics"
)

func ptr[T any](v T) *T { return &v }

func sample(v float64, labels ...string) *dto.Metric {
	m := &dto.Metric{Counter: &dto.Counter{Value: ptr(v)}}
	for i := 0; i+1 < len(labels); i += 2 {
		m.Label = append(m.Label, &dto.LabelPair{Name: ptr(labels[i]), Value: ptr(labels[i+1])})
	}
	return m
}

func TestFind(t *testing.T) {
	family := &dto.MetricFamily{Metric: []*dto.Metric{
		sample(1, "op", "purchase", "code", "201"),
		sample(2, "op", "purchase", "code", "409"),
		sample(3, "op", "cancel", "code", "202"),
	}}
	cases := []struct {
		name   string
		family *dto.MetricFamily
		want   map[string]string
		value  float64 // 0: no sample found
	}{
		{"no labels wanted: the first", family, nil, 1},
		{"one label: the first that has it", family, map[string]string{"op": "purchase"}, 1},
		{"all labels", family, map[string]string{"op": "purchase", "code": "409"}, 2},
		{"another value", family, map[string]string{"op": "cancel"}, 3},
		{"a value no sample has", family, map[string]string{"op": "refund"}, 0},
		{"a label no sample has", family, map[string]string{"terminal": "x"}, 0},
		{"wanted empty matches an absent label", family, map[string]string{"terminal": ""}, 1},
		{"nil family", nil, nil, 0},
		{"empty family", &dto.MetricFamily{}, nil, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := testmetrics.Find(c.family, c.want)
			if c.value == 0 {
				if m != nil {
					t.Fatalf("Find = %v, want none", m)
				}
				return
			}
			if got := m.GetCounter().GetValue(); got != c.value {
				t.Fatalf("Find = sample %v, want sample %v", got, c.value)
			}
		})
	}
}
