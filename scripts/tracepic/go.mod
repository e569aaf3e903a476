// The screenshot program of scripts/trace-picture.sh: drives Debian's
// chromium through chromedp. A module of its own so that chromedp stays out
// of relay's go.mod; a nested go.mod also keeps `./...` at the repo root
// from descending into it.
module relay-tracepic

go 1.26

require github.com/chromedp/chromedp v0.23.0

require (
	github.com/chromedp/cdproto v0.159.0 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
)
