// Package e2e holds breakwater's browser tests: the status page and the
// timeline SVG opened in a real headless Chromium, driven over the
// DevTools protocol with chromedp. It is a module of its own so that the
// library's go.mod never requires a browser driver.
//
//	cd e2e && go test ./...
//
// Chromium is found on PATH (scripts/deps.sh installs Debian's chromium).
// Without it the tests skip, unless CI is set, where they fail.
// Screenshots are written to $BREAKWATER_SCREENSHOTS, or to a new
// temporary directory whose path the tests log.
package e2e
