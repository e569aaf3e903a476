package ledger

import (
	"encoding/json"
	"strings"
	"testing"
)

// Ledger records carry a format version, so a later format can be told
// apart: they are written with "v":1; a record without one is version 1
// (written before versions); a record of a newer version is not misread
// but reported, and readers skip it with a warning.
func TestLedgerFormatVersion(t *testing.T) {
	e := ev(Open, 0, 0)
	var v struct {
		V int `json:"v"`
	}
	if err := json.Unmarshal(e.Value(), &v); err != nil || v.V != FormatVersion || FormatVersion != 1 {
		t.Fatalf("written version %d (%v), want 1", v.V, err)
	}
	old := []byte(`{"failureId":"orders/1/7","state":"open","at":"2026-11-30T06:00:00Z","replayCount":0,"source":{"topic":"orders","partition":1,"offset":7}}`)
	if got, ok, err := Decode(e.Key(), old); !ok || err != nil || got.State != Open {
		t.Fatalf("unversioned record: %+v %v %v", got, ok, err)
	}
	newer := []byte(`{"v":2,"failureId":"orders/1/7","state":"open","at":"2026-11-30T06:00:00Z","source":{"topic":"orders","partition":1,"offset":7}}`)
	got, ok, err := Decode(e.Key(), newer)
	if !ok || got != nil || err == nil || !strings.Contains(err.Error(), "version 2") {
		t.Fatalf("newer record: %+v %v %v; want it reported, not read", got, ok, err)
	}
	s := &Settled{}
	if skipped := s.Restore(map[string][]byte{e.Key(): newer}); len(skipped) != 1 || s.Len() != 0 {
		t.Fatalf("restore skipped %v, holds %d", skipped, s.Len())
	}
}
