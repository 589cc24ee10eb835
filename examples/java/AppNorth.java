// libappnorth through JNA: the functions the walkthrough calls, as a JNA
// interface. Tests/hosts/check_example_decls.py checks every method against
// dist/share/appnorth/appnorth.api.json, so none can drift.
//
// The rules it keeps (docs/hosts.md, "Java"):
//  - strings are UTF-8 on both sides whatever the locale: the library is
//    loaded with OPTION_STRING_ENCODING "UTF-8" (under LANG=C, JNA would
//    otherwise encode as US-ASCII), and callback text is decoded as UTF-8;
//  - a const char * return (appnorth_version, appnorth_status_str) is static:
//    JNA's String copy is right, nothing is freed; a char **out_* string is
//    a PointerByReference, copied by take() and released with
//    appnorth_string_free;
//  - every Callback the library holds is kept in a field for as long as the
//    library may call it (JNA drops calls to a collected one silently), and
//    gets a CallbackThreadInitializer so a library thread stays attached to
//    the JVM instead of attaching anew for every call.
import com.sun.jna.Callback;
import com.sun.jna.CallbackThreadInitializer;
import com.sun.jna.Library;
import com.sun.jna.Native;
import com.sun.jna.Pointer;
import com.sun.jna.Structure;
import com.sun.jna.ptr.DoubleByReference;
import com.sun.jna.ptr.IntByReference;
import com.sun.jna.ptr.LongByReference;
import com.sun.jna.ptr.PointerByReference;
import java.nio.charset.StandardCharsets;
import java.util.Map;

public interface AppNorth extends Library {
    AppNorth LIB = Native.load("appnorth", AppNorth.class,
                               Map.of(Library.OPTION_STRING_ENCODING, StandardCharsets.UTF_8.name()));

    int APPNORTH_OK = 0;
    int APPNORTH_LOG_INFO = 1;
    int APPNORTH_CONFIG_TIER_CACHED = 2;

    @Structure.FieldOrder({"code", "http_status", "message"})
    class Error extends Structure {
        public int code;
        public int http_status;
        public byte[] message = new byte[256]; // APPNORTH_ERROR_MESSAGE_SIZE
    }

    interface LogFn extends Callback { void invoke(int level, Pointer message, Pointer userData); }
    interface ConfigListenerFn extends Callback {
        void invoke(Pointer configJson, Pointer changedKeysJson, int tier, Pointer userData);
    }

    String appnorth_version();
    String appnorth_status_str(int code);
    void appnorth_string_free(Pointer str);
    int appnorth_shutdown(int timeout_ms, Error err);

    Pointer appnorth_client_options_new();
    void appnorth_client_options_free(Pointer options);
    int appnorth_client_options_set_api_url(Pointer options, String api_url, Error err);
    int appnorth_client_options_set_app_id(Pointer options, String app_id, Error err);
    int appnorth_client_options_set_logger(Pointer options, LogFn fn, int min_level, Pointer user_data, Error err);
    int appnorth_client_new(Pointer options, PointerByReference out_client, Error err);
    void appnorth_client_free(Pointer client);
    int appnorth_client_list_boards(Pointer client, PointerByReference out_json, Error err);
    int appnorth_client_list_ideas(Pointer client, String query_json, PointerByReference out_json, Error err);

    int appnorth_storage_new_sqlite(String data_dir, String name, PointerByReference out_storage, Error err);
    void appnorth_storage_free(Pointer storage);
    int appnorth_queue_new(Pointer storage, int max_entries, PointerByReference out_queue, Error err);
    void appnorth_queue_free(Pointer queue);
    int appnorth_queue_submit_comment(Pointer queue, Pointer client, String idea_id, String body,
                                      String idempotency_key, IntByReference out_submitted, Error err);
    int appnorth_queue_flush(Pointer queue, Pointer client, IntByReference out_sent, Error err);
    int appnorth_queue_pending_count(Pointer queue, IntByReference out_count, Error err);

    Pointer appnorth_events_options_new();
    void appnorth_events_options_free(Pointer options);
    int appnorth_events_options_set_client(Pointer options, Pointer client, Error err);
    int appnorth_events_options_set_data_dir(Pointer options, String data_dir, Error err);
    int appnorth_events_new(Pointer options, PointerByReference out_events, Error err);
    void appnorth_events_free(Pointer events);
    int appnorth_events_track(Pointer events, String name, String properties_json, IntByReference out_queued, Error err);
    int appnorth_events_flush(Pointer events, int timeout_ms, Error err);
    int appnorth_events_foreground(Pointer events, Error err);
    int appnorth_events_stats(Pointer events, PointerByReference out_json, Error err);

    Pointer appnorth_config_options_new();
    void appnorth_config_options_free(Pointer options);
    int appnorth_config_options_set_client(Pointer options, Pointer client, Error err);
    int appnorth_config_options_set_data_dir(Pointer options, String data_dir, Error err);
    int appnorth_config_new(Pointer options, PointerByReference out_config, Error err);
    void appnorth_config_free(Pointer config);
    int appnorth_config_get_string(Pointer config, String key, String default_value, PointerByReference out_value, Error err);
    int appnorth_config_get_double(Pointer config, String key, double default_value, DoubleByReference out_value, Error err);
    int appnorth_config_source(Pointer config, IntByReference out_tier, LongByReference out_fetched_ms, Error err);
    int appnorth_config_start_live(Pointer config, Error err);
    int appnorth_config_add_listener(Pointer config, ConfigListenerFn fn, Pointer user_data, LongByReference out_token, Error err);
    int appnorth_config_remove_listener(Pointer config, long token, Error err);

    // ---- helpers -----------------------------------------------------------

    /** UTF-8 text the library lends for a call (a callback argument). */
    static String peek(Pointer p) { return p == null ? null : p.getString(0, "UTF-8"); }

    /** A char **out_* string: copied, then released with appnorth_string_free. */
    static String take(PointerByReference ref) {
        Pointer p = ref.getValue();
        try { return peek(p); } finally { LIB.appnorth_string_free(p); }
    }

    /** Keeps a library thread attached to the JVM between callbacks. */
    static <T extends Callback> T attached(T callback) {
        Native.setCallbackThreadInitializer(callback, new CallbackThreadInitializer(true, false, "appnorth-callback"));
        return callback;
    }

    static void check(int rc, Error err) {
        if (rc == APPNORTH_OK) return;
        int n = 0;
        while (n < err.message.length && err.message[n] != 0) n++;
        throw new IllegalStateException(LIB.appnorth_status_str(rc) + " (HTTP " + err.http_status + "): "
                                        + new String(err.message, 0, n, StandardCharsets.UTF_8));
    }
}
