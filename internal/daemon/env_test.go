package daemon

// env builds lookup and environ from a map.
func env(m map[string]string) (func(string) (string, bool), []string) {
	var environ []string
	for k, v := range m {
		environ = append(environ, k+"="+v)
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }, environ
}
