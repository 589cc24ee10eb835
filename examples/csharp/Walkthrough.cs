// The C walkthrough from C# on Mono, in the shape of a Unity MonoBehaviour:
// Start() opens the SDK in dispatch mode, Update() runs once per frame on the
// main thread and calls appnorth_dispatch(), which runs the library's
// callbacks (logger, config listener) right there, on the main thread, as
// Unity's API requires; OnApplicationQuit() frees everything. Boards and ideas, a comment written offline and flushed
// later, events that outlive a lost connection and a restart, remote config
// with a live listener (and the cached copy after a restart), a logger.
//
//     mono walkthrough.exe API_URL APP_ID DATA_DIR
//
// DEV SERVER ONLY: "losing connectivity" asks the local dev server to drop
// every API connection (POST /admin/faults); config versions are published
// through /admin/apps/APP/config. A real API has neither.
using System;
using System.Net.Sockets;
using System.Text;
using System.Threading;
using AOT;
using static AppNorthNative;

public sealed class AppNorthWalkthrough {
    static int configChanges;
    // The delegates the library holds: static, so the GC never collects one
    // while the library can still call it.
    static readonly LogFn logFn = OnLog;
    static readonly ConfigListenerFn listenerFn = OnConfigChanged;

    [MonoPInvokeCallback(typeof(LogFn))]
    static void OnLog(int level, IntPtr message, IntPtr userData) {
        try { Console.WriteLine("   [main thread, log] " + Peek(message)); }
        catch (Exception) { } // an exception must never unwind into the library
    }

    [MonoPInvokeCallback(typeof(ConfigListenerFn))]
    static void OnConfigChanged(IntPtr configJson, IntPtr changedKeys, int tier, IntPtr userData) {
        try {
            Console.WriteLine("   [main thread] config: changed " + Peek(changedKeys) + " -> " + Peek(configJson));
            configChanges++;
        }
        catch (Exception) { }
    }

    readonly string apiUrl, app, dataDir;
    IntPtr client, queue, events, config;
    long listenerToken;

    AppNorthWalkthrough(string apiUrl, string app, string dataDir) {
        this.apiUrl = apiUrl; this.app = app; this.dataDir = dataDir;
    }

    void Start() {
        Console.WriteLine("libappnorth " + Peek(appnorth_version()) + " (C#, P/Invoke on Mono)");
        Error err;
        IntPtr options = appnorth_client_options_new();
        try {
            Check(appnorth_client_options_set_api_url(options, U8(apiUrl), out err), err);
            Check(appnorth_client_options_set_app_id(options, U8(app), out err), err);
            Check(appnorth_client_options_set_logger(options, logFn, APPNORTH_LOG_INFO, IntPtr.Zero, out err), err);
            // Every callback of this client and the handles made with it
            // runs inside appnorth_dispatch(), on the thread that calls it.
            Check(appnorth_client_options_set_dispatch_mode(options, 1, out err), err);
            Check(appnorth_client_new(options, out client, out err), err);
        } finally { appnorth_client_options_free(options); }
    }

    // Runs the frames of one step until `done` holds (20 s at most).
    bool Frames(Func<bool> done) {
        for (int frame = 0; frame < 1200; frame++) {
            Update();
            if (done()) return true;
            Thread.Sleep(16);
        }
        return false;
    }

    // Once per frame: runs what the library queued (nothing pending costs
    // one atomic load).
    void Update() {
        if (client == IntPtr.Zero) return;
        Error err; int ran;
        Check(appnorth_dispatch(client, 0, out ran, out err), err);
    }

    void Boards() {
        Console.WriteLine("1. Boards and ideas");
        Error err; IntPtr json;
        Check(appnorth_client_list_boards(client, out json, out err), err);
        Console.WriteLine("   boards: " + Take(json));
        Check(appnorth_client_list_ideas(client, U8("{\"q\":\"dark\"}"), out json, out err), err);
        Console.WriteLine("   ideas matching \"dark\": " + Take(json));
    }

    bool OfflineComment() {
        Console.WriteLine("2. A comment written offline");
        Error err; IntPtr json, storage;
        Check(appnorth_client_list_ideas(client, U8("{\"q\":\"dark\"}"), out json, out err), err);
        string ideas = Take(json);
        int at = ideas.IndexOf("\"id\":\"") + 6;
        string ideaId = ideas.Substring(at, ideas.IndexOf('"', at) - at);
        Check(appnorth_storage_new_sqlite(U8(dataDir + "/queue"), U8("queue"), out storage, out err), err);
        Check(appnorth_queue_new(storage, 0, out queue, out err), err);
        appnorth_storage_free(storage); // the queue keeps its own reference
        DevAdmin("POST", "/admin/faults", "{\"drop\":true,\"count\":1000}");
        int submitted, sent, pending;
        Check(appnorth_queue_submit_comment(queue, client, U8(ideaId), U8("Yes please, written on a plane ✈"), null,
                                            out submitted, out err), err);
        Check(appnorth_queue_pending_count(queue, out pending, out err), err);
        Console.WriteLine("   sent now: " + (submitted == 1) + ", pending: " + pending);
        DevAdmin("DELETE", "/admin/faults", "");
        Check(appnorth_queue_flush(queue, client, out sent, out err), err);
        Check(appnorth_queue_pending_count(queue, out pending, out err), err);
        Console.WriteLine("   after reconnecting: " + sent + " sent, " + pending + " pending");
        return submitted == 0 && sent == 1 && pending == 0;
    }

    IntPtr OpenEvents() {
        Error err; IntPtr options = appnorth_events_options_new(), handle;
        try {
            Check(appnorth_events_options_set_client(options, client, out err), err);
            Check(appnorth_events_options_set_data_dir(options, U8(dataDir + "/events"), out err), err);
            Check(appnorth_events_new(options, out handle, out err), err);
        } finally { appnorth_events_options_free(options); }
        return handle;
    }

    bool TrackEvents() {
        Console.WriteLine("3. Events that outlive a lost connection and a restart");
        Error err; int queued;
        DevAdmin("POST", "/admin/faults", "{\"drop\":true,\"count\":1000}");
        events = OpenEvents();
        for (int level = 1; level <= 300; level++)
            Check(appnorth_events_track(events, U8("level_completed"), U8("{\"level\":" + level + "}"), out queued, out err), err);
        int rc = appnorth_events_flush(events, 2000, out err);
        Console.WriteLine("   flush while offline: " + Peek(appnorth_status_str(rc)) + " (events kept)");
        appnorth_events_free(events); // "restart": the events stay on disk
        DevAdmin("DELETE", "/admin/faults", "");
        events = OpenEvents();
        Check(appnorth_events_foreground(events, out err), err);
        Check(appnorth_events_flush(events, 10000, out err), err);
        IntPtr json;
        Check(appnorth_events_stats(events, out json, out err), err);
        string stats = Take(json);
        Console.WriteLine("   after restarting online: " + stats);
        return stats.Contains("\"queued\":0");
    }

    IntPtr OpenConfig() {
        Error err; IntPtr options = appnorth_config_options_new(), handle;
        try {
            Check(appnorth_config_options_set_client(options, client, out err), err);
            Check(appnorth_config_options_set_data_dir(options, U8(dataDir + "/config"), out err), err);
            Check(appnorth_config_new(options, out handle, out err), err);
        } finally { appnorth_config_options_free(options); }
        return handle;
    }

    bool RemoteConfig() {
        Console.WriteLine("4. Remote config with a live listener");
        Error err; IntPtr text; double price;
        string path = "/admin/apps/" + app + "/config";
        DevAdmin("POST", path, "{\"config\":{\"theme\":\"dark\",\"price\":9.99}}");
        config = OpenConfig();
        Check(appnorth_config_add_listener(config, listenerFn, IntPtr.Zero, out listenerToken, out err), err);
        Check(appnorth_config_start_live(config, out err), err);
        if (!Frames(() => configChanges >= 1)) return false;
        Check(appnorth_config_get_string(config, U8("theme"), U8("light"), out text, out err), err);
        Console.WriteLine("   theme " + Take(text));
        DevAdmin("POST", path, "{\"config\":{\"theme\":\"dark\",\"price\":7.49}}");
        if (!Frames(() => configChanges >= 2)) return false;
        Check(appnorth_config_get_double(config, U8("price"), 0, out price, out err), err);
        Console.WriteLine("   after a live update: price " + price);
        Check(appnorth_config_remove_listener(config, listenerToken, out err), err);
        appnorth_config_free(config);
        config = IntPtr.Zero;
        // A "restart": opening makes no network call, so it serves the cached copy.
        config = OpenConfig();
        int tier; long fetched;
        Check(appnorth_config_source(config, out tier, out fetched, out err), err);
        Check(appnorth_config_get_double(config, U8("price"), 0, out price, out err), err);
        Console.WriteLine("   after a restart, before any fetch: cached tier " + (tier == APPNORTH_CONFIG_TIER_CACHED) + ", price " + price);
        return tier == APPNORTH_CONFIG_TIER_CACHED && price == 7.49;
    }

    // Frees at quit, handles first and the client last (freeing the client
    // drops the log lines still queued); no callback runs after this.
    void OnApplicationQuit() {
        Update(); // what was queued before the handles close
        appnorth_config_free(config);
        appnorth_events_free(events);
        appnorth_queue_free(queue);
        appnorth_client_free(client);
        config = events = queue = client = IntPtr.Zero;
    }

    void DevAdmin(string method, string path, string body) {
        var hostPort = new Uri(apiUrl);
        byte[] payload = Encoding.UTF8.GetBytes(body);
        string head = method + " " + path + " HTTP/1.1\r\nHost: " + hostPort.Authority + "\r\nContent-Type: application/json\r\n"
                      + "Content-Length: " + payload.Length + "\r\nConnection: close\r\n\r\n";
        using (var tcp = new TcpClient(hostPort.Host, hostPort.Port)) {
            var stream = tcp.GetStream();
            byte[] request = Encoding.ASCII.GetBytes(head);
            stream.Write(request, 0, request.Length);
            stream.Write(payload, 0, payload.Length);
            var reply = new byte[64];
            stream.Read(reply, 0, reply.Length);
        }
    }

    public static int Main(string[] args) {
        if (args.Length != 3) { Console.Error.WriteLine("usage: walkthrough.exe API_URL APP_ID DATA_DIR"); return 2; }
        // The process's exit: no library thread may call a delegate once Mono
        // tears down (docs/hosts.md, "Exit: appnorth_shutdown").
        AppDomain.CurrentDomain.ProcessExit += (sender, e) => { Error err; appnorth_shutdown(2000, out err); };
        var game = new AppNorthWalkthrough(args[0], args[1], args[2]);
        bool ok;
        try {
            game.Start();
            game.Boards();
            ok = game.OfflineComment();
            game.Update();
            ok = game.TrackEvents() && ok;
            game.Update();
            ok = game.RemoteConfig() && ok;
        } finally { game.OnApplicationQuit(); }
        Console.WriteLine(ok ? "all four walkthroughs done" : "a walkthrough did not end as expected");
        return ok ? 0 : 1;
    }
}
