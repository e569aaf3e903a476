package envelope

import "testing"

func TestID(t *testing.T) {
	for _, tc := range []struct {
		topic     string
		partition int32
		offset    int64
		want      string
	}{
		{"orders", 12, 884193, "orders/12/884193"},
		{"a.b-c_d", 0, 0, "a.b-c_d/0/0"},
		{"t", 2147483647, 9223372036854775807, "t/2147483647/9223372036854775807"},
	} {
		if got := ID(tc.topic, tc.partition, tc.offset); got != tc.want {
			t.Errorf("ID(%q, %d, %d) = %q, want %q", tc.topic, tc.partition, tc.offset, got, tc.want)
		}
	}
}
