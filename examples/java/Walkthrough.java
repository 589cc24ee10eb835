// The C walkthrough from Java through JNA: boards and ideas, a comment
// written offline and flushed later, events that outlive a lost connection
// and a restart, remote config with a live listener (and the cached copy
// after a restart), a logger, and every handle freed before exit.
//
//     java -cp build/examples/java:/usr/share/java/jna.jar -Djna.library.path=dist/lib \
//         Walkthrough API_URL APP_ID DATA_DIR
//
// DEV SERVER ONLY: "losing connectivity" asks the local dev server to drop
// every API connection (POST /admin/faults); config versions are published
// through /admin/apps/APP/config. A real API has neither.
import com.sun.jna.Pointer;
import com.sun.jna.ptr.DoubleByReference;
import com.sun.jna.ptr.IntByReference;
import com.sun.jna.ptr.LongByReference;
import com.sun.jna.ptr.PointerByReference;
import java.net.HttpURLConnection;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

public final class Walkthrough {
    static final AppNorth lib = AppNorth.LIB;
    static final BlockingQueue<String> configChanges = new LinkedBlockingQueue<>();

    // Held in static fields: the library keeps the function pointers until
    // the client (logger) or the listener is gone, and JNA would silently
    // drop calls to a Callback the GC has collected.
    static final AppNorth.LogFn LOGGER = AppNorth.attached((level, message, userData) -> {
        System.out.println("   [log] " + AppNorth.peek(message));
    });
    static final AppNorth.ConfigListenerFn LISTENER = AppNorth.attached((json, changed, tier, userData) -> {
        System.out.println("   listener: changed " + AppNorth.peek(changed) + " -> " + AppNorth.peek(json));
        configChanges.add(AppNorth.peek(json));
    });

    final String apiUrl, app, dataDir;
    final AppNorth.Error err = new AppNorth.Error();
    Pointer client;

    Walkthrough(String apiUrl, String app, String dataDir) { this.apiUrl = apiUrl; this.app = app; this.dataDir = dataDir; }

    void devAdmin(String method, String path, String body) throws Exception {
        HttpURLConnection http = (HttpURLConnection) new URL(apiUrl + path).openConnection();
        http.setRequestMethod(method);
        http.setRequestProperty("Content-Type", "application/json");
        if (!body.isEmpty()) {
            http.setDoOutput(true);
            http.getOutputStream().write(body.getBytes(StandardCharsets.UTF_8));
        }
        http.getResponseCode();
        http.disconnect();
    }

    void openClient() {
        Pointer options = lib.appnorth_client_options_new();
        try {
            AppNorth.check(lib.appnorth_client_options_set_api_url(options, apiUrl, err), err);
            AppNorth.check(lib.appnorth_client_options_set_app_id(options, app, err), err);
            AppNorth.check(lib.appnorth_client_options_set_logger(options, LOGGER, AppNorth.APPNORTH_LOG_INFO, null, err), err);
            PointerByReference out = new PointerByReference();
            AppNorth.check(lib.appnorth_client_new(options, out, err), err);
            client = out.getValue();
        } finally { lib.appnorth_client_options_free(options); }
    }

    String ideas() {
        PointerByReference json = new PointerByReference();
        AppNorth.check(lib.appnorth_client_list_ideas(client, "{\"q\":\"dark\"}", json, err), err);
        return AppNorth.take(json);
    }

    void boards() {
        System.out.println("1. Boards and ideas");
        PointerByReference json = new PointerByReference();
        AppNorth.check(lib.appnorth_client_list_boards(client, json, err), err);
        System.out.println("   boards: " + AppNorth.take(json));
        System.out.println("   ideas matching \"dark\": " + ideas());
    }

    boolean offlineComment() throws Exception {
        System.out.println("2. A comment written offline");
        String ideas = ideas();
        int at = ideas.indexOf("\"id\":\"") + 6;
        String ideaId = ideas.substring(at, ideas.indexOf('"', at));
        PointerByReference out = new PointerByReference();
        AppNorth.check(lib.appnorth_storage_new_sqlite(dataDir + "/queue", "queue", out, err), err);
        Pointer storage = out.getValue();
        AppNorth.check(lib.appnorth_queue_new(storage, 0, out, err), err);
        Pointer queue = out.getValue();
        lib.appnorth_storage_free(storage); // the queue keeps its own reference
        try {
            devAdmin("POST", "/admin/faults", "{\"drop\":true,\"count\":1000}");
            IntByReference submitted = new IntByReference(), sent = new IntByReference(), pending = new IntByReference();
            AppNorth.check(lib.appnorth_queue_submit_comment(queue, client, ideaId, "Oui, écrit dans l'avion ✈", null,
                                                             submitted, err), err);
            AppNorth.check(lib.appnorth_queue_pending_count(queue, pending, err), err);
            System.out.println("   sent now: " + (submitted.getValue() == 1) + ", pending: " + pending.getValue());
            devAdmin("DELETE", "/admin/faults", "");
            AppNorth.check(lib.appnorth_queue_flush(queue, client, sent, err), err);
            AppNorth.check(lib.appnorth_queue_pending_count(queue, pending, err), err);
            System.out.println("   after reconnecting: " + sent.getValue() + " sent, " + pending.getValue() + " pending");
            return submitted.getValue() == 0 && sent.getValue() == 1 && pending.getValue() == 0;
        } finally { lib.appnorth_queue_free(queue); }
    }

    Pointer openEvents() {
        Pointer options = lib.appnorth_events_options_new();
        try {
            AppNorth.check(lib.appnorth_events_options_set_client(options, client, err), err);
            AppNorth.check(lib.appnorth_events_options_set_data_dir(options, dataDir + "/events", err), err);
            PointerByReference out = new PointerByReference();
            AppNorth.check(lib.appnorth_events_new(options, out, err), err);
            return out.getValue();
        } finally { lib.appnorth_events_options_free(options); }
    }

    boolean trackEvents() throws Exception {
        System.out.println("3. Events that outlive a lost connection and a restart");
        devAdmin("POST", "/admin/faults", "{\"drop\":true,\"count\":1000}");
        Pointer events = openEvents();
        IntByReference queued = new IntByReference();
        for (int level = 1; level <= 300; level++)
            AppNorth.check(lib.appnorth_events_track(events, "level_completed", "{\"level\":" + level + "}", queued, err), err);
        int rc = lib.appnorth_events_flush(events, 2000, err);
        System.out.println("   flush while offline: " + lib.appnorth_status_str(rc) + " (events kept)");
        lib.appnorth_events_free(events); // "restart": the events stay on disk
        devAdmin("DELETE", "/admin/faults", "");
        events = openEvents();
        try {
            AppNorth.check(lib.appnorth_events_foreground(events, err), err);
            AppNorth.check(lib.appnorth_events_flush(events, 10000, err), err);
            PointerByReference json = new PointerByReference();
            AppNorth.check(lib.appnorth_events_stats(events, json, err), err);
            String stats = AppNorth.take(json);
            System.out.println("   after restarting online: " + stats);
            return stats.contains("\"queued\":0");
        } finally { lib.appnorth_events_free(events); }
    }

    Pointer openConfig() {
        Pointer options = lib.appnorth_config_options_new();
        try {
            AppNorth.check(lib.appnorth_config_options_set_client(options, client, err), err);
            AppNorth.check(lib.appnorth_config_options_set_data_dir(options, dataDir + "/config", err), err);
            PointerByReference out = new PointerByReference();
            AppNorth.check(lib.appnorth_config_new(options, out, err), err);
            return out.getValue();
        } finally { lib.appnorth_config_options_free(options); }
    }

    boolean remoteConfig() throws Exception {
        System.out.println("4. Remote config with a live listener");
        String path = "/admin/apps/" + app + "/config";
        devAdmin("POST", path, "{\"config\":{\"theme\":\"dark\",\"price\":9.99}}");
        Pointer config = openConfig();
        DoubleByReference price = new DoubleByReference();
        try {
            LongByReference token = new LongByReference();
            AppNorth.check(lib.appnorth_config_add_listener(config, LISTENER, null, token, err), err);
            AppNorth.check(lib.appnorth_config_start_live(config, err), err);
            if (configChanges.poll(20, TimeUnit.SECONDS) == null) return false;
            PointerByReference theme = new PointerByReference();
            AppNorth.check(lib.appnorth_config_get_string(config, "theme", "light", theme, err), err);
            System.out.println("   theme " + AppNorth.take(theme));
            devAdmin("POST", path, "{\"config\":{\"theme\":\"dark\",\"price\":7.49}}");
            if (configChanges.poll(20, TimeUnit.SECONDS) == null) return false;
            AppNorth.check(lib.appnorth_config_get_double(config, "price", 0, price, err), err);
            System.out.println("   after a live update: price " + price.getValue());
            AppNorth.check(lib.appnorth_config_remove_listener(config, token.getValue(), err), err);
        } finally { lib.appnorth_config_free(config); } // waits for a listener call in flight
        config = openConfig(); // a "restart": opening makes no network call
        try {
            IntByReference tier = new IntByReference();
            AppNorth.check(lib.appnorth_config_source(config, tier, new LongByReference(), err), err);
            AppNorth.check(lib.appnorth_config_get_double(config, "price", 0, price, err), err);
            boolean cached = tier.getValue() == AppNorth.APPNORTH_CONFIG_TIER_CACHED;
            System.out.println("   after a restart, before any fetch: cached tier " + cached + ", price " + price.getValue());
            return cached && price.getValue() == 7.49;
        } finally { lib.appnorth_config_free(config); }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 3) { System.err.println("usage: Walkthrough API_URL APP_ID DATA_DIR"); System.exit(2); }
        // The JVM's exit: no library thread calls a Callback after it
        // (docs/hosts.md, "Exit: appnorth_shutdown").
        Runtime.getRuntime().addShutdownHook(new Thread(() -> lib.appnorth_shutdown(2000, null)));
        Walkthrough w = new Walkthrough(args[0], args[1], args[2]);
        System.out.println("libappnorth " + lib.appnorth_version() + " (Java, JNA)");
        w.openClient();
        boolean ok;
        try {
            w.boards();
            ok = w.offlineComment();
            ok = w.trackEvents() && ok;
            ok = w.remoteConfig() && ok;
        } finally { lib.appnorth_client_free(w.client); } // last: the other handles are freed
        System.out.println(ok ? "all four walkthroughs done" : "a walkthrough did not end as expected");
        System.exit(ok ? 0 : 1);
    }
}
