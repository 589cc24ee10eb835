//! Hand-written declarations for the part of appnorth.h the walkthroughs use.
//! Types follow the header exactly: int32_t is i32, the statuses are
//! `appnorth_status` (i32), strings are `*const c_char`.
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_void};

pub type appnorth_status = i32;
pub const APPNORTH_OK: appnorth_status = 0;
pub const APPNORTH_QUEUE_DEFAULT_LIMIT: i32 = 50;
pub const APPNORTH_CONFIG_TIER_CACHED: i32 = 2;
pub const APPNORTH_ERROR_MESSAGE_SIZE: usize = 256;

#[repr(C)]
pub struct appnorth_error {
    pub code: i32,
    pub http_status: i32,
    pub message: [c_char; APPNORTH_ERROR_MESSAGE_SIZE],
}

// Opaque handles: only ever behind pointers.
#[repr(C)]
pub struct appnorth_client_options {
    _private: [u8; 0],
}
#[repr(C)]
pub struct appnorth_client {
    _private: [u8; 0],
}
#[repr(C)]
pub struct appnorth_storage {
    _private: [u8; 0],
}
#[repr(C)]
pub struct appnorth_queue {
    _private: [u8; 0],
}
#[repr(C)]
pub struct appnorth_events_options {
    _private: [u8; 0],
}
#[repr(C)]
pub struct appnorth_events {
    _private: [u8; 0],
}
#[repr(C)]
pub struct appnorth_config_options {
    _private: [u8; 0],
}
#[repr(C)]
pub struct appnorth_config {
    _private: [u8; 0],
}

pub type appnorth_config_listener_fn =
    extern "C" fn(config_json: *const c_char, changed_keys_json: *const c_char, tier: i32, user_data: *mut c_void);

extern "C" {
    pub fn appnorth_version() -> *const c_char;
    pub fn appnorth_status_str(code: i32) -> *const c_char;
    pub fn appnorth_string_free(s: *mut c_char);

    pub fn appnorth_client_options_new() -> *mut appnorth_client_options;
    pub fn appnorth_client_options_free(options: *mut appnorth_client_options);
    pub fn appnorth_client_options_set_api_url(o: *mut appnorth_client_options, url: *const c_char, err: *mut appnorth_error) -> appnorth_status;
    pub fn appnorth_client_options_set_app_id(o: *mut appnorth_client_options, app: *const c_char, err: *mut appnorth_error) -> appnorth_status;
    pub fn appnorth_client_new(o: *const appnorth_client_options, out: *mut *mut appnorth_client, err: *mut appnorth_error) -> appnorth_status;
    pub fn appnorth_client_free(client: *mut appnorth_client);
    pub fn appnorth_client_list_boards(c: *mut appnorth_client, out_json: *mut *mut c_char, err: *mut appnorth_error) -> appnorth_status;
    pub fn appnorth_client_list_ideas(c: *mut appnorth_client, query: *const c_char, out_json: *mut *mut c_char, err: *mut appnorth_error) -> appnorth_status;

    pub fn appnorth_storage_new_sqlite(dir: *const c_char, name: *const c_char, out: *mut *mut appnorth_storage, err: *mut appnorth_error) -> appnorth_status;
    pub fn appnorth_storage_free(storage: *mut appnorth_storage);
    pub fn appnorth_queue_new(s: *mut appnorth_storage, max_entries: i32, out: *mut *mut appnorth_queue, err: *mut appnorth_error) -> appnorth_status;
    pub fn appnorth_queue_free(queue: *mut appnorth_queue);
    pub fn appnorth_queue_submit_comment(q: *mut appnorth_queue, c: *mut appnorth_client, idea_id: *const c_char, body: *const c_char,
                                         idempotency_key: *const c_char, out_submitted: *mut i32, err: *mut appnorth_error) -> appnorth_status;
    pub fn appnorth_queue_flush(q: *mut appnorth_queue, c: *mut appnorth_client, out_sent: *mut i32, err: *mut appnorth_error) -> appnorth_status;
    pub fn appnorth_queue_pending_count(q: *mut appnorth_queue, out_count: *mut i32, err: *mut appnorth_error) -> appnorth_status;

    pub fn appnorth_events_options_new() -> *mut appnorth_events_options;
    pub fn appnorth_events_options_free(options: *mut appnorth_events_options);
    pub fn appnorth_events_options_set_client(o: *mut appnorth_events_options, c: *mut appnorth_client, err: *mut appnorth_error) -> appnorth_status;
    pub fn appnorth_events_options_set_data_dir(o: *mut appnorth_events_options, dir: *const c_char, err: *mut appnorth_error) -> appnorth_status;
    pub fn appnorth_events_new(o: *const appnorth_events_options, out: *mut *mut appnorth_events, err: *mut appnorth_error) -> appnorth_status;
    pub fn appnorth_events_free(events: *mut appnorth_events);
    pub fn appnorth_events_track(ev: *mut appnorth_events, name: *const c_char, properties_json: *const c_char, out_queued: *mut i32,
                                 err: *mut appnorth_error) -> appnorth_status;
    pub fn appnorth_events_flush(ev: *mut appnorth_events, timeout_ms: i32, err: *mut appnorth_error) -> appnorth_status;
    pub fn appnorth_events_foreground(ev: *mut appnorth_events, err: *mut appnorth_error) -> appnorth_status;
    pub fn appnorth_events_stats(ev: *mut appnorth_events, out_json: *mut *mut c_char, err: *mut appnorth_error) -> appnorth_status;

    pub fn appnorth_config_options_new() -> *mut appnorth_config_options;
    pub fn appnorth_config_options_free(options: *mut appnorth_config_options);
    pub fn appnorth_config_options_set_client(o: *mut appnorth_config_options, c: *mut appnorth_client, err: *mut appnorth_error) -> appnorth_status;
    pub fn appnorth_config_options_set_data_dir(o: *mut appnorth_config_options, dir: *const c_char, err: *mut appnorth_error) -> appnorth_status;
    pub fn appnorth_config_new(o: *const appnorth_config_options, out: *mut *mut appnorth_config, err: *mut appnorth_error) -> appnorth_status;
    pub fn appnorth_config_free(config: *mut appnorth_config);
    pub fn appnorth_config_start_live(config: *mut appnorth_config, err: *mut appnorth_error) -> appnorth_status;
    pub fn appnorth_config_source(config: *mut appnorth_config, out_tier: *mut i32, out_fetched_ms: *mut i64,
                                  err: *mut appnorth_error) -> appnorth_status;
    pub fn appnorth_config_get_double(config: *mut appnorth_config, key: *const c_char, default_value: f64, out: *mut f64,
                                      err: *mut appnorth_error) -> appnorth_status;
    pub fn appnorth_config_add_listener(config: *mut appnorth_config, f: appnorth_config_listener_fn, user_data: *mut c_void,
                                        out_token: *mut i64, err: *mut appnorth_error) -> appnorth_status;
    pub fn appnorth_config_remove_listener(config: *mut appnorth_config, token: i64, err: *mut appnorth_error) -> appnorth_status;
}
