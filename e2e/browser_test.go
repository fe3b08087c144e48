package e2e

import (
	"bytes"
	"context"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium returns the path of the Chromium binary, skipping the test
// when there is none, or failing it when CI is set.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const why = "chromium is not on PATH; scripts/deps.sh installs it"
	if os.Getenv("CI") != "" {
		t.Fatal(why)
	}
	t.Skip(why)
	return ""
}

// browser is one headless Chromium with one tab, and the errors its
// console reported.
type browser struct {
	ctx       context.Context
	listening sync.WaitGroup

	mu     sync.Mutex
	errors []string
}

// newBrowser starts Chromium for the test, with a fresh profile, no
// sandbox (CI runs as root), and nothing that talks to the network on its
// own; it is stopped when the test ends.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	b := &browser{ctx: ctx}
	// Subscribe before the first page loads, so that no message is lost.
	messages := chromedp.Console(ctx)
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		cancel()
		cancelAlloc()
		t.Fatalf("starting chromium: %v", err)
	}
	b.listening.Go(func() {
		for m, err := range messages {
			if err != nil {
				return // the browser is gone
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				b.mu.Lock()
				b.errors = append(b.errors, m.String()+" "+m.URL)
				b.mu.Unlock()
			}
		}
	})
	t.Cleanup(func() {
		cancel()
		cancelAlloc() // waits for chromium to exit
		b.listening.Wait()
	})
	return b
}

// consoleErrors returns what the console reported as errors so far.
func (b *browser) consoleErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errors...)
}

func (b *browser) do(t *testing.T, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatal(err)
	}
}

// attr returns the attribute name of the first element matching the CSS
// selector sel.
func (b *browser) attr(t *testing.T, sel, name string) string {
	t.Helper()
	r, err := chromedp.Run(b.ctx, chromedp.AttributeValue(chromedp.CSS(sel), name))
	if err != nil || !r.Exists {
		t.Fatalf("%s[%s]: %v, exists %v", sel, name, err, r.Exists)
	}
	return r.Value
}

// waitFor evaluates the JavaScript expression cond every 20 ms until it is
// true, and returns when it was; it fails the test after timeout.
func (b *browser) waitFor(t *testing.T, cond string, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](cond))
		if err != nil {
			t.Fatalf("evaluating %s: %v", cond, err)
		}
		if ok {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still false after %s", cond, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// screenshotDir is where screenshots go: $BREAKWATER_SCREENSHOTS, or a
// new temporary directory that outlives the test, so that CI can keep it.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("BREAKWATER_SCREENSHOTS")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "breakwater-screenshots-"); err != nil {
			t.Fatal(err)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// screenshot captures the whole page, checks that it shows something, and
// writes it to dir/name.
func (b *browser) screenshot(t *testing.T, dir, name string) string {
	t.Helper()
	buf, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		t.Fatal(err)
	}
	checkNonBlank(t, buf)
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	return path
}

// checkNonBlank fails unless the PNG has some variety: at least 2 % of its
// pixels differ from the background and it holds at least 8 colours.
func checkNonBlank(t *testing.T, b []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	r := img.Bounds()
	if r.Dx() < 200 || r.Dy() < 200 {
		t.Fatalf("screenshot is %v", r)
	}
	bg := color.RGBAModel.Convert(img.At(r.Min.X, r.Min.Y))
	colours := map[color.Color]bool{}
	differ := 0
	for y := r.Min.Y; y < r.Max.Y; y += 2 {
		for x := r.Min.X; x < r.Max.X; x += 2 {
			c := color.RGBAModel.Convert(img.At(x, y))
			if c != bg {
				differ++
			}
			if len(colours) < 64 {
				colours[c] = true
			}
		}
	}
	total := (r.Dx() / 2) * (r.Dy() / 2)
	if float64(differ) < 0.02*float64(total) || len(colours) < 8 {
		t.Fatalf("screenshot looks blank: %d of %d sampled pixels differ from the background, %d colours", differ, total, len(colours))
	}
}
