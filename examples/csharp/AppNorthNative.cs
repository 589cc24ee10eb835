// libappnorth's P/Invoke declarations, as a Unity native plugin uses them
// (Assets/Plugins/AppNorthNative.cs beside libappnorth.so). Only the
// functions the walkthrough and Tests/hosts/mono_exit.cs call; Tests/hosts/check_example_decls.py checks
// every line against dist/share/appnorth/appnorth.api.json, so none can drift.
//
// The rules it keeps (docs/hosts.md, "C#"):
//  - every string the library returns is IntPtr, never `string`: the
//    marshaller would free() a returned string, and appnorth_version() and
//    appnorth_status_str() return static ones. Strings from char **out_*
//    are copied by Text() and released with appnorth_string_free;
//  - strings passed in are UTF-8 byte arrays with a NUL (U8()), so the text
//    encoding never depends on the platform's "ANSI" code page;
//  - callbacks are static methods marked [MonoPInvokeCallback] (IL2CPP and
//    Mono AOT need it), whose delegates live in static fields for as long as
//    the library may call them; they catch every exception.
using System;
using System.Runtime.InteropServices;
using System.Text;

namespace AOT {
    // Unity ships this attribute (AOT.MonoPInvokeCallbackAttribute); outside
    // Unity a plugin declares it itself, with the same name.
    [AttributeUsage(AttributeTargets.Method)]
    public sealed class MonoPInvokeCallbackAttribute : Attribute {
        public MonoPInvokeCallbackAttribute(Type type) { }
    }
}

public static class AppNorthNative {
    const string Lib = "appnorth"; // libappnorth.so on Linux and Android

    [StructLayout(LayoutKind.Sequential)]
    public struct Error {
        public int code;
        public int http_status;
        [MarshalAs(UnmanagedType.ByValArray, SizeConst = 256)] public byte[] message; // APPNORTH_ERROR_MESSAGE_SIZE
    }

    public const int APPNORTH_OK = 0;
    public const int APPNORTH_E_TIMEOUT = 16;
    public const int APPNORTH_LOG_INFO = 1;
    public const int APPNORTH_CONFIG_TIER_CACHED = 2;

    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    public delegate void LogFn(int level, IntPtr message, IntPtr userData);
    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    public delegate void ConfigListenerFn(IntPtr configJson, IntPtr changedKeysJson, int tier, IntPtr userData);
    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    public delegate void CompletionFn(ulong op, int status, IntPtr err, IntPtr resultJson, IntPtr userData);

    [DllImport(Lib)] public static extern IntPtr appnorth_version();
    [DllImport(Lib)] public static extern IntPtr appnorth_status_str(int code);
    [DllImport(Lib)] public static extern void appnorth_string_free(IntPtr str);
    [DllImport(Lib)] public static extern int appnorth_shutdown(int timeout_ms, out Error err);

    [DllImport(Lib)] public static extern IntPtr appnorth_client_options_new();
    [DllImport(Lib)] public static extern void appnorth_client_options_free(IntPtr options);
    [DllImport(Lib)] public static extern int appnorth_client_options_set_api_url(IntPtr options, byte[] api_url, out Error err);
    [DllImport(Lib)] public static extern int appnorth_client_options_set_app_id(IntPtr options, byte[] app_id, out Error err);
    [DllImport(Lib)] public static extern int appnorth_client_options_set_logger(IntPtr options, LogFn fn, int min_level, IntPtr user_data, out Error err);
    [DllImport(Lib)] public static extern int appnorth_client_options_set_dispatch_mode(IntPtr options, int enabled, out Error err);
    [DllImport(Lib)] public static extern int appnorth_dispatch(IntPtr client, int max_callbacks, out int out_ran, out Error err);
    [DllImport(Lib)] public static extern int appnorth_client_new(IntPtr options, out IntPtr out_client, out Error err);
    [DllImport(Lib)] public static extern void appnorth_client_free(IntPtr client);
    [DllImport(Lib)] public static extern int appnorth_client_list_boards(IntPtr client, out IntPtr out_json, out Error err);
    [DllImport(Lib)] public static extern int appnorth_client_list_boards_async(IntPtr client, CompletionFn on_done, IntPtr user_data, out ulong out_op, out Error err);
    [DllImport(Lib)] public static extern int appnorth_client_list_ideas(IntPtr client, byte[] query_json, out IntPtr out_json, out Error err);

    [DllImport(Lib)] public static extern int appnorth_storage_new_sqlite(byte[] data_dir, byte[] name, out IntPtr out_storage, out Error err);
    [DllImport(Lib)] public static extern void appnorth_storage_free(IntPtr storage);
    [DllImport(Lib)] public static extern int appnorth_queue_new(IntPtr storage, int max_entries, out IntPtr out_queue, out Error err);
    [DllImport(Lib)] public static extern void appnorth_queue_free(IntPtr queue);
    [DllImport(Lib)] public static extern int appnorth_queue_submit_comment(IntPtr queue, IntPtr client, byte[] idea_id, byte[] body, byte[] idempotency_key, out int out_submitted, out Error err);
    [DllImport(Lib)] public static extern int appnorth_queue_flush(IntPtr queue, IntPtr client, out int out_sent, out Error err);
    [DllImport(Lib)] public static extern int appnorth_queue_pending_count(IntPtr queue, out int out_count, out Error err);

    [DllImport(Lib)] public static extern IntPtr appnorth_events_options_new();
    [DllImport(Lib)] public static extern void appnorth_events_options_free(IntPtr options);
    [DllImport(Lib)] public static extern int appnorth_events_options_set_client(IntPtr options, IntPtr client, out Error err);
    [DllImport(Lib)] public static extern int appnorth_events_options_set_data_dir(IntPtr options, byte[] data_dir, out Error err);
    [DllImport(Lib)] public static extern int appnorth_events_new(IntPtr options, out IntPtr out_events, out Error err);
    [DllImport(Lib)] public static extern void appnorth_events_free(IntPtr events);
    [DllImport(Lib)] public static extern int appnorth_events_track(IntPtr events, byte[] name, byte[] properties_json, out int out_queued, out Error err);
    [DllImport(Lib)] public static extern int appnorth_events_flush(IntPtr events, int timeout_ms, out Error err);
    [DllImport(Lib)] public static extern int appnorth_events_foreground(IntPtr events, out Error err);
    [DllImport(Lib)] public static extern int appnorth_events_stats(IntPtr events, out IntPtr out_json, out Error err);

    [DllImport(Lib)] public static extern IntPtr appnorth_config_options_new();
    [DllImport(Lib)] public static extern void appnorth_config_options_free(IntPtr options);
    [DllImport(Lib)] public static extern int appnorth_config_options_set_client(IntPtr options, IntPtr client, out Error err);
    [DllImport(Lib)] public static extern int appnorth_config_options_set_data_dir(IntPtr options, byte[] data_dir, out Error err);
    [DllImport(Lib)] public static extern int appnorth_config_new(IntPtr options, out IntPtr out_config, out Error err);
    [DllImport(Lib)] public static extern void appnorth_config_free(IntPtr config);
    [DllImport(Lib)] public static extern int appnorth_config_get_string(IntPtr config, byte[] key, byte[] default_value, out IntPtr out_value, out Error err);
    [DllImport(Lib)] public static extern int appnorth_config_get_double(IntPtr config, byte[] key, double default_value, out double out_value, out Error err);
    [DllImport(Lib)] public static extern int appnorth_config_source(IntPtr config, out int out_tier, out long out_fetched_ms, out Error err);
    [DllImport(Lib)] public static extern int appnorth_config_start_live(IntPtr config, out Error err);
    [DllImport(Lib)] public static extern int appnorth_config_add_listener(IntPtr config, ConfigListenerFn fn, IntPtr user_data, out long out_token, out Error err);
    [DllImport(Lib)] public static extern int appnorth_config_remove_listener(IntPtr config, long token, out Error err);

    // ---- marshalling helpers --------------------------------------------

    /// A NUL-terminated UTF-8 copy of s for one call (null stays NULL).
    public static byte[] U8(string s) => s == null ? null : Encoding.UTF8.GetBytes(s + "\0");

    /// UTF-8 text at p, copied; the library's memory is not touched after.
    public static string Peek(IntPtr p) {
        if (p == IntPtr.Zero) return null;
        int n = 0;
        while (Marshal.ReadByte(p, n) != 0) n++;
        var bytes = new byte[n];
        Marshal.Copy(p, bytes, 0, n);
        return Encoding.UTF8.GetString(bytes);
    }

    /// A string from a char **out_* parameter: copied, then released with
    /// appnorth_string_free (the only way to free it).
    public static string Take(IntPtr p) {
        try { return Peek(p); } finally { appnorth_string_free(p); }
    }

    public static void Check(int rc, Error err) {
        if (rc == APPNORTH_OK) return;
        int n = Array.IndexOf(err.message, (byte)0);
        throw new Exception(Peek(appnorth_status_str(rc)) + " (HTTP " + err.http_status + "): "
                            + Encoding.UTF8.GetString(err.message, 0, n < 0 ? err.message.Length : n));
    }
}
