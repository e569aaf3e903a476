package config

import "testing"

func TestParseVersions(t *testing.T) {
	v, err := ParseVersions("1, 3-5,8")
	if err != nil {
		t.Fatal(err)
	}
	for n, want := range map[int]bool{1: true, 2: false, 3: true, 5: true, 6: false, 8: true} {
		if v.Contains(n) != want {
			t.Errorf("Contains(%d) != %v", n, want)
		}
	}
	for _, bad := range []string{"", "x", "5-3", "0", "1-", "-2"} {
		if _, err := ParseVersions(bad); err == nil {
			t.Errorf("ParseVersions(%q) accepted", bad)
		}
	}
}
