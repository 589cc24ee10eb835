package main

// A thin cgo layer over the few appnorth.h functions the walkthroughs use.
// The rules it keeps:
//   - strings the library returns are copied with C.GoString, then released
//     with appnorth_string_free (never C.free); strings Go passes in are
//     C.CString copies released with C.free (the host's own allocator);
//   - a Go callback is reached through trampoline.c, with a cgo.Handle as
//     user_data; the handle is deleted only after
//     appnorth_config_remove_listener returned, so no call can still use it;
//   - every handle has a Close that frees it once.

/*
#cgo pkg-config: appnorth
#include <stdlib.h>
#include <appnorth.h>

int32_t go_config_add_listener(appnorth_config *config, uintptr_t handle, int64_t *out_token,
                               appnorth_error *err);
*/
import "C"

import (
	"fmt"
	"runtime/cgo"
	"sync"
	"unsafe"
)

// Error is a failed call: the status, the HTTP status (0 without one) and
// the library's message.
type Error struct {
	Status     int32
	HTTPStatus int32
	Message    string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s (HTTP %d): %s", C.GoString(C.appnorth_status_str(C.int32_t(e.Status))), e.HTTPStatus, e.Message)
}

// call runs one C function that takes `appnorth_error *err` last.
func call(fn func(err *C.appnorth_error) C.int32_t) error {
	var err C.appnorth_error
	if rc := fn(&err); rc != C.APPNORTH_OK {
		return &Error{int32(rc), int32(err.http_status), C.GoString(&err.message[0])}
	}
	return nil
}

// takeString copies a library string and releases it with appnorth_string_free.
func takeString(s *C.char) string {
	defer C.appnorth_string_free(s)
	return C.GoString(s)
}

// cstring is a C copy of s for one call; the caller frees it with C.free.
func cstring(s string) *C.char { return C.CString(s) }

func free(p *C.char) { C.free(unsafe.Pointer(p)) }

func Version() string { return C.GoString(C.appnorth_version()) }

// ---- Client --------------------------------------------------------------

type Client struct{ c *C.appnorth_client }

func NewClient(apiURL, appID string) (*Client, error) {
	opts := C.appnorth_client_options_new()
	defer C.appnorth_client_options_free(opts)
	url, app := cstring(apiURL), cstring(appID)
	defer free(url)
	defer free(app)
	client := &Client{}
	err := call(func(e *C.appnorth_error) C.int32_t { return C.appnorth_client_options_set_api_url(opts, url, e) })
	if err == nil {
		err = call(func(e *C.appnorth_error) C.int32_t { return C.appnorth_client_options_set_app_id(opts, app, e) })
	}
	if err == nil {
		err = call(func(e *C.appnorth_error) C.int32_t { return C.appnorth_client_new(opts, &client.c, e) })
	}
	if err != nil {
		return nil, err
	}
	return client, nil
}

func (c *Client) Close() { C.appnorth_client_free(c.c); c.c = nil }

func (c *Client) jsonCall(fn func(out **C.char, e *C.appnorth_error) C.int32_t) (string, error) {
	var out *C.char
	err := call(func(e *C.appnorth_error) C.int32_t { return fn(&out, e) })
	if out == nil {
		return "", err
	}
	return takeString(out), err
}

func (c *Client) ListBoards() (string, error) {
	return c.jsonCall(func(out **C.char, e *C.appnorth_error) C.int32_t { return C.appnorth_client_list_boards(c.c, out, e) })
}

func (c *Client) ListIdeas(queryJSON string) (string, error) {
	q := cstring(queryJSON)
	defer free(q)
	return c.jsonCall(func(out **C.char, e *C.appnorth_error) C.int32_t {
		return C.appnorth_client_list_ideas(c.c, q, out, e)
	})
}

// ---- Offline queue -------------------------------------------------------

type Queue struct {
	storage *C.appnorth_storage
	q       *C.appnorth_queue
}

func NewQueue(dataDir string) (*Queue, error) {
	dir, name := cstring(dataDir), cstring("queue")
	defer free(dir)
	defer free(name)
	queue := &Queue{}
	err := call(func(e *C.appnorth_error) C.int32_t { return C.appnorth_storage_new_sqlite(dir, name, &queue.storage, e) })
	if err == nil {
		err = call(func(e *C.appnorth_error) C.int32_t {
			return C.appnorth_queue_new(queue.storage, C.APPNORTH_QUEUE_DEFAULT_LIMIT, &queue.q, e)
		})
	}
	if err != nil {
		queue.Close()
		return nil, err
	}
	return queue, nil
}

func (q *Queue) Close() {
	C.appnorth_queue_free(q.q)
	C.appnorth_storage_free(q.storage)
	q.q, q.storage = nil, nil
}

// SubmitComment returns true if the comment was sent now, false if queued.
func (q *Queue) SubmitComment(client *Client, ideaID, body string) (bool, error) {
	id, text := cstring(ideaID), cstring(body)
	defer free(id)
	defer free(text)
	var submitted C.int32_t
	err := call(func(e *C.appnorth_error) C.int32_t {
		return C.appnorth_queue_submit_comment(q.q, client.c, id, text, nil, &submitted, e)
	})
	return submitted != 0, err
}

func (q *Queue) Flush(client *Client) (int, error) {
	var sent C.int32_t
	err := call(func(e *C.appnorth_error) C.int32_t { return C.appnorth_queue_flush(q.q, client.c, &sent, e) })
	return int(sent), err
}

func (q *Queue) Pending() (int, error) {
	var count C.int32_t
	err := call(func(e *C.appnorth_error) C.int32_t { return C.appnorth_queue_pending_count(q.q, &count, e) })
	return int(count), err
}

// ---- Events --------------------------------------------------------------

type Events struct{ ev *C.appnorth_events }

func NewEvents(client *Client, dataDir string) (*Events, error) {
	opts := C.appnorth_events_options_new()
	defer C.appnorth_events_options_free(opts)
	dir := cstring(dataDir)
	defer free(dir)
	events := &Events{}
	err := call(func(e *C.appnorth_error) C.int32_t { return C.appnorth_events_options_set_client(opts, client.c, e) })
	if err == nil {
		err = call(func(e *C.appnorth_error) C.int32_t { return C.appnorth_events_options_set_data_dir(opts, dir, e) })
	}
	if err == nil {
		err = call(func(e *C.appnorth_error) C.int32_t { return C.appnorth_events_new(opts, &events.ev, e) })
	}
	if err != nil {
		return nil, err
	}
	return events, nil
}

func (ev *Events) Close() { C.appnorth_events_free(ev.ev); ev.ev = nil }

func (ev *Events) Track(name, propertiesJSON string) error {
	n, p := cstring(name), cstring(propertiesJSON)
	defer free(n)
	defer free(p)
	return call(func(e *C.appnorth_error) C.int32_t { return C.appnorth_events_track(ev.ev, n, p, nil, e) })
}

func (ev *Events) Flush(timeoutMS int32) error {
	return call(func(e *C.appnorth_error) C.int32_t { return C.appnorth_events_flush(ev.ev, C.int32_t(timeoutMS), e) })
}

func (ev *Events) Foreground() error {
	return call(func(e *C.appnorth_error) C.int32_t { return C.appnorth_events_foreground(ev.ev, e) })
}

func (ev *Events) Stats() (string, error) {
	var out *C.char
	err := call(func(e *C.appnorth_error) C.int32_t { return C.appnorth_events_stats(ev.ev, &out, e) })
	if out == nil {
		return "", err
	}
	return takeString(out), err
}

// ---- Config and its listeners -----------------------------------------------

// ConfigChange is what a listener receives (copies it may keep).
type ConfigChange struct {
	ConfigJSON, ChangedKeysJSON string
	Tier                        int32
}

type Config struct {
	c         *C.appnorth_config
	mu        sync.Mutex
	listeners map[int64]cgo.Handle
}

func NewConfig(client *Client, dataDir string) (*Config, error) {
	opts := C.appnorth_config_options_new()
	defer C.appnorth_config_options_free(opts)
	dir := cstring(dataDir)
	defer free(dir)
	config := &Config{listeners: map[int64]cgo.Handle{}}
	err := call(func(e *C.appnorth_error) C.int32_t { return C.appnorth_config_options_set_client(opts, client.c, e) })
	if err == nil {
		err = call(func(e *C.appnorth_error) C.int32_t { return C.appnorth_config_options_set_data_dir(opts, dir, e) })
	}
	if err == nil {
		err = call(func(e *C.appnorth_error) C.int32_t { return C.appnorth_config_new(opts, &config.c, e) })
	}
	if err != nil {
		return nil, err
	}
	return config, nil
}

//export goConfigListener
func goConfigListener(configJSON, changedKeysJSON *C.char, tier C.int32_t, handle C.uintptr_t) {
	// A panic must not unwind into the C library's thread.
	defer func() {
		if r := recover(); r != nil {
			fmt.Println("config listener panicked:", r)
		}
	}()
	fn := cgo.Handle(handle).Value().(func(ConfigChange))
	fn(ConfigChange{C.GoString(configJSON), C.GoString(changedKeysJSON), int32(tier)})
}

// Listen registers fn; it runs on the library's config thread. Returns the
// token for Unlisten.
func (c *Config) Listen(fn func(ConfigChange)) (int64, error) {
	handle := cgo.NewHandle(fn)
	var token C.int64_t
	if err := call(func(e *C.appnorth_error) C.int32_t {
		return C.go_config_add_listener(c.c, C.uintptr_t(handle), &token, e)
	}); err != nil {
		handle.Delete()
		return 0, err
	}
	c.mu.Lock()
	c.listeners[int64(token)] = handle
	c.mu.Unlock()
	return int64(token), nil
}

// Unlisten removes a listener; after it returns the listener is never called.
func (c *Config) Unlisten(token int64) error {
	c.mu.Lock()
	handle, ok := c.listeners[token]
	delete(c.listeners, token)
	c.mu.Unlock()
	if !ok {
		return fmt.Errorf("unknown listener token %d", token)
	}
	err := call(func(e *C.appnorth_error) C.int32_t { return C.appnorth_config_remove_listener(c.c, C.int64_t(token), e) })
	handle.Delete() // only now: remove waited for a call in flight
	return err
}

// Close frees the config (which stops its thread and waits for a listener
// call in flight), then releases the handles of listeners still registered:
// the order the C API asks for, kept in one place.
func (c *Config) Close() {
	C.appnorth_config_free(c.c)
	c.c = nil
	c.mu.Lock()
	for token, handle := range c.listeners {
		handle.Delete()
		delete(c.listeners, token)
	}
	c.mu.Unlock()
}

func (c *Config) StartLive() error {
	return call(func(e *C.appnorth_error) C.int32_t { return C.appnorth_config_start_live(c.c, e) })
}

func (c *Config) GetString(key, def string) (string, error) {
	k, d := cstring(key), cstring(def)
	defer free(k)
	defer free(d)
	var out *C.char
	err := call(func(e *C.appnorth_error) C.int32_t { return C.appnorth_config_get_string(c.c, k, d, &out, e) })
	if out == nil {
		return def, err
	}
	return takeString(out), err
}

// Tier is where the effective config came from: C.APPNORTH_CONFIG_TIER_*.
func (c *Config) Tier() (int32, error) {
	var tier C.int32_t
	err := call(func(e *C.appnorth_error) C.int32_t { return C.appnorth_config_source(c.c, &tier, nil, e) })
	return int32(tier), err
}

const ConfigTierCached = int32(C.APPNORTH_CONFIG_TIER_CACHED)

func (c *Config) GetDouble(key string, def float64) (float64, error) {
	k := cstring(key)
	defer free(k)
	var out C.double
	err := call(func(e *C.appnorth_error) C.int32_t { return C.appnorth_config_get_double(c.c, k, C.double(def), &out, e) })
	return float64(out), err
}
