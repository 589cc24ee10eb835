/*
 * appnorth.hpp - a header-only C++17 face for libappnorth (appnorth.h).
 *
 * It adds no behaviour; it makes the C API's rules hard to get wrong:
 *
 *  - Handles are move-only RAII objects: appnorth::Client, Storage,
 *    OfflineQueue, Events, Config. Destroying one frees its C handle.
 *  - Strings the library returns become std::string; the C string is released
 *    with appnorth_string_free() at once, so the two free rules never meet.
 *  - A failed call throws appnorth::Error, carrying the status
 *    (APPNORTH_E_*), the HTTP status (0 without one) and the message. A
 *    queue flush stopped by an entry throws appnorth::FlushError, which also
 *    names that entry, so it can be inspected or discarded.
 *  - The client's logger is a std::function, kept alive by the Client and
 *    by every Events and Config made with it (the C API's rule that the
 *    logger outlives all of them is kept for you).
 *  - Config listeners are std::function. Config::listen() returns a
 *    Config::Listener; destroying or reset()ing it removes the listener
 *    (waiting for a call in flight, as appnorth_config_remove_listener()
 *    does). The listener functions belong to the Config, and a Listener only
 *    holds a weak reference to it, so the two may be destroyed in either
 *    order, on any thread, or from inside the listener itself: the
 *    "config freed before its listener objects" hazard of the C API cannot
 *    happen.
 *
 * Threads: as in appnorth.h. Every object may be used from several threads
 * at once, except that moving or destroying an object races with using it
 * (as for any C++ object). Listeners run on the config's background thread
 * (or a thread calling refresh()); an exception a listener throws cannot
 * cross the C library, so it is caught and dropped.
 *
 * Link with -lappnorth (pkg-config appnorth, or CMake appnorth::appnorth).
 */
#ifndef APPNORTH_HPP
#define APPNORTH_HPP

#include <appnorth.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

namespace appnorth {

/** A failed call: status() is an APPNORTH_E_* code, http_status() the
 *  server's HTTP status or 0, what() the library's message. */
class Error : public std::runtime_error {
public:
    Error(appnorth_status status, int32_t http_status, const std::string &message)
        : std::runtime_error(message), status_(status), http_status_(http_status) {}
    appnorth_status status() const noexcept { return status_; }
    int32_t http_status() const noexcept { return http_status_; }
    /** The status's name, for instance "network error". */
    const char *status_name() const noexcept { return appnorth_status_str(status_); }

private:
    appnorth_status status_;
    int32_t http_status_;
};

/** A queue flush stopped by one entry's error (see
 *  appnorth_queue_flush_v2()): the status and message are that entry's,
 *  failed_entry_id() names it (it stays pending), sent() counts the entries
 *  sent before it. */
class FlushError : public Error {
public:
    FlushError(const Error &error, std::string failed_entry_id, int32_t sent)
        : Error(error), failed_entry_id_(std::move(failed_entry_id)), sent_(sent) {}
    const std::string &failed_entry_id() const noexcept { return failed_entry_id_; }
    int32_t sent() const noexcept { return sent_; }

private:
    std::string failed_entry_id_;
    int32_t sent_;
};

/** The library's version, "MAJOR.MINOR.PATCH". */
inline std::string version() { return appnorth_version(); }

namespace detail {

/** The Error for a failed status; err was filled by the same call. */
inline Error make_error(appnorth_status status, const appnorth_error &err) {
    std::string message = err.message[0] ? err.message : appnorth_status_str(status);
    return Error(status, err.http_status, message);
}

/** Throws Error for a failed status; err was filled by the same call. */
inline void check(appnorth_status status, const appnorth_error &err) {
    if (status != APPNORTH_OK) throw make_error(status, err);
}

/** Takes ownership of a library string: copies it, then releases it with
 *  appnorth_string_free(). NULL (no value) becomes std::nullopt. */
inline std::optional<std::string> take_optional(char *str) {
    std::unique_ptr<char, void (*)(char *)> owned(str, appnorth_string_free);
    if (!owned) return std::nullopt;
    return std::string(owned.get());
}

inline std::string take(char *str) { return take_optional(str).value_or(std::string()); }

/** NULL for an absent optional string argument. */
inline const char *c_str_or_null(const std::optional<std::string> &s) {
    return s ? s->c_str() : nullptr;
}

/** A move-only owner of one C handle, freed by Free. */
template <typename T, void (*Free)(T *)>
class Handle {
public:
    Handle() = default;
    explicit Handle(T *raw) : raw_(raw) {}
    Handle(Handle &&other) noexcept : raw_(std::exchange(other.raw_, nullptr)) {}
    Handle &operator=(Handle &&other) noexcept {
        if (this != &other) {
            Free(raw_);
            raw_ = std::exchange(other.raw_, nullptr);
        }
        return *this;
    }
    Handle(const Handle &) = delete;
    Handle &operator=(const Handle &) = delete;
    ~Handle() { Free(raw_); }
    T *get() const noexcept { return raw_; }

private:
    T *raw_ = nullptr;
};

/** Runs a C call that takes `appnorth_error *` last and throws on failure. */
template <typename Fn>
inline void call(Fn &&fn) {
    appnorth_error err;
    appnorth_status status = fn(&err);
    check(status, err);
}

}  // namespace detail

/** A log line's receiver: level is APPNORTH_LOG_*. It runs on whichever
 *  thread logs (a caller's, the upload or config thread), possibly several
 *  at once; an exception it throws is caught and dropped. */
using LogFn = std::function<void(appnorth_log_level level, const std::string &message)>;

namespace detail {

/** Owns the host's LogFn for the C logger's user_data. Shared by the
 *  Client and every handle made with it, so it outlives them all. */
struct LogSink {
    LogFn fn;

    static void trampoline(int32_t level, const char *message, void *user_data) noexcept {
        try {
            static_cast<LogSink *>(user_data)->fn(level, message ? message : "");
        } catch (...) {
            /* An exception must not unwind through the C library. */
        }
    }
};

}  // namespace detail

/** Options for Client; the defaults are appnorth.h's. */
struct ClientOptions {
    std::string api_url;                 /* required */
    std::string app_id;                  /* required */
    std::optional<std::string> email;    /* with token: an identified user */
    std::optional<std::string> token;
    int32_t api_request_timeout_ms = 30000;
    int32_t resource_download_timeout_ms = 60000;
    LogFn logger;                        /* empty: no logging (the default) */
    appnorth_log_level min_log_level = APPNORTH_LOG_INFO;
};

/** A connection to one AppNorth API for one App ID and identity. */
class Client {
public:
    explicit Client(const ClientOptions &options) {
        detail::Handle<appnorth_client_options, appnorth_client_options_free> opts(
            appnorth_client_options_new());
        if (!opts.get()) throw std::bad_alloc();
        detail::call([&](appnorth_error *e) {
            return appnorth_client_options_set_api_url(opts.get(), options.api_url.c_str(), e);
        });
        detail::call([&](appnorth_error *e) {
            return appnorth_client_options_set_app_id(opts.get(), options.app_id.c_str(), e);
        });
        if (options.email || options.token) {
            detail::call([&](appnorth_error *e) {
                return appnorth_client_options_set_credential(
                    opts.get(), detail::c_str_or_null(options.email),
                    detail::c_str_or_null(options.token), e);
            });
        }
        detail::call([&](appnorth_error *e) {
            return appnorth_client_options_set_timeouts(opts.get(), options.api_request_timeout_ms,
                                                        options.resource_download_timeout_ms, e);
        });
        if (options.logger) {
            log_sink_ = std::make_shared<detail::LogSink>(detail::LogSink{options.logger});
            detail::call([&](appnorth_error *e) {
                return appnorth_client_options_set_logger(opts.get(), detail::LogSink::trampoline,
                                                          options.min_log_level, log_sink_.get(), e);
            });
        }
        appnorth_client *raw = nullptr;
        detail::call([&](appnorth_error *e) { return appnorth_client_new(opts.get(), &raw, e); });
        handle_ = Handle(raw);
    }

    Client(const std::string &api_url, const std::string &app_id) : Client(options_for(api_url, app_id)) {}

    /** {"boards":[...]} */
    std::string list_boards() const {
        return json_call([&](char **out, appnorth_error *e) {
            return appnorth_client_list_boards(get(), out, e);
        });
    }

    /** {"ideas":[...],"next_cursor":...}; query_json as for
     *  appnorth_client_list_ideas(), empty for none. */
    std::string list_ideas(const std::string &query_json = std::string()) const {
        return json_call([&](char **out, appnorth_error *e) {
            return appnorth_client_list_ideas(get(), query_json.empty() ? nullptr : query_json.c_str(),
                                              out, e);
        });
    }

    /** An idea's comments: {"comments":[...]}. */
    std::string list_comments(const std::string &idea_id) const {
        return json_call([&](char **out, appnorth_error *e) {
            return appnorth_client_list_comments(get(), idea_id.c_str(), out, e);
        });
    }

    /** The account scope string (see appnorth_client_scope()). */
    std::string scope() const {
        return json_call([&](char **out, appnorth_error *e) { return appnorth_client_scope(get(), out, e); });
    }

    /** Ends the client's requests in flight now, from any thread (see
     *  appnorth_client_cancel()): a cancelled call throws Error with
     *  APPNORTH_E_CANCELLED, a cancelled queue submit queues its write. */
    void cancel() const {
        detail::call([&](appnorth_error *e) { return appnorth_client_cancel(get(), e); });
    }

    appnorth_client *get() const noexcept { return handle_.get(); }

    /** The logger's owner, held by the handles made with this client. */
    const std::shared_ptr<detail::LogSink> &log_sink() const noexcept { return log_sink_; }

private:
    using Handle = detail::Handle<appnorth_client, appnorth_client_free>;

    static ClientOptions options_for(const std::string &api_url, const std::string &app_id) {
        ClientOptions options;
        options.api_url = api_url;
        options.app_id = app_id;
        return options;
    }

    template <typename Fn>
    static std::string json_call(Fn &&fn) {
        char *out = nullptr;
        appnorth_error err;
        appnorth_status status = fn(&out, &err);
        std::string text = detail::take(out);
        detail::check(status, err);
        return text;
    }

    /* Declared first, so it is released after the C client is freed. */
    std::shared_ptr<detail::LogSink> log_sink_;
    Handle handle_;
};

/** Where the offline queue keeps its entries. */
class Storage {
public:
    /** A SQLite file `name` in data_dir (created 0700). */
    static Storage sqlite(const std::string &data_dir, const std::string &name) {
        appnorth_storage *raw = nullptr;
        detail::call([&](appnorth_error *e) {
            return appnorth_storage_new_sqlite(data_dir.c_str(), name.c_str(), &raw, e);
        });
        return Storage(raw);
    }

    /** Memory only: lost when the last user frees it. */
    static Storage memory() {
        appnorth_storage *raw = nullptr;
        detail::call([&](appnorth_error *e) { return appnorth_storage_new_memory(&raw, e); });
        return Storage(raw);
    }

    /** Erase what the storage holds (logout). */
    void erase() {
        detail::call([&](appnorth_error *e) { return appnorth_storage_erase(get(), e); });
    }

    appnorth_storage *get() const noexcept { return handle_.get(); }

private:
    explicit Storage(appnorth_storage *raw) : handle_(raw) {}
    detail::Handle<appnorth_storage, appnorth_storage_free> handle_;
};

/** Community writes that are sent now, or stored and sent by flush(). */
class OfflineQueue {
public:
    explicit OfflineQueue(const Storage &storage, int32_t max_entries = APPNORTH_QUEUE_DEFAULT_LIMIT) {
        appnorth_queue *raw = nullptr;
        detail::call([&](appnorth_error *e) {
            return appnorth_queue_new(storage.get(), max_entries, &raw, e);
        });
        handle_ = Handle(raw);
    }

    /** Returns true if sent now, false if queued after a network failure. */
    bool submit_idea(const Client &client, const std::string &board_id, const std::string &title,
                     const std::string &body,
                     const std::optional<std::string> &idempotency_key = std::nullopt) {
        int32_t submitted = 0;
        detail::call([&](appnorth_error *e) {
            return appnorth_queue_submit_idea(get(), client.get(), board_id.c_str(), title.c_str(), body.c_str(),
                                              detail::c_str_or_null(idempotency_key), &submitted, e);
        });
        return submitted != 0;
    }

    /** Returns true if sent now, false if queued after a network failure. */
    bool submit_comment(const Client &client, const std::string &idea_id, const std::string &body,
                        const std::optional<std::string> &idempotency_key = std::nullopt) {
        int32_t submitted = 0;
        detail::call([&](appnorth_error *e) {
            return appnorth_queue_submit_comment(get(), client.get(), idea_id.c_str(), body.c_str(),
                                                 detail::c_str_or_null(idempotency_key), &submitted, e);
        });
        return submitted != 0;
    }

    /** Sends what is pending for the client's account; returns how many
     *  went (a network failure stops it quietly). An entry the server
     *  refuses stops it with FlushError, which names that entry. */
    int32_t flush(const Client &client) {
        int32_t sent = 0;
        char *failed = nullptr;
        appnorth_error err;
        appnorth_status status = appnorth_queue_flush_v2(get(), client.get(), &sent, &failed, &err);
        std::optional<std::string> failed_id = detail::take_optional(failed);
        if (status == APPNORTH_OK) return sent;
        if (failed_id) throw FlushError(detail::make_error(status, err), *failed_id, sent);
        throw detail::make_error(status, err);
    }

    int32_t pending_count() const {
        int32_t count = 0;
        detail::call([&](appnorth_error *e) { return appnorth_queue_pending_count(get(), &count, e); });
        return count;
    }

    /** The pending entries as JSON (see appnorth_queue_entries()). */
    std::string entries() const {
        char *out = nullptr;
        appnorth_error err;
        appnorth_status status = appnorth_queue_entries(get(), &out, &err);
        std::string text = detail::take(out);
        detail::check(status, err);
        return text;
    }

    /** Discards one scope's entries (std::nullopt: every entry), for
     *  logout; returns how many. */
    int32_t discard(const std::optional<std::string> &scope) {
        int32_t discarded = 0;
        detail::call([&](appnorth_error *e) {
            return appnorth_queue_discard(get(), detail::c_str_or_null(scope), &discarded, e);
        });
        return discarded;
    }

    /** Discards one entry (an id from entries() or FlushError); false when
     *  no pending entry has that id any more. */
    bool discard_entry(const std::string &entry_id) {
        int32_t discarded = 0;
        detail::call([&](appnorth_error *e) {
            return appnorth_queue_discard_entry(get(), entry_id.c_str(), &discarded, e);
        });
        return discarded != 0;
    }

    appnorth_queue *get() const noexcept { return handle_.get(); }

private:
    using Handle = detail::Handle<appnorth_queue, appnorth_queue_free>;
    Handle handle_;
};

/** Options for Events; zero or empty means appnorth.h's default. */
struct EventsOptions {
    std::string data_dir;              /* required */
    int32_t flush_interval_ms = 30000;
    int32_t batch_threshold = 20;
    bool require_consent = false;
    /* Automatic sessions (appnorth_events_options_set_session_policy());
     * 0 turns a rotation off. */
    int32_t session_idle_timeout_ms = 1800000;
    int32_t session_max_length_ms = 86400000;
    double sample_rate = 1.0;          /* share of installs that track, 0 to 1 */
    bool remote_settings = true;       /* follow the config key "appnorth.events" */
    /* The before_send hook (appnorth_events_options_set_before_send()): called
     * inside track() with the event's JSON, which it may change; false drops
     * the event, true keeps it (changed: stored as changed). An exception
     * drops it too (fails closed). Empty: no hook. */
    std::function<bool(std::string &event_json)> before_send;
};

/** The analytics event queue. */
class Events {
public:
    Events(const Client &client, const EventsOptions &options) : log_sink_(client.log_sink()) {
        detail::Handle<appnorth_events_options, appnorth_events_options_free> opts(
            appnorth_events_options_new());
        if (!opts.get()) throw std::bad_alloc();
        detail::call([&](appnorth_error *e) {
            return appnorth_events_options_set_client(opts.get(), client.get(), e);
        });
        detail::call([&](appnorth_error *e) {
            return appnorth_events_options_set_data_dir(opts.get(), options.data_dir.c_str(), e);
        });
        detail::call([&](appnorth_error *e) {
            return appnorth_events_options_set_flush_policy(opts.get(), options.flush_interval_ms,
                                                            options.batch_threshold, e);
        });
        detail::call([&](appnorth_error *e) {
            return appnorth_events_options_set_require_consent(opts.get(), options.require_consent ? 1 : 0, e);
        });
        detail::call([&](appnorth_error *e) {
            return appnorth_events_options_set_session_policy(opts.get(), options.session_idle_timeout_ms,
                                                              options.session_max_length_ms, e);
        });
        detail::call([&](appnorth_error *e) {
            return appnorth_events_options_set_sample_rate(opts.get(), options.sample_rate, e);
        });
        detail::call([&](appnorth_error *e) {
            return appnorth_events_options_set_remote_settings(opts.get(), options.remote_settings ? 1 : 0, e);
        });
        if (options.before_send) {
            /* Owned by the library from here: release_hook deletes it. */
            auto *hook = new std::function<bool(std::string &)>(options.before_send);
            appnorth_error err;
            appnorth_status status =
                appnorth_events_options_set_before_send(opts.get(), &Events::before_send_thunk, hook, &Events::release_hook, &err);
            if (status != APPNORTH_OK) delete hook;
            detail::check(status, err);
        }
        appnorth_events *raw = nullptr;
        detail::call([&](appnorth_error *e) { return appnorth_events_new(opts.get(), &raw, e); });
        handle_ = Handle(raw);
    }

    /** Stores the event durably; false when consent was revoked (dropped).
     *  properties_json: a JSON object, sent as written; empty for none. */
    bool track(const std::string &name, const std::string &properties_json = std::string()) {
        int32_t queued = 0;
        detail::call([&](appnorth_error *e) {
            return appnorth_events_track(get(), name.c_str(),
                                         properties_json.empty() ? nullptr : properties_json.c_str(),
                                         &queued, e);
        });
        return queued != 0;
    }

    /** Uploads what waits, for at most timeout_ms; returns how many events
     *  the server accepted meanwhile. */
    int64_t flush(int32_t timeout_ms) {
        int64_t sent = 0;
        detail::call([&](appnorth_error *e) { return appnorth_events_flush_sent(get(), timeout_ms, &sent, e); });
        return sent;
    }

    /** The app came to the foreground: uploads resume and a flush starts. */
    void foreground() {
        detail::call([&](appnorth_error *e) { return appnorth_events_foreground(get(), e); });
    }

    /** A new app session: new session id; uploads resume if paused. */
    void start_session() {
        detail::call([&](appnorth_error *e) { return appnorth_events_start_session(get(), e); });
    }

    /** Super properties (appnorth_events_register()): a JSON object's text. */
    void register_properties(const std::string &properties_json, bool once = false) {
        detail::call([&](appnorth_error *e) {
            return once ? appnorth_events_register_once(get(), properties_json.c_str(), e)
                        : appnorth_events_register(get(), properties_json.c_str(), e);
        });
    }

    void unregister_property(const std::string &key) {
        detail::call([&](appnorth_error *e) { return appnorth_events_unregister(get(), key.c_str(), e); });
    }

    /** The registered super properties as JSON. */
    std::string super_properties() const {
        char *out = nullptr;
        appnorth_error err;
        appnorth_status status = appnorth_events_super_properties(get(), &out, &err);
        std::string text = detail::take(out);
        detail::check(status, err);
        return text;
    }

    /** The session id the next event carries (appnorth_events_session_id()). */
    std::string session_id() const {
        char *out = nullptr;
        appnorth_error err;
        appnorth_status status = appnorth_events_session_id(get(), &out, &err);
        std::string text = detail::take(out);
        detail::check(status, err);
        return text;
    }

    void set_network_type(appnorth_network_type type) {
        detail::call([&](appnorth_error *e) { return appnorth_events_set_network_type(get(), type, e); });
    }

    void set_consent(bool granted) {
        detail::call([&](appnorth_error *e) { return appnorth_events_set_consent(get(), granted ? 1 : 0, e); });
    }

    appnorth_consent consent() const {
        int32_t state = APPNORTH_CONSENT_UNKNOWN;
        detail::call([&](appnorth_error *e) { return appnorth_events_consent(get(), &state, e); });
        return state;
    }

    void identify(const std::string &user_id) {
        detail::call([&](appnorth_error *e) { return appnorth_events_identify(get(), user_id.c_str(), e); });
    }

    /** Counters as JSON (see appnorth_events_stats()). */
    std::string stats() const {
        char *out = nullptr;
        appnorth_error err;
        appnorth_status status = appnorth_events_stats(get(), &out, &err);
        std::string text = detail::take(out);
        detail::check(status, err);
        return text;
    }

    /** The queued events, oldest first (at most max), as a JSON array of
     *  the event objects a batch body carries: for the host's own tests. */
    std::string pending(int32_t max = 10000) const {
        char *out = nullptr;
        appnorth_error err;
        appnorth_status status = appnorth_events_pending(get(), max, &out, &err);
        std::string text = detail::take(out);
        detail::check(status, err);
        return text;
    }

    /** Flushes for up to timeout_ms, then stops the upload thread. The
     *  destructor does the same with no flush. */
    void close(int32_t timeout_ms) {
        detail::call([&](appnorth_error *e) { return appnorth_events_close(get(), timeout_ms, e); });
    }

    appnorth_events *get() const noexcept { return handle_.get(); }

private:
    static int32_t before_send_thunk(void *user_data, const char *event_json, appnorth_buffer *replacement) noexcept {
        try {
            const auto &hook = *static_cast<std::function<bool(std::string &)> *>(user_data);
            std::string event(event_json);
            if (!hook(event)) return APPNORTH_BEFORE_SEND_DROP;
            if (event == event_json) return APPNORTH_BEFORE_SEND_KEEP;
            return appnorth_buffer_set(replacement, event.data(), event.size(), nullptr) == APPNORTH_OK
                       ? APPNORTH_BEFORE_SEND_REPLACE
                       : -1;
        } catch (const std::exception &e) {
            std::string reason = e.what();
            appnorth_buffer_set(replacement, reason.data(), reason.size(), nullptr);
            return -1;
        } catch (...) {
            return -1;
        }
    }

    static void release_hook(void *user_data) noexcept {
        delete static_cast<std::function<bool(std::string &)> *>(user_data);
    }

    using Handle = detail::Handle<appnorth_events, appnorth_events_free>;
    /* Declared first, so it is released after the C handle is freed. */
    std::shared_ptr<detail::LogSink> log_sink_;
    Handle handle_;
};

/** What a config listener receives; the strings are copies it may keep. */
struct ConfigChange {
    std::string config_json;        /* the new effective config object */
    std::string changed_keys_json;  /* a JSON array of the keys that changed */
    appnorth_config_tier tier;      /* APPNORTH_CONFIG_TIER_* */
};

/** Options for Config; empty strings mean "none". */
struct ConfigOptions {
    std::string data_dir;      /* holds the cached tier */
    std::string bundled_path;  /* the bundled JSON file */
    int32_t poll_interval_ms = APPNORTH_CONFIG_DEFAULT_POLL_INTERVAL_MS;
    int32_t reconnect_backoff_base_ms = APPNORTH_CONFIG_DEFAULT_BACKOFF_BASE_MS;
    int32_t reconnect_backoff_max_ms = APPNORTH_CONFIG_DEFAULT_BACKOFF_MAX_MS;
};

/** Remote config over its tiers, with live listeners. */
class Config {
    struct State;

public:
    using ListenerFn = std::function<void(const ConfigChange &)>;
    /** A status listener (appnorth_config_add_status_listener()). */
    using StatusFn = std::function<void(const appnorth_data_source_status &)>;

    /** Removes its listener when destroyed or reset(). Move-only. It may
     *  outlive the Config: it then does nothing. */
    class Listener {
    public:
        Listener() = default;
        Listener(Listener &&other) noexcept
            : state_(std::move(other.state_)), token_(std::exchange(other.token_, 0)), status_(other.status_) {}
        Listener &operator=(Listener &&other) noexcept {
            if (this != &other) {
                reset();
                state_ = std::move(other.state_);
                token_ = std::exchange(other.token_, 0);
                status_ = other.status_;
            }
            return *this;
        }
        Listener(const Listener &) = delete;
        Listener &operator=(const Listener &) = delete;
        ~Listener() { reset(); }

        /** Removes the listener now; it is never called after this returns
         *  (called from inside the listener: after the listener returns). */
        void reset() noexcept {
            if (std::shared_ptr<State> state = state_.lock()) state->remove(token_, status_);
            state_.reset();
            token_ = 0;
        }

        /** The C API's token (0 once removed). */
        int64_t token() const noexcept { return token_; }

    private:
        friend class Config;
        Listener(std::weak_ptr<State> state, int64_t token, bool status = false)
            : state_(std::move(state)), token_(token), status_(status) {}
        std::weak_ptr<State> state_;
        int64_t token_ = 0;
        bool status_ = false;  /* a status listener */
    };

    Config(const Client &client, const ConfigOptions &options = ConfigOptions()) {
        detail::Handle<appnorth_config_options, appnorth_config_options_free> opts(
            appnorth_config_options_new());
        if (!opts.get()) throw std::bad_alloc();
        detail::call([&](appnorth_error *e) {
            return appnorth_config_options_set_client(opts.get(), client.get(), e);
        });
        if (!options.data_dir.empty()) {
            detail::call([&](appnorth_error *e) {
                return appnorth_config_options_set_data_dir(opts.get(), options.data_dir.c_str(), e);
            });
        }
        if (!options.bundled_path.empty()) {
            detail::call([&](appnorth_error *e) {
                return appnorth_config_options_set_bundled_path(opts.get(), options.bundled_path.c_str(), e);
            });
        }
        detail::call([&](appnorth_error *e) {
            return appnorth_config_options_set_poll_interval_ms(opts.get(), options.poll_interval_ms, e);
        });
        detail::call([&](appnorth_error *e) {
            return appnorth_config_options_set_reconnect_backoff_ms(
                opts.get(), options.reconnect_backoff_base_ms, options.reconnect_backoff_max_ms, e);
        });
        appnorth_config *raw = nullptr;
        detail::call([&](appnorth_error *e) { return appnorth_config_new(opts.get(), &raw, e); });
        state_ = std::make_shared<State>(raw, client.log_sink());
    }

    Config(Config &&) noexcept = default;
    Config &operator=(Config &&) noexcept = default;

    /** Registers fn; keep the returned Listener for as long as fn should run. */
    [[nodiscard]] Listener listen(ListenerFn fn) {
        return Listener(state_, state_->add(std::move(fn)));
    }

    /** Registers a status listener; keep the returned Listener for as long
     *  as fn should run. Same threads as listen(). */
    [[nodiscard]] Listener listen_status(StatusFn fn) {
        return Listener(state_, state_->add_status(std::move(fn)), true);
    }

    /** The data-source status: state, since when, last error. */
    appnorth_data_source_status status() const {
        appnorth_data_source_status value{};
        detail::call([&](appnorth_error *e) { return appnorth_config_status(get(), &value, e); });
        return value;
    }

    std::string get_string(const std::string &key, const std::string &default_value = std::string()) const {
        char *out = nullptr;
        appnorth_error err;
        appnorth_status status = appnorth_config_get_string(get(), key.c_str(), default_value.c_str(), &out, &err);
        std::string value = detail::take(out);
        detail::check(status, err);
        return value;
    }

    int64_t get_int(const std::string &key, int64_t default_value = 0) const {
        int64_t value = default_value;
        detail::call([&](appnorth_error *e) {
            return appnorth_config_get_int(get(), key.c_str(), default_value, &value, e);
        });
        return value;
    }

    double get_double(const std::string &key, double default_value = 0) const {
        double value = default_value;
        detail::call([&](appnorth_error *e) {
            return appnorth_config_get_double(get(), key.c_str(), default_value, &value, e);
        });
        return value;
    }

    bool get_bool(const std::string &key, bool default_value = false) const {
        int32_t value = default_value ? 1 : 0;
        detail::call([&](appnorth_error *e) {
            return appnorth_config_get_bool(get(), key.c_str(), default_value ? 1 : 0, &value, e);
        });
        return value != 0;
    }

    /** The whole effective config object as JSON. */
    std::string snapshot() const {
        char *out = nullptr;
        appnorth_error err;
        appnorth_status status = appnorth_config_snapshot(get(), &out, &err);
        std::string text = detail::take(out);
        detail::check(status, err);
        return text;
    }

    /** The tier the effective config came from. */
    appnorth_config_tier tier() const {
        int32_t tier = APPNORTH_CONFIG_TIER_DEFAULT;
        detail::call([&](appnorth_error *e) { return appnorth_config_source(get(), &tier, nullptr, e); });
        return tier;
    }

    void refresh() {
        detail::call([&](appnorth_error *e) { return appnorth_config_refresh(get(), e); });
    }
    void start_live() {
        detail::call([&](appnorth_error *e) { return appnorth_config_start_live(get(), e); });
    }
    void stop_live() {
        detail::call([&](appnorth_error *e) { return appnorth_config_stop_live(get(), e); });
    }

    appnorth_config *get() const noexcept { return state_ ? state_->handle : nullptr; }

private:
    /** One registered function. It is deleted once the C library can no
     *  longer call it: after remove returned, or, when it removed itself,
     *  after its own call returns. */
    struct Slot {
        ListenerFn fn;
        bool removed_while_running = false;
        StatusFn status_fn;
    };

    /** The slot running on this thread, if any (callbacks of one config
     *  never run concurrently, but several configs may nest). */
    static Slot *&running_slot() {
        static thread_local Slot *slot = nullptr;
        return slot;
    }

    static void trampoline(const char *config_json, const char *changed_keys_json, int32_t tier,
                           void *user_data) noexcept {
        Slot *slot = static_cast<Slot *>(user_data);
        Slot *outer = std::exchange(running_slot(), slot);
        try {
            slot->fn(ConfigChange{config_json ? config_json : "{}",
                                  changed_keys_json ? changed_keys_json : "[]", tier});
        } catch (...) {
            /* An exception must not unwind through the C library. */
        }
        running_slot() = outer;
        if (slot->removed_while_running) delete slot;
    }

    static void status_trampoline(const appnorth_data_source_status *status, void *user_data) noexcept {
        Slot *slot = static_cast<Slot *>(user_data);
        Slot *outer = std::exchange(running_slot(), slot);
        try {
            slot->status_fn(*status);
        } catch (...) {
            /* An exception must not unwind through the C library. */
        }
        running_slot() = outer;
        if (slot->removed_while_running) delete slot;
    }

    /** Shared by the Config and its Listeners (weakly); frees the C config,
     *  then the functions, when the Config goes. */
    struct State {
        State(appnorth_config *raw, std::shared_ptr<detail::LogSink> sink)
            : log_sink(std::move(sink)), handle(raw) {}
        State(const State &) = delete;
        State &operator=(const State &) = delete;

        ~State() {
            /* Stops live updates and waits for a callback in flight (unless
             * this runs inside one), so no slot is called afterwards. */
            appnorth_config_free(handle);
            for (auto &entry : slots) retire(entry.second);
            for (auto &entry : status_slots) retire(entry.second);
        }

        int64_t add(ListenerFn fn) {
            std::unique_ptr<Slot> slot(new Slot{std::move(fn), false, StatusFn()});
            int64_t token = 0;
            std::lock_guard<std::mutex> lock(mutex);
            detail::call([&](appnorth_error *e) {
                return appnorth_config_add_listener(handle, trampoline, slot.get(), &token, e);
            });
            slots[token] = slot.release();
            return token;
        }

        int64_t add_status(StatusFn fn) {
            std::unique_ptr<Slot> slot(new Slot{ListenerFn(), false, std::move(fn)});
            int64_t token = 0;
            std::lock_guard<std::mutex> lock(mutex);
            detail::call([&](appnorth_error *e) {
                return appnorth_config_add_status_listener(handle, status_trampoline, slot.get(), &token, e);
            });
            status_slots[token] = slot.release();
            return token;
        }

        void remove(int64_t token, bool status) noexcept {
            Slot *slot = nullptr;
            std::map<int64_t, Slot *> &from = status ? status_slots : slots;
            {
                std::lock_guard<std::mutex> lock(mutex);
                auto found = from.find(token);
                if (found == from.end()) return;
                slot = found->second;
                from.erase(found);
            }
            /* Not under the mutex: this waits for a call in flight, which may
             * itself be adding or removing listeners. */
            if (status) appnorth_config_remove_status_listener(handle, token, nullptr);
            else appnorth_config_remove_listener(handle, token, nullptr);
            retire(slot);
        }

        static void retire(Slot *slot) noexcept {
            if (running_slot() == slot) slot->removed_while_running = true;
            else delete slot;
        }

        /* The client's logger, released after the C config is freed. */
        std::shared_ptr<detail::LogSink> log_sink;
        appnorth_config *handle;
        std::mutex mutex;
        std::map<int64_t, Slot *> slots;
        std::map<int64_t, Slot *> status_slots;
    };

    std::shared_ptr<State> state_;
};

}  // namespace appnorth

#endif /* APPNORTH_HPP */
