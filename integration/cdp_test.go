package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// browser is a headless Chromium driven over the DevTools protocol on
// its --remote-debugging-pipe (fd 3 in, fd 4 out: NUL-terminated JSON), so
// a test can click in a page without a WebSocket library.
type browser struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	mu      sync.Mutex
	nextID  int
	pending map[int]chan cdpReply
	session string
	readErr chan error
}

type cdpReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// startBrowser starts chromium and opens url in one tab.
func startBrowser(t *testing.T, bin, url string) *browser {
	toChrome, chromeIn, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	chromeOut, fromChrome, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--user-data-dir="+t.TempDir(), "--remote-debugging-pipe", "about:blank")
	cmd.ExtraFiles = []*os.File{toChrome, fromChrome} // fds 3 and 4
	if err := cmd.Start(); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	toChrome.Close()
	fromChrome.Close()
	b := &browser{cmd: cmd, in: chromeIn, pending: map[int]chan cdpReply{}, readErr: make(chan error, 1)}
	t.Cleanup(func() {
		chromeIn.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		chromeOut.Close()
	})
	go b.read(chromeOut)
	var target struct {
		TargetID string `json:"targetId"`
	}
	b.call(t, "", "Target.createTarget", map[string]any{"url": url}, &target)
	var att struct {
		SessionID string `json:"sessionId"`
	}
	b.call(t, "", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att)
	b.session = att.SessionID
	// Wait for the page itself: a script evaluated in the tab's first
	// document (about:blank) dies with it when the page commits.
	eventually(t, 2*time.Minute, "chromium to load "+url, func() error {
		var r struct {
			Result struct {
				Value string `json:"value"`
			} `json:"result"`
		}
		if err := b.callErr(b.session, "Runtime.evaluate", map[string]any{
			"expression": "location.href + ' ' + document.readyState", "returnByValue": true}, &r); err != nil {
			return err
		}
		if r.Result.Value != url+" complete" {
			return fmt.Errorf("tab at %q", r.Result.Value)
		}
		return nil
	})
	return b
}

func (b *browser) read(r io.Reader) {
	br := bufio.NewReader(r)
	for {
		msg, err := br.ReadBytes(0)
		if err != nil {
			b.readErr <- err
			return
		}
		var m struct {
			ID int `json:"id"`
			cdpReply
		}
		if json.Unmarshal(msg[:len(msg)-1], &m) != nil || m.ID == 0 {
			continue // an event
		}
		b.mu.Lock()
		ch := b.pending[m.ID]
		delete(b.pending, m.ID)
		b.mu.Unlock()
		if ch != nil {
			ch <- m.cdpReply
		}
	}
}

// call sends one protocol command (on the page's session unless session
// is "" and this is a browser command) and decodes its result into out.
func (b *browser) call(t *testing.T, session, method string, params any, out any) {
	t.Helper()
	if err := b.callErr(session, method, params, out); err != nil {
		t.Fatal(err)
	}
}

func (b *browser) callErr(session, method string, params any, out any) error {
	b.mu.Lock()
	b.nextID++
	id := b.nextID
	ch := make(chan cdpReply, 1)
	b.pending[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method, "params": params}
	if session != "" {
		msg["sessionId"] = session
	}
	raw, _ := json.Marshal(msg)
	if _, err := b.in.Write(append(raw, 0)); err != nil {
		return fmt.Errorf("%s: write to chromium: %w", method, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	select {
	case r := <-ch:
		if r.Error != nil {
			return fmt.Errorf("%s: %s", method, r.Error.Message)
		}
		if out != nil {
			if err := json.Unmarshal(r.Result, out); err != nil {
				return fmt.Errorf("%s: decode %s: %w", method, r.Result, err)
			}
		}
		return nil
	case err := <-b.readErr:
		return fmt.Errorf("%s: chromium closed its pipe: %w", method, err)
	case <-ctx.Done():
		return fmt.Errorf("%s: no answer from chromium", method)
	}
}

// eval runs an async JavaScript expression in the page and decodes the
// value it resolves to into out; a thrown error fails the test.
func (b *browser) eval(t *testing.T, expr string, out any) {
	t.Helper()
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	b.call(t, b.session, "Runtime.evaluate", map[string]any{"expression": expr, "awaitPromise": true, "returnByValue": true}, &r)
	if e := r.ExceptionDetails; e != nil {
		t.Fatalf("page script: %s %s", e.Text, e.Exception.Description)
	}
	if out != nil {
		if err := json.Unmarshal(r.Result.Value, out); err != nil {
			t.Fatalf("page script result %s: %v", r.Result.Value, err)
		}
	}
}

// pageHelpers defines until(cond, what) in the page: polls cond every
// 100 ms for up to 2 minutes.
const pageHelpers = `
window.until = async (cond, what) => {
  for (let i = 0; i < 1200; i++) {
    if (cond()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("timed out waiting for " + what);
};
`
