//! The four C walkthroughs (boards, offline comment, track events, remote
//! config with a live listener) from Rust: hand-written `extern "C"`
//! (src/ffi.rs), no crates, libappnorth found by build.rs through pkg-config.
//!
//!     walkthrough API_URL APP_ID DATA_DIR
//!
//! DEV SERVER ONLY: "losing connectivity" asks the local dev server to drop
//! every API connection (POST /admin/faults), and config versions are
//! published through /admin/apps/APP/config. A real API has neither.
mod ffi;

use std::ffi::{CStr, CString};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::raw::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::mpsc;
use std::time::Duration;

// ---- the two free rules, and errors ---------------------------------------

/// A failed call: status, HTTP status (0 without one), message.
#[derive(Debug)]
struct Error {
    status: i32,
    http_status: i32,
    message: String,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = unsafe { CStr::from_ptr(ffi::appnorth_status_str(self.status)) };
        write!(f, "{} (HTTP {}): {}", name.to_string_lossy(), self.http_status, self.message)
    }
}

type Result<T> = std::result::Result<T, Error>;

/// Runs one C call that takes `appnorth_error *err` last.
fn call(f: impl FnOnce(*mut ffi::appnorth_error) -> ffi::appnorth_status) -> Result<()> {
    let mut err: ffi::appnorth_error = unsafe { std::mem::zeroed() };
    if f(&mut err) == ffi::APPNORTH_OK {
        return Ok(());
    }
    let message = unsafe { CStr::from_ptr(err.message.as_ptr()) }.to_string_lossy().into_owned();
    Err(Error { status: err.code, http_status: err.http_status, message })
}

/// A library-returned string: copied, then released with
/// appnorth_string_free (never Rust's allocator, never libc free).
fn take_string(s: *mut c_char) -> String {
    if s.is_null() {
        return String::new();
    }
    let text = unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned();
    unsafe { ffi::appnorth_string_free(s) };
    text
}

/// Our own strings go in as CString, freed by Rust when dropped.
fn c(s: &str) -> CString {
    CString::new(s).expect("no NUL inside")
}

fn json_call(f: impl FnOnce(*mut *mut c_char, *mut ffi::appnorth_error) -> ffi::appnorth_status) -> Result<String> {
    let mut out: *mut c_char = ptr::null_mut();
    let result = call(|e| f(&mut out, e));
    let text = take_string(out);
    result.map(|_| text)
}

// ---- RAII handles ------------------------------------------------------------

struct Client(*mut ffi::appnorth_client);

impl Client {
    fn new(api_url: &str, app_id: &str) -> Result<Client> {
        let (url, app) = (c(api_url), c(app_id));
        unsafe {
            let opts = ffi::appnorth_client_options_new();
            let mut client = ptr::null_mut();
            let result = call(|e| ffi::appnorth_client_options_set_api_url(opts, url.as_ptr(), e))
                .and_then(|_| call(|e| ffi::appnorth_client_options_set_app_id(opts, app.as_ptr(), e)))
                .and_then(|_| call(|e| ffi::appnorth_client_new(opts, &mut client, e)));
            ffi::appnorth_client_options_free(opts); // the client keeps a copy
            result.map(|_| Client(client))
        }
    }

    fn list_boards(&self) -> Result<String> {
        json_call(|out, e| unsafe { ffi::appnorth_client_list_boards(self.0, out, e) })
    }

    fn list_ideas(&self, query_json: &str) -> Result<String> {
        let q = c(query_json);
        json_call(|out, e| unsafe { ffi::appnorth_client_list_ideas(self.0, q.as_ptr(), out, e) })
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        unsafe { ffi::appnorth_client_free(self.0) }
    }
}

struct Queue {
    storage: *mut ffi::appnorth_storage,
    queue: *mut ffi::appnorth_queue,
}

impl Queue {
    fn open(data_dir: &str) -> Result<Queue> {
        let (dir, name) = (c(data_dir), c("queue"));
        let mut q = Queue { storage: ptr::null_mut(), queue: ptr::null_mut() };
        call(|e| unsafe { ffi::appnorth_storage_new_sqlite(dir.as_ptr(), name.as_ptr(), &mut q.storage, e) })?;
        call(|e| unsafe { ffi::appnorth_queue_new(q.storage, ffi::APPNORTH_QUEUE_DEFAULT_LIMIT, &mut q.queue, e) })?;
        Ok(q)
    }

    /// true if sent now, false if queued after a network failure.
    fn submit_comment(&self, client: &Client, idea_id: &str, body: &str) -> Result<bool> {
        let (id, text) = (c(idea_id), c(body));
        let mut submitted = 0;
        call(|e| unsafe {
            ffi::appnorth_queue_submit_comment(self.queue, client.0, id.as_ptr(), text.as_ptr(), ptr::null(), &mut submitted, e)
        })?;
        Ok(submitted != 0)
    }

    fn flush(&self, client: &Client) -> Result<i32> {
        let mut sent = 0;
        call(|e| unsafe { ffi::appnorth_queue_flush(self.queue, client.0, &mut sent, e) })?;
        Ok(sent)
    }

    fn pending(&self) -> Result<i32> {
        let mut count = 0;
        call(|e| unsafe { ffi::appnorth_queue_pending_count(self.queue, &mut count, e) })?;
        Ok(count)
    }
}

impl Drop for Queue {
    fn drop(&mut self) {
        unsafe {
            ffi::appnorth_queue_free(self.queue);
            ffi::appnorth_storage_free(self.storage);
        }
    }
}

struct Events(*mut ffi::appnorth_events);

impl Events {
    fn open(client: &Client, data_dir: &str) -> Result<Events> {
        let dir = c(data_dir);
        unsafe {
            let opts = ffi::appnorth_events_options_new();
            let mut events = ptr::null_mut();
            let result = call(|e| ffi::appnorth_events_options_set_client(opts, client.0, e))
                .and_then(|_| call(|e| ffi::appnorth_events_options_set_data_dir(opts, dir.as_ptr(), e)))
                .and_then(|_| call(|e| ffi::appnorth_events_new(opts, &mut events, e)));
            ffi::appnorth_events_options_free(opts);
            result.map(|_| Events(events))
        }
    }

    fn track(&self, name: &str, properties_json: &str) -> Result<()> {
        let (n, p) = (c(name), c(properties_json));
        call(|e| unsafe { ffi::appnorth_events_track(self.0, n.as_ptr(), p.as_ptr(), ptr::null_mut(), e) })
    }

    fn flush(&self, timeout_ms: i32) -> Result<()> {
        call(|e| unsafe { ffi::appnorth_events_flush(self.0, timeout_ms, e) })
    }

    fn foreground(&self) -> Result<()> {
        call(|e| unsafe { ffi::appnorth_events_foreground(self.0, e) })
    }

    fn stats(&self) -> Result<String> {
        json_call(|out, e| unsafe { ffi::appnorth_events_stats(self.0, out, e) })
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        unsafe { ffi::appnorth_events_free(self.0) }
    }
}

/// What a listener receives (owned copies).
struct ConfigChange {
    config_json: String,
    changed_keys_json: String,
}

type ListenerFn = Box<dyn Fn(ConfigChange) + Send + Sync>;

/// A config and its listeners. The boxed closures are owned here and freed
/// in Drop only after appnorth_config_free (which waits for a call in
/// flight), so the library never calls into freed memory whatever order the
/// host drops things in.
struct Config {
    config: *mut ffi::appnorth_config,
    listeners: Vec<(i64, *mut ListenerFn)>,
}

/// The C callback. A panic must not unwind into the C library: it is caught
/// here and reported.
extern "C" fn config_trampoline(config_json: *const c_char, changed_keys_json: *const c_char, _tier: i32, user_data: *mut c_void) {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let listener = unsafe { &*(user_data as *const ListenerFn) };
        let text = |s: *const c_char| unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned();
        listener(ConfigChange { config_json: text(config_json), changed_keys_json: text(changed_keys_json) });
    }));
    if outcome.is_err() {
        eprintln!("a config listener panicked; the panic stopped at the C boundary");
    }
}

impl Config {
    fn open(client: &Client, data_dir: &str) -> Result<Config> {
        let dir = c(data_dir);
        unsafe {
            let opts = ffi::appnorth_config_options_new();
            let mut config = ptr::null_mut();
            let result = call(|e| ffi::appnorth_config_options_set_client(opts, client.0, e))
                .and_then(|_| call(|e| ffi::appnorth_config_options_set_data_dir(opts, dir.as_ptr(), e)))
                .and_then(|_| call(|e| ffi::appnorth_config_new(opts, &mut config, e)));
            ffi::appnorth_config_options_free(opts);
            result.map(|_| Config { config, listeners: Vec::new() })
        }
    }

    fn listen(&mut self, f: impl Fn(ConfigChange) + Send + Sync + 'static) -> Result<i64> {
        let boxed: *mut ListenerFn = Box::into_raw(Box::new(Box::new(f)));
        let mut token = 0;
        let result = call(|e| unsafe {
            ffi::appnorth_config_add_listener(self.config, config_trampoline, boxed as *mut c_void, &mut token, e)
        });
        match result {
            Ok(()) => {
                self.listeners.push((token, boxed));
                Ok(token)
            }
            Err(err) => {
                drop(unsafe { Box::from_raw(boxed) });
                Err(err)
            }
        }
    }

    fn unlisten(&mut self, token: i64) -> Result<()> {
        let at = self.listeners.iter().position(|(t, _)| *t == token).expect("a token from listen()");
        let (_, boxed) = self.listeners.remove(at);
        let result = call(|e| unsafe { ffi::appnorth_config_remove_listener(self.config, token, e) });
        drop(unsafe { Box::from_raw(boxed) }); // remove waited for a call in flight
        result
    }

    fn start_live(&self) -> Result<()> {
        call(|e| unsafe { ffi::appnorth_config_start_live(self.config, e) })
    }

    /// Where the effective config came from: APPNORTH_CONFIG_TIER_*.
    fn tier(&self) -> Result<i32> {
        let mut tier = 0;
        call(|e| unsafe { ffi::appnorth_config_source(self.config, &mut tier, ptr::null_mut(), e) })?;
        Ok(tier)
    }

    fn get_double(&self, key: &str, default: f64) -> Result<f64> {
        let k = c(key);
        let mut value = default;
        call(|e| unsafe { ffi::appnorth_config_get_double(self.config, k.as_ptr(), default, &mut value, e) })?;
        Ok(value)
    }
}

impl Drop for Config {
    fn drop(&mut self) {
        unsafe { ffi::appnorth_config_free(self.config) };
        for (_, boxed) in self.listeners.drain(..) {
            drop(unsafe { Box::from_raw(boxed) });
        }
    }
}

// ---- dev server admin (not part of the SDK) ---------------------------------

fn dev_admin(api_url: &str, method: &str, path: &str, body: &str) {
    let host = api_url.trim_start_matches("http://").trim_end_matches('/');
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    match TcpStream::connect(host).and_then(|mut s| {
        s.write_all(request.as_bytes())?;
        let mut reply = String::new();
        s.read_to_string(&mut reply).map(|_| reply)
    }) {
        Ok(_) => {}
        Err(_) => println!("   (could not reach the dev server's /admin API)"),
    }
}

// ---- the walkthroughs ------------------------------------------------------------

fn first_idea_id(ideas_json: &str) -> String {
    // {"ideas":[{"id":"i_1",...  (no JSON crate: the first "id" value)
    ideas_json.split("\"id\":\"").nth(1).and_then(|rest| rest.split('"').next()).unwrap_or("").to_string()
}

fn boards(client: &Client) -> Result<()> {
    println!("1. Boards and ideas");
    println!("   boards: {}", client.list_boards()?);
    println!("   ideas matching \"dark\": {}", client.list_ideas(r#"{"q":"dark"}"#)?);
    Ok(())
}

fn offline_comment(client: &Client, api_url: &str, data_dir: &str) -> Result<bool> {
    println!("2. A comment written offline");
    let idea = first_idea_id(&client.list_ideas(r#"{"q":"dark"}"#)?);
    let queue = Queue::open(data_dir)?;
    dev_admin(api_url, "POST", "/admin/faults", r#"{"drop":true,"count":1000}"#);
    let sent_now = queue.submit_comment(client, &idea, "Yes please, written on a plane")?;
    println!("   sent now: {}, pending: {}", sent_now, queue.pending()?);
    dev_admin(api_url, "DELETE", "/admin/faults", "");
    let sent = queue.flush(client)?;
    let pending = queue.pending()?;
    println!("   after reconnecting: {sent} sent, {pending} pending");
    Ok(!sent_now && sent == 1 && pending == 0)
}

fn track_events(client: &Client, api_url: &str, data_dir: &str) -> Result<bool> {
    println!("3. Events that outlive a lost connection and a restart");
    dev_admin(api_url, "POST", "/admin/faults", r#"{"drop":true,"count":1000}"#);
    {
        let events = Events::open(client, data_dir)?;
        for level in 1..=3 {
            events.track("level_completed", &format!("{{\"level\":{level}}}"))?;
        }
        if let Err(err) = events.flush(2000) {
            println!("   flush while offline: {err} (events kept)");
        }
    } // "restart": the handle is freed; the events stay on disk
    dev_admin(api_url, "DELETE", "/admin/faults", "");
    let events = Events::open(client, data_dir)?;
    events.foreground()?;
    events.flush(10000)?;
    let stats = events.stats()?;
    println!("   after restarting online: {stats}");
    Ok(stats.starts_with("{\"queued\":0,"))
}

fn remote_config(client: &Client, api_url: &str, app: &str, data_dir: &str) -> Result<bool> {
    println!("4. Remote config with a live listener");
    let path = format!("/admin/apps/{app}/config");
    dev_admin(api_url, "POST", &path, r#"{"config":{"theme":"dark","price":9.99}}"#);
    let mut config = Config::open(client, data_dir)?;
    let (tx, rx) = mpsc::channel();
    let tx = std::sync::Mutex::new(tx);
    let token = config.listen(move |change| {
        println!("   listener: changed {} -> {}", change.changed_keys_json, change.config_json);
        let _ = tx.lock().unwrap().send(());
    })?;
    config.start_live()?;
    let wait = || rx.recv_timeout(Duration::from_secs(20)).is_ok();
    if !wait() {
        return Ok(false);
    }
    dev_admin(api_url, "POST", &path, r#"{"config":{"theme":"dark","price":7.49}}"#);
    if !wait() {
        return Ok(false);
    }
    let price = config.get_double("price", 0.0)?;
    println!("   after a live update: price {price}");
    config.unlisten(token)?;
    Ok(price == 7.49)
}

/// Opening a config makes no network call: right after a "restart" it
/// serves the copy the last run cached in the data directory.
fn config_after_restart(client: &Client, data_dir: &str) -> Result<bool> {
    let config = Config::open(client, data_dir)?;
    let (tier, price) = (config.tier()?, config.get_double("price", 0.0)?);
    let cached = tier == ffi::APPNORTH_CONFIG_TIER_CACHED;
    println!("   after a restart, before any fetch: cached tier {cached}, price {price}");
    Ok(cached && price == 7.49)
}

fn run(api_url: &str, app: &str, data_dir: &str) -> Result<bool> {
    let version = unsafe { CStr::from_ptr(ffi::appnorth_version()) };
    println!("libappnorth {} (Rust, extern \"C\")", version.to_string_lossy());
    let client = Client::new(api_url, app)?;
    boards(&client)?;
    let mut ok = offline_comment(&client, api_url, &format!("{data_dir}/queue"))?;
    ok &= track_events(&client, api_url, &format!("{data_dir}/events"))?;
    ok &= remote_config(&client, api_url, app, &format!("{data_dir}/config"))?;
    ok &= config_after_restart(&client, &format!("{data_dir}/config"))?;
    Ok(ok)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: {} API_URL APP_ID DATA_DIR", args[0]);
        std::process::exit(2);
    }
    match run(&args[1], &args[2], &args[3]) {
        Ok(true) => println!("all four walkthroughs done"),
        Ok(false) => {
            println!("a walkthrough did not end as expected");
            std::process::exit(1);
        }
        Err(err) => {
            println!("appnorth error: {err}");
            std::process::exit(1);
        }
    }
}
