package console

import (
	"html/template"
	"io/fs"
	"net/url"
	"strconv"
	"strings"
	"time"

	"relay/internal/quarantine"
)

var funcs = template.FuncMap{
	"age": func(now, t time.Time) string { return quarantine.Age(now.Sub(t)) },
	"utc": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"pct":        func(f float64) string { return strconv.FormatFloat(f*100, 'f', -1, 64) },
	"failureURL": func(id string) string { return "/failure?" + url.Values{"id": {id}}.Encode() },
	"with": func(q url.Values, k, v string) string {
		c := url.Values{}
		for key, vs := range q {
			c[key] = append([]string(nil), vs...)
		}
		c.Set(k, v)
		c.Del("page")
		return c.Encode()
	},
	"sub": func(a, b int) int { return a - b },
}

// parsePages parses each page with the layout.
func parsePages() (map[string]*template.Template, error) {
	layout, err := fs.ReadFile(assets, "assets/pages/layout.html")
	if err != nil {
		return nil, err
	}
	names, err := fs.Glob(assets, "assets/pages/*.html")
	if err != nil {
		return nil, err
	}
	out := map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimSuffix(n[strings.LastIndexByte(n, '/')+1:], ".html")
		if name == "layout" {
			continue
		}
		body, err := fs.ReadFile(assets, n)
		if err != nil {
			return nil, err
		}
		t, err := template.New(name).Funcs(funcs).Parse(string(layout))
		if err != nil {
			return nil, err
		}
		if _, err := t.Parse(string(body)); err != nil {
			return nil, err
		}
		out[name] = t
	}
	return out, nil
}
