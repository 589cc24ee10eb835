// Compiled by ffi_bindgen.sh against the bindings bindgen made from
// appnorth.h. The `let _: i32` lines are the test: they do not compile if
// bindgen gives a constant an unsigned type.
#![allow(non_camel_case_types, non_upper_case_globals, dead_code)]
include!("appnorth_sys.rs");

#[link(name = "appnorth")]
extern "C" {}

fn main() {
    let _: appnorth_status = APPNORTH_OK;
    let _: appnorth_status = APPNORTH_E_TIMEOUT;
    let _: appnorth_network_type = APPNORTH_NETWORK_EXPENSIVE_CELLULAR;
    let _: appnorth_consent = APPNORTH_CONSENT_UNKNOWN;
    let _: appnorth_config_tier = APPNORTH_CONFIG_TIER_REMOTE;
    let _: appnorth_log_level = APPNORTH_LOG_ERROR;
    let _: appnorth_read_source = APPNORTH_SOURCE_NETWORK;
    let _: i32 = APPNORTH_OK as appnorth_status;

    unsafe {
        let options = appnorth_client_options_new();
        let mut err: appnorth_error = std::mem::zeroed();
        let rc: i32 = appnorth_client_options_set_api_url(options, b"ftp://nowhere\0".as_ptr() as *const _, &mut err);
        appnorth_client_options_free(options);
        assert!(rc == APPNORTH_E_INVALID_ARGUMENT, "a bad URL gave {}", rc);
        assert!(err.code == rc && err.message[0] != 0);
        let ok: i32 = appnorth_cache_clear(std::ptr::null_mut(), std::ptr::null(), std::ptr::null_mut());
        assert!(ok != APPNORTH_OK);
        assert_eq!(err.message.len(), APPNORTH_ERROR_MESSAGE_SIZE as usize);
        assert_eq!(appnorth_version_number() as u32,
                   APPNORTH_VERSION_MAJOR * 10000 + APPNORTH_VERSION_MINOR * 100 + APPNORTH_VERSION_PATCH);
    }
    println!("bindgen: constants are i32 like appnorth_status; a Rust program over the generated bindings calls the library");
}
