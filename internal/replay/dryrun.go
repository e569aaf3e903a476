package replay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"relay/internal/tiers"
)

// Prediction is a dry run's report.
type Prediction struct {
	Selected      int            `json:"selected"`
	Bytes         int            `json:"bytes"`
	WouldPass     int            `json:"wouldPass"`
	WouldFail     map[string]int `json:"wouldFailAgain"`
	WouldReject   map[string]int `json:"wouldBeRejected"`
	WouldRetry    map[string]int `json:"transientNow"`
	Skipped       map[string]int `json:"skipped"`
	Rate          float64        `json:"rate"`
	EstimatedSecs float64        `json:"estimatedSeconds"`
	Sample        int            `json:"sample,omitempty"`
	SchemaChecked bool           `json:"schemaChecked"`
	Rules         int            `json:"rules"`
}

// Predict runs today's admission and rules (the Judge of the plan's
// configuration) on the selection and writes nothing: no producer is even
// created. The hook is not called: it may have side effects. A rules file
// that cannot be read is a *RulesError.
func (p *Plan) Predict(ctx context.Context, o *Options) (*Prediction, error) {
	sel := p.Selection
	pr := &Prediction{Selected: len(sel.Records), Bytes: sel.Bytes, WouldFail: map[string]int{}, WouldReject: map[string]int{},
		WouldRetry: map[string]int{}, Skipped: sel.Skipped, Rate: o.Rate, EstimatedSecs: float64(len(sel.Records)) / o.Rate}
	if o.Sample > 0 {
		first, _ := Sample(sel.Records, o.Sample)
		pr.Sample = len(first)
	}
	j, n, err := NewJudge(ctx, p.cfg)
	var re *RulesError
	switch {
	case errors.As(err, &re):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("a dry run needs today's schema registry: %w", err)
	}
	pr.Rules, pr.SchemaChecked = n, j.Admitter != nil
	for _, fl := range sel.Records {
		pass, d := j.Verdict(ctx, fl.Record.Value, time.Now())
		switch {
		case pass:
			pr.WouldPass++
		case d.Kind == tiers.Quarantine:
			pr.WouldFail[d.Code]++
		case d.Kind == tiers.Reject:
			pr.WouldReject[d.Code]++
		default:
			pr.WouldRetry[d.Code]++
		}
	}
	return pr, nil
}
