// appnorth.hpp under ASan and UBSan, against the real library and the local
// dev server: the destruction orders and re-entrancy the C API warns about
// are safe through the C++ layer, and errors carry status and HTTP code.
//
//   cpp_layer_test API_URL     (scripts/run-host-examples.sh runs it)
#include <appnorth.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <stdlib.h>

#include "../../examples/c/devserver_admin.h"

namespace {

int passed = 0, failed = 0;

void expect(bool ok, const char *what) {
    if (ok) {
        passed++;
    } else {
        failed++;
        std::printf("FAIL: %s\n", what);
    }
}

/** Counts listener calls; waits on them with a generous deadline. */
struct Counter {
    std::mutex mutex;
    std::condition_variable changed;
    int calls = 0;

    void bump() {
        std::lock_guard<std::mutex> lock(mutex);
        calls++;
        changed.notify_all();
    }
    bool wait_for(int count) {
        std::unique_lock<std::mutex> lock(mutex);
        return changed.wait_for(lock, std::chrono::seconds(30), [&] { return calls >= count; });
    }
    int now() {
        std::lock_guard<std::mutex> lock(mutex);
        return calls;
    }
};

std::string api_url;
int app_number = 0;

void publish(const std::string &app, const char *config_json) {
    std::string path = "/admin/apps/" + app + "/config", body = std::string("{\"config\":") + config_json + "}";
    if (dev_admin(api_url.c_str(), "POST", path.c_str(), body.c_str()) != 201)
        std::printf("note: publishing to %s did not answer 201\n", path.c_str());
}

/** A fresh app on the dev server with a published config. */
std::string new_app(const char *config_json) {
    std::string app = "cpp-layer-" + std::to_string(std::rand()) + "-" + std::to_string(++app_number);
    publish(app, config_json);
    return app;
}

void test_errors_carry_status_and_http_code(const appnorth::Client &client) {
    try {
        client.list_comments("no-such-idea");
        expect(false, "listing comments of a missing idea throws");
    } catch (const appnorth::Error &e) {
        expect(e.status() == APPNORTH_E_NOT_FOUND, "the error's status is APPNORTH_E_NOT_FOUND");
        expect(e.http_status() == 404, "the error's HTTP status is 404");
        expect(std::string(e.what()).size() > 0, "the error has a message");
    }
    try {
        appnorth::Client bad("ftp://nowhere", "x");
        expect(false, "a bad URL throws");
    } catch (const appnorth::Error &e) {
        expect(e.status() == APPNORTH_E_INVALID_ARGUMENT && e.http_status() == 0, "a bad URL is INVALID_ARGUMENT, no HTTP");
    }
}

void test_strings_come_back_as_std_string(const appnorth::Client &client) {
    std::string boards = client.list_boards();
    expect(boards.rfind("{\"boards\":[", 0) == 0, "list_boards returns the JSON text");
}

void test_config_destroyed_before_its_listener(const appnorth::Client &client) {
    std::string app = new_app("{\"v\":1}");
    appnorth::Client own(api_url, app);
    Counter counter;
    appnorth::Config::Listener listener;
    {
        appnorth::Config config(own);
        listener = config.listen([&](const appnorth::ConfigChange &) { counter.bump(); });
        config.refresh();
        expect(counter.wait_for(1), "the listener hears the first remote config");
    }  // the Config goes first: the C config is freed, the Listener still exists
    expect(listener.token() != 0, "the listener still holds its token");
    listener.reset();  // finds the Config gone: nothing to do, nothing touched
    expect(listener.token() == 0, "reset after the Config went is harmless");
    (void)client;
}

void test_listener_removes_itself_from_inside(const appnorth::Client &) {
    std::string app = new_app("{\"v\":1}");
    appnorth::Client own(api_url, app);
    appnorth::Config config(own);
    Counter counter;
    appnorth::Config::Listener self;
    self = config.listen([&](const appnorth::ConfigChange &) {
        counter.bump();
        self.reset();  // from inside its own call: the function stays alive until it returns
    });
    Counter other;
    appnorth::Config::Listener keep = config.listen([&](const appnorth::ConfigChange &) { other.bump(); });
    config.start_live();
    expect(counter.wait_for(1) && other.wait_for(1), "both listeners hear the first config");
    publish(app, "{\"v\":2}");
    expect(other.wait_for(2), "the remaining listener hears the next version");
    expect(counter.now() == 1, "the self-removed listener is not called again");
}

void test_a_throwing_listener_does_not_cross_the_library(const appnorth::Client &) {
    std::string app = new_app("{\"v\":1}");
    appnorth::Client own(api_url, app);
    appnorth::Config config(own);
    Counter counter;
    appnorth::Config::Listener listener = config.listen([&](const appnorth::ConfigChange &change) {
        counter.bump();
        throw std::runtime_error("thrown by a listener: " + change.changed_keys_json);
    });
    config.start_live();
    expect(counter.wait_for(1), "the throwing listener is called");
    publish(app, "{\"v\":2}");
    expect(counter.wait_for(2), "and called again: its exception stopped at the trampoline");
}

void test_moved_config_keeps_its_listeners(const appnorth::Client &) {
    std::string app = new_app("{\"v\":1}");
    appnorth::Client own(api_url, app);
    Counter counter;
    appnorth::Config first(own);
    appnorth::Config::Listener listener = first.listen([&](const appnorth::ConfigChange &) { counter.bump(); });
    appnorth::Config moved(std::move(first));
    moved.refresh();
    expect(counter.wait_for(1), "a moved Config still calls its listener");
    expect(moved.get_int("v") == 1, "and reads its values");
}

void test_listener_destroyed_while_callbacks_run(const appnorth::Client &) {
    // Many listeners removed on this thread while the config thread calls
    // them: every removal waits for a call in flight, so ASan sees no
    // use-after-free.
    std::string app = new_app("{\"v\":0}");
    appnorth::Client own(api_url, app);
    appnorth::Config config(own);
    std::atomic<int> calls{0};
    config.start_live();
    for (int round = 1; round <= 20; round++) {
        appnorth::Config::Listener listener = config.listen([&](const appnorth::ConfigChange &) { calls++; });
        publish(app, round % 2 ? "{\"v\":1}" : "{\"v\":2}");
    }  // each Listener is destroyed at the end of its round, maybe mid-call
    Counter last;
    appnorth::Config::Listener listener = config.listen([&](const appnorth::ConfigChange &) { last.bump(); });
    publish(app, "{\"v\":3}");
    expect(last.wait_for(1), "after 20 listeners came and went mid-update, a new one still hears the next version");
}


/** Adds a dev-server fault for one app's comments on one idea, for `count`
 *  requests. (libcurl resends a request once, on a fresh connection, when a
 *  reused keep-alive connection closes without an answer: a drop on a
 *  reused connection needs a count of 2 to be seen, and clear_faults()
 *  removes what is left.) */
void fault_on_comments(const std::string &app, const std::string &idea, const std::string &what, int count) {
    std::string body = "{" + what + ",\"count\":" + std::to_string(count) + ",\"path_prefix\":\"/v1/apps/" + app + "/ideas/" + idea + "/comments\"}";
    if (dev_admin(api_url.c_str(), "POST", "/admin/faults", body.c_str()) != 201)
        std::printf("note: adding a fault did not answer 201\n");
}

void clear_faults() {
    if (dev_admin(api_url.c_str(), "DELETE", "/admin/faults", nullptr) != 200)
        std::printf("note: clearing the faults did not answer 200\n");
}

void test_flush_names_the_entry_that_stopped_it(const appnorth::Client &) {
    std::string app = new_app("{}");
    appnorth::Client client(api_url, app);
    appnorth::Storage storage = appnorth::Storage::memory();
    appnorth::OfflineQueue queue(storage);
    fault_on_comments(app, "no-such-idea", "\"drop\":true", 2);
    expect(!queue.submit_comment(client, "no-such-idea", "hello"), "a dropped submit is queued (false)");
    clear_faults();
    expect(queue.pending_count() == 1, "one entry pending");
    std::string failed_id;
    try {
        queue.flush(client);
        expect(false, "flushing a comment on a missing idea throws");
    } catch (const appnorth::FlushError &e) {
        failed_id = e.failed_entry_id();
        expect(e.status() == APPNORTH_E_NOT_FOUND && e.http_status() == 404, "FlushError carries the entry's 404");
        expect(e.sent() == 0, "nothing was sent before it");
    }
    expect(!failed_id.empty(), "FlushError names the entry");
    expect(queue.entries().find("\"" + failed_id + "\"") != std::string::npos, "entries() lists it, still pending");
    expect(queue.discard_entry(failed_id), "discard_entry removes it");
    expect(!queue.discard_entry(failed_id), "a second discard_entry finds nothing");
    expect(queue.pending_count() == 0 && queue.flush(client) == 0, "the queue is empty and flushes nothing");

    fault_on_comments(app, "other-idea", "\"drop\":true", 2);
    expect(!queue.submit_comment(client, "other-idea", "again"), "a second dropped submit is queued");
    clear_faults();
    expect(queue.discard(std::nullopt) == 1, "discard(nullopt) removes every entry");
}

void test_cancel_ends_a_held_submit(const appnorth::Client &) {
    std::string app = new_app("{}");
    appnorth::Client client(api_url, app);
    appnorth::Storage storage = appnorth::Storage::memory();
    appnorth::OfflineQueue queue(storage);
    fault_on_comments(app, "held", "\"delay_ms\":20000", 1);
    std::mutex mutex;
    std::condition_variable done_changed;
    bool done = false;
    // Cancels until the submit has returned: a cancel that lands before the
    // request is in flight has nothing to end, so it is repeated.
    std::thread canceller([&] {
        std::unique_lock<std::mutex> lock(mutex);
        while (!done_changed.wait_for(lock, std::chrono::milliseconds(50), [&] { return done; })) client.cancel();
    });
    auto started = std::chrono::steady_clock::now();
    bool submitted = queue.submit_comment(client, "held", "held body");
    auto elapsed = std::chrono::steady_clock::now() - started;
    {
        std::lock_guard<std::mutex> lock(mutex);
        done = true;
    }
    done_changed.notify_all();
    canceller.join();
    expect(!submitted, "a cancelled submit is queued (false)");
    expect(elapsed < std::chrono::seconds(15), "the cancel ended the 20 s hold");
    expect(queue.pending_count() == 1, "the cancelled write stays queued");
}

void test_logger_outlives_its_client(const appnorth::Client &) {
    struct Lines {
        std::mutex mutex;
        std::vector<std::string> lines;
        size_t count() {
            std::lock_guard<std::mutex> lock(mutex);
            return lines.size();
        }
    };
    auto lines = std::make_shared<Lines>();
    char dir_template[] = "/tmp/appnorth-cpp-XXXXXX";
    const char *dir = mkdtemp(dir_template);
    expect(dir != nullptr, "a temporary data directory");
    if (!dir) return;
    appnorth::ClientOptions options;
    options.api_url = api_url;
    options.app_id = new_app("{}");
    options.min_log_level = APPNORTH_LOG_DEBUG;
    options.logger = [lines](appnorth_log_level, const std::string &message) {
        std::lock_guard<std::mutex> lock(lines->mutex);
        lines->lines.push_back(message);
    };
    std::optional<appnorth::Client> client(std::in_place, options);
    appnorth::EventsOptions events_options;
    events_options.data_dir = dir;
    events_options.before_send = [](std::string &event) {
        if (event.find("\"name\":\"cpp_secret\"") != std::string::npos) return false;
        if (event.find("\"name\":\"cpp_throw\"") != std::string::npos) throw std::runtime_error("hook bug");
        return true;
    };
    appnorth::Events events(*client, events_options);
    client.reset();  // the C client is freed; the Events still log through its logger
    size_t before = lines->count();
    std::string session = events.session_id();
    expect(session.size() == 32, "a session id of 32 hex characters");
    expect(events.track("cpp_logger_event"), "track after the client went");
    expect(!events.track("cpp_secret"), "the before_send hook dropped it");
    expect(!events.track("cpp_throw"), "a throwing hook drops the event");
    expect(events.session_id() == session, "the default policy keeps the session");
    events.register_properties("{\"plan\":\"pro\"}");
    events.register_properties("{\"plan\":\"team\"}", true);
    expect(events.super_properties() == "{\"plan\":\"pro\"}", "super properties read back");
    events.unregister_property("plan");
    expect(events.super_properties() == "{}", "unregistered");
    expect(events.flush(30000) >= 1, "the event is uploaded");
    expect(lines->count() > before, "log lines still arrive after the client was destroyed");
    events.close(0);
}

void test_status_listener_and_status(const appnorth::Client &) {
    // A status listener through the C++ layer: valid after the first fetch;
    // a second listener destroyed before its Config is safe (weak state).
    std::string app = new_app("{\"v\":1}");
    appnorth::Client own(api_url, app);
    Counter valid;
    appnorth::Config::Listener outlives;
    {
        appnorth::Config config(own);
        expect(config.status().state == APPNORTH_CONFIG_STATE_INITIALIZING, "a new config is initializing");
        appnorth::Config::Listener listener = config.listen_status([&](const appnorth_data_source_status &s) {
            if (s.state == APPNORTH_CONFIG_STATE_VALID) valid.bump();
        });
        outlives = config.listen_status([](const appnorth_data_source_status &) {});
        config.refresh();
        expect(valid.wait_for(1), "the status listener hears valid");
        appnorth_data_source_status now = config.status();
        expect(now.state == APPNORTH_CONFIG_STATE_VALID && now.since_ms > 0 && now.last_error.code == 0,
               "status() reads valid, no error yet");
    }
    outlives.reset();  // its Config is gone: nothing to remove, no crash
}

void test_events_pending_reads_back_what_was_tracked(const appnorth::Client &) {
    char dir_template[] = "/tmp/appnorth-cpp-XXXXXX";
    const char *dir = mkdtemp(dir_template);
    expect(dir != nullptr, "a temporary data directory");
    if (!dir) return;
    appnorth::Client own(api_url, new_app("{}"));
    appnorth::EventsOptions options;
    options.data_dir = dir;
    appnorth::Events events(own, options);
    events.track("cpp_pending", "{\"price\":9.99}");
    std::string pending = events.pending(10);
    expect(pending.rfind("[{", 0) == 0 && pending.find("\"cpp_pending\"") != std::string::npos &&
               pending.find("\"price\":9.99") != std::string::npos,
           "pending() returns the tracked event as the server would receive it");
    try {
        (void)events.pending(0);
        expect(false, "pending(0) throws");
    } catch (const appnorth::Error &e) {
        expect(e.status() == APPNORTH_E_INVALID_ARGUMENT, "pending(0) is INVALID_ARGUMENT");
    }
    events.close(0);
}

}  // namespace

int main(int argc, char **argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s API_URL\n", argv[0]);
        return 2;
    }
    api_url = argv[1];
    std::srand(static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count()));
    try {
        appnorth::Client client(api_url, "demo");
        test_errors_carry_status_and_http_code(client);
        test_strings_come_back_as_std_string(client);
        test_config_destroyed_before_its_listener(client);
        test_listener_removes_itself_from_inside(client);
        test_a_throwing_listener_does_not_cross_the_library(client);
        test_moved_config_keeps_its_listeners(client);
        test_listener_destroyed_while_callbacks_run(client);
        test_flush_names_the_entry_that_stopped_it(client);
        test_cancel_ends_a_held_submit(client);
        test_logger_outlives_its_client(client);
        test_status_listener_and_status(client);
        test_events_pending_reads_back_what_was_tracked(client);
    } catch (const appnorth::Error &e) {
        std::printf("FAIL: unexpected appnorth::Error %s (HTTP %d): %s\n", e.status_name(), e.http_status(), e.what());
        failed++;
    }
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
