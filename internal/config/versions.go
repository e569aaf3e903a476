package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Versions is a set of accepted schema versions, written like "3-5" or
// "1,3-5,8".
type Versions struct {
	ranges [][2]int
	text   string
}

// ParseVersions reads a version set.
func ParseVersions(s string) (Versions, error) {
	v := Versions{text: strings.TrimSpace(s)}
	if v.text == "" {
		return v, fmt.Errorf("empty version set (examples: 3, 3-5, 1,3-5)")
	}
	for _, part := range strings.Split(v.text, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, errA := strconv.Atoi(strings.TrimSpace(lo))
		b := a
		var errB error
		if isRange {
			b, errB = strconv.Atoi(strings.TrimSpace(hi))
		}
		if errA != nil || errB != nil || a < 1 || b < a {
			return v, fmt.Errorf("%q is not a version or range of versions (examples: 3, 3-5)", part)
		}
		v.ranges = append(v.ranges, [2]int{a, b})
	}
	return v, nil
}

// Contains reports whether version is in the set.
func (v Versions) Contains(version int) bool {
	for _, r := range v.ranges {
		if version >= r[0] && version <= r[1] {
			return true
		}
	}
	return false
}

// Max is the highest version in the set.
func (v Versions) Max() int {
	m := 0
	for _, r := range v.ranges {
		m = max(m, r[1])
	}
	return m
}

// List returns the versions of the set among have, in order.
func (v Versions) List(have []int) []int {
	var out []int
	for _, h := range have {
		if v.Contains(h) {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return out
}

func (v Versions) String() string { return v.text }
