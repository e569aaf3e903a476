package ledger

import (
	"encoding/json"
	"reflect"
	"testing"
)

// decodeAsBefore is Decode's JSON step with encoding/json, which Decode
// used before it took the faster implementation of the same semantics.
func decodeAsBefore(value []byte) (record, error) {
	v := record{Event: &Event{}}
	err := json.Unmarshal(value, &v)
	return v, err
}

// sameAsEncodingJSON fails when Decode's JSON step reads value otherwise
// than encoding/json: another field, version, or one accepts what the
// other refuses.
func sameAsEncodingJSON(t *testing.T, value []byte) {
	t.Helper()
	want, werr := decodeAsBefore(value)
	got := record{Event: &Event{}}
	gerr := decodeRecord(value, &got)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("%s: encoding/json says %v, Decode says %v", value, werr, gerr)
	}
	// Decode reads the version even when the rest does not decode: a
	// record of a newer format is named as such.
	if got.V != want.V || werr == nil && !reflect.DeepEqual(got.Event, want.Event) {
		t.Fatalf("%s:\nencoding/json %d %+v\nDecode        %d %+v", value, want.V, want.Event, got.V, got.Event)
	}
}

// A ledger record is read as encoding/json reads it, including records
// no relay writes: names in another case, duplicate names, nulls, bytes
// that are not UTF-8, numbers where strings go, trailing data.
func TestDecodeReadsAsEncodingJSON(t *testing.T) {
	for _, s := range decodeCorpus() {
		sameAsEncodingJSON(t, []byte(s))
	}
}

func FuzzDecodeReadsAsEncodingJSON(f *testing.F) {
	for _, s := range decodeCorpus() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, value []byte) { sameAsEncodingJSON(t, value) })
}

func decodeCorpus() []string {
	e := ev(Open, 0, 0)
	e.Code, e.Topic, e.Attempt = "WIRE_FORMAT_INVALID", "orders.quarantine", 2
	e.Outcome, e.ReplayID, e.SchemaVersion = OutcomeProcessed, "r-1", 3
	return []string{
		string(e.Value()),
		`{"failureId":"orders/1/7","state":"open","at":"2026-11-30T06:00:00Z","replayCount":0,"source":{"topic":"orders","partition":1,"offset":7}}`,
		`{"V":1,"FAILUREID":"orders/1/7","State":"open","SOURCE":{"Topic":"orders","PARTITION":1,"offset":7}}`,
		`{"failureId":"a","failureId":"b","state":"open","state":"resolved"}`,
		`{"failureId":null,"state":null,"at":null,"source":null,"outcome":null,"v":null}`,
		"{\"failureId\":\"or\xffders\",\"state\":\"open\",\"actor\":\"\xc3\x28\"}",
		`{"failureId":"x","state":"open","replayCount":"1"}`,
		`{"failureId":"x","state":"open","replayCount":1.5}`,
		`{"failureId":"x","state":"open","replayCount":1e2}`,
		`{"failureId":"x","state":"open","source":{"partition":4294967296}}`,
		`{"failureId":"x","state":"open","at":"2026-11-30 06:00:00"}`,
		`{"failureId":"x","state":"open","at":"2026-11-30T06:00:00.123456789+02:00"}`,
		`{"failureId":"x","state":"open"} trailing`,
		`{"failureId":"x","state":"open",}`,
		`{"failureId":"x\u0000y","state":"open","reason":"\ud800"}`,
		`{"v":2,"failureId":"x","state":"open"}`,
		`{"v":"2","failureId":"x"}`,
		`{"v":2,"failureId":1,"state":"open"}`,
		`{"failureId":1,"v":2}`,
		`{"v":3,"failureId":"x","at":"yesterday"}`,
		`{"unknown":{"deep":[1,2,{"x":null}]},"failureId":"x","state":"open"}`,
		`[]`, `null`, `""`, `{}`, ``, `{"failureId":`,
	}
}
