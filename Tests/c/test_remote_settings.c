/* Remote control of the event pipeline through the library's own config
 * (#40 item 6), through the real libappnorth.so against the local API
 * server ($APPNORTH_TEST_SERVER): the reserved config key "appnorth.events"
 * published at the server reaches an events handle made with the same
 * client, live and, after a restart offline, from the cached tier; the
 * sample rate 0 and 1 exactly (option and key); blocked events; values out
 * of range refused with one warning and the last good kept; the host's
 * opt-out; bad arguments. Each test has an App ID of its own, so that no
 * test sees another's config or events. */
#include "events_support.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>

#include "clock.h"

static int app_counter;

static const char *new_app(char *buf, size_t size) {
    snprintf(buf, size, "tremote-%d-%d", (int)getpid(), ++app_counter);
    return buf;
}

static void publish(const char *app, const char *config_json) { admin_publish_config(server, app, config_json); }

/* Log lines that name the refused config key, and config changes seen. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refusals;
    int changes;
} watch;

static void watch_init(watch *w) {
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    cond_init_mono(&w->cv);
}

static void watch_free(watch *w) {
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
}

static void on_log(int32_t level, const char *message, void *user_data) {
    watch *w = user_data;
    if (level != APPNORTH_LOG_WARNING || !strstr(message, "appnorth.events refused")) return;
    pthread_mutex_lock(&w->mu);
    w->refusals++;
    pthread_mutex_unlock(&w->mu);
}

static void on_change(const char *json, const char *keys, int32_t tier, void *user_data) {
    (void)json, (void)keys, (void)tier;
    watch *w = user_data;
    pthread_mutex_lock(&w->mu);
    w->changes++;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static int wait_changes(watch *w, int n) {
    int64_t deadline = mono_ms() + 10000;
    pthread_mutex_lock(&w->mu);
    while (w->changes < n)
        if (cond_wait_until(&w->cv, &w->mu, deadline) == ETIMEDOUT) break;
    int ok = w->changes >= n;
    pthread_mutex_unlock(&w->mu);
    return ok;
}

static int refusals(watch *w) {
    pthread_mutex_lock(&w->mu);
    int n = w->refusals;
    pthread_mutex_unlock(&w->mu);
    return n;
}

static appnorth_config *open_config(appnorth_client *client, const char *dir) {
    appnorth_error err;
    appnorth_config_options *o = appnorth_config_options_new();
    CHECK_STATUS(appnorth_config_options_set_client(o, client, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_options_set_data_dir(o, dir, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_options_set_reconnect_backoff_ms(o, 20, 200, &err), APPNORTH_OK, err);
    appnorth_config *config = NULL;
    CHECK_STATUS(appnorth_config_new(o, &config, &err), APPNORTH_OK, err);
    appnorth_config_options_free(o);
    return config;
}

static void refresh(appnorth_config *config) {
    appnorth_error err;
    CHECK_STATUS(appnorth_config_refresh(config, &err), APPNORTH_OK, err);
}

/* track(): 1 queued, 0 dropped (the call itself must succeed). */
static int track(appnorth_events *events, const char *name) {
    appnorth_error err;
    int32_t queued = -1;
    CHECK_STATUS(appnorth_events_track(events, name, NULL, &queued, &err), APPNORTH_OK, err);
    return queued;
}

/* The stats (new ref). */
static json_t *stats_of(appnorth_events *events) {
    appnorth_error err;
    char *text = NULL;
    CHECK_STATUS(appnorth_events_stats(events, &text, &err), APPNORTH_OK, err);
    json_t *s = json_loads(text ? text : "{}", 0, NULL);
    appnorth_string_free(text);
    return s;
}

static json_int_t dropped(appnorth_events *events, const char *reason) {
    json_t *s = stats_of(events);
    json_int_t n = json_integer_value(json_object_get(json_object_get(s, "dropped"), reason));
    json_decref(s);
    return n;
}

static json_t *setting(json_t *s, const char *name) { return json_object_get(json_object_get(s, "settings"), name); }

static size_t server_count(const char *app) {
    json_t *events = server_events_of(app);
    size_t n = json_array_size(events);
    json_decref(events);
    return n;
}

/* ---- the off switch: live, then a restart offline ------------------------------- */

static void test_a_remote_off_switch_arrives_live_then_holds_after_an_offline_restart(void) {
    char app[64];
    new_app(app, sizeof app);
    publish(app, "{\"theme\":\"dark\"}");
    char *dir = make_temp_dir("remote-off");
    watch w;
    watch_init(&w);
    appnorth_error err;
    appnorth_client *client = make_client_for(app, NULL, NULL);
    appnorth_config *config = open_config(client, dir);
    int64_t token = 0;
    CHECK_STATUS(appnorth_config_add_listener(config, on_change, &w, &token, &err), APPNORTH_OK, err);
    appnorth_events *events = open_quiet(client, dir);
    CHECK_STATUS(appnorth_config_start_live(config, &err), APPNORTH_OK, err);
    CHECK(wait_changes(&w, 1), "the stream's first event");
    CHECK(track(events, "before") == 1, "tracked while on");

    /* The switch arrives down the stream: the handle is off before the listener runs. */
    publish(app, "{\"theme\":\"dark\",\"appnorth.events\":{\"enabled\":false}}");
    CHECK(wait_changes(&w, 2), "the live update");
    CHECK(track(events, "during") == 0, "switched off live: dropped");
    CHECK(dropped(events, "disabled") == 1, "counted as dropped.disabled");
    CHECK_STATUS(appnorth_events_flush(events, 5000, &err), APPNORTH_E_WRONG_STATE, err);
    CHECK(strstr(err.message, "switched off") != NULL, "flush says why: %s", err.message);
    json_t *s = stats_of(events);
    CHECK(json_integer_value(json_object_get(s, "queued")) == 1, "the event queued before stays queued");
    CHECK(json_is_false(setting(s, "enabled")) && json_is_true(setting(s, "remote")), "settings show it");
    json_decref(s);
    appnorth_events_free(events);
    appnorth_config_free(config);
    appnorth_client_free(client);

    /* Restart with the server unreachable: the cached tier keeps it off. */
    go_offline();
    client = make_client_for(app, NULL, NULL);
    config = open_config(client, dir);
    int32_t tier = -1;
    CHECK_STATUS(appnorth_config_source(config, &tier, NULL, &err), APPNORTH_OK, err);
    CHECK(tier == APPNORTH_CONFIG_TIER_CACHED, "offline: the cached tier (%d)", tier);
    events = open_quiet(client, dir);
    CHECK(track(events, "offline") == 0, "still off from the cached tier");
    CHECK(dropped(events, "disabled") == 1, "counted");
    CHECK_STATUS(appnorth_events_flush(events, 5000, &err), APPNORTH_E_WRONG_STATE, err);
    appnorth_events_free(events);
    clear_faults();
    CHECK(server_count(app) == 0, "nothing reached the server while off");

    /* Switched on again: the event queued before goes, with the new one. */
    events = open_quiet(client, dir);
    publish(app, "{\"appnorth.events\":{\"enabled\":true}}");
    refresh(config);
    CHECK(track(events, "after") == 1, "on again");
    CHECK_STATUS(appnorth_events_flush(events, 5000, &err), APPNORTH_OK, err);
    CHECK(server_count(app) == 2, "before and after arrived (%zu)", server_count(app));
    appnorth_events_free(events);
    appnorth_config_free(config);
    appnorth_client_free(client);
    watch_free(&w);
    remove_tree(dir);
}

/* ---- sampling ------------------------------------------------------------------- */

static void test_sample_rate_zero_and_one_exactly(void) {
    char app[64];
    new_app(app, sizeof app);
    char *dir = make_temp_dir("remote-sample");
    appnorth_error err;
    appnorth_client *client = make_client_for(app, NULL, NULL);

    /* The option: 0 tracks nothing, 1 everything. */
    appnorth_events_options *o = quiet_options(client, dir);
    CHECK_STATUS(appnorth_events_options_set_sample_rate(o, 0.0, &err), APPNORTH_OK, err);
    appnorth_events *events = open_events(o);
    for (int i = 0; i < 10; i++) CHECK(track(events, "zero") == 0, "rate 0 drops every event");
    CHECK(dropped(events, "sampled") == 10, "dropped.sampled counts them");
    appnorth_events_free(events);
    o = quiet_options(client, dir);
    CHECK_STATUS(appnorth_events_options_set_sample_rate(o, 1.0, &err), APPNORTH_OK, err);
    events = open_events(o);
    for (int i = 0; i < 10; i++) CHECK(track(events, "one") == 1, "rate 1 keeps every event");

    /* The key over the option: 0, then 1 again. */
    publish(app, "{\"appnorth.events\":{\"sample_rate\":0}}");
    appnorth_config *config = open_config(client, dir);
    refresh(config);
    CHECK(track(events, "zero") == 0, "the key's rate 0");
    json_t *s = stats_of(events);
    CHECK(json_real_value(setting(s, "sample_rate")) == 0.0 && json_is_false(setting(s, "sampled_in")), "settings");
    json_decref(s);
    publish(app, "{\"appnorth.events\":{\"sample_rate\":1.0}}");
    refresh(config);
    CHECK(track(events, "one") == 1, "the key's rate 1");
    CHECK(dropped(events, "sampled") == 1, "one sampled out by the key");
    CHECK_STATUS(appnorth_events_flush(events, 5000, &err), APPNORTH_OK, err);
    CHECK(server_count(app) == 11, "exactly the kept events arrived (%zu)", server_count(app));
    appnorth_events_free(events);
    appnorth_config_free(config);
    appnorth_client_free(client);
    remove_tree(dir);
}

/* ---- blocked events ------------------------------------------------------------- */

static void test_blocked_events_are_dropped_and_counted(void) {
    char app[64];
    new_app(app, sizeof app);
    publish(app, "{\"appnorth.events\":{\"blocked_events\":[\"spam\",\"noise\"]}}");
    char *dir = make_temp_dir("remote-blocked");
    appnorth_error err;
    appnorth_client *client = make_client_for(app, NULL, NULL);
    appnorth_config *config = open_config(client, dir);
    refresh(config);
    appnorth_events *events = open_quiet(client, dir);
    CHECK(track(events, "spam") == 0 && track(events, "noise") == 0, "blocked names dropped");
    CHECK(track(events, "signal") == 1, "others kept");
    CHECK(dropped(events, "blocked") == 2, "dropped.blocked counts them");
    CHECK_STATUS(appnorth_events_flush(events, 5000, &err), APPNORTH_OK, err);
    CHECK(server_count(app) == 1, "only the kept event arrived");
    /* The list removed from the key: every name goes again. */
    publish(app, "{\"appnorth.events\":{}}");
    refresh(config);
    CHECK(track(events, "spam") == 1, "unblocked");
    appnorth_events_free(events);
    appnorth_config_free(config);
    appnorth_client_free(client);
    remove_tree(dir);
}

/* ---- values out of range -------------------------------------------------------- */

static void test_out_of_range_values_are_refused_and_the_last_good_stays(void) {
    char app[64];
    new_app(app, sizeof app);
    publish(app, "{\"appnorth.events\":{\"sample_rate\":0,\"batch_threshold\":5}}");
    char *dir = make_temp_dir("remote-range");
    watch w;
    watch_init(&w);
    appnorth_client *client = make_client_for(app, on_log, &w);
    appnorth_config *config = open_config(client, dir);
    refresh(config);
    appnorth_events *events = open_quiet(client, dir);
    publish(app, "{\"appnorth.events\":{\"sample_rate\":7,\"batch_threshold\":0,\"flush_interval_ms\":\"soon\","
                 "\"enabled\":1,\"blocked_events\":[\"\"]}}");
    refresh(config);
    CHECK(refusals(&w) == 1, "one warning for the whole refusal (%d)", refusals(&w));
    json_t *s = stats_of(events);
    CHECK(json_real_value(setting(s, "sample_rate")) == 0.0, "sample_rate keeps its last good value");
    CHECK(json_integer_value(setting(s, "batch_threshold")) == 5, "batch_threshold too");
    CHECK(json_integer_value(setting(s, "flush_interval_ms")) == QUIET_INTERVAL_MS, "never set: the option's");
    CHECK(json_is_true(setting(s, "enabled")), "enabled: the option's");
    json_decref(s);
    CHECK(track(events, "still-sampled-out") == 0, "still sampled out");
    /* Not an object at all: refused whole, the last good stays. */
    publish(app, "{\"appnorth.events\":\"off\"}");
    refresh(config);
    CHECK(refusals(&w) == 2, "a second warning (%d)", refusals(&w));
    CHECK(track(events, "still-sampled-out") == 0, "still sampled out");
    CHECK(dropped(events, "sampled") == 2, "counted");
    appnorth_events_free(events);
    appnorth_config_free(config);
    appnorth_client_free(client);
    watch_free(&w);
    remove_tree(dir);
}

/* ---- opting out ------------------------------------------------------------------ */

static void test_a_host_that_opts_out_ignores_the_key(void) {
    char app[64];
    new_app(app, sizeof app);
    publish(app, "{\"appnorth.events\":{\"enabled\":false}}");
    char *dir = make_temp_dir("remote-optout");
    appnorth_error err;
    appnorth_client *client = make_client_for(app, NULL, NULL);
    appnorth_config *config = open_config(client, dir);
    refresh(config);
    appnorth_events_options *o = quiet_options(client, dir);
    CHECK_STATUS(appnorth_events_options_set_remote_settings(o, 0, &err), APPNORTH_OK, err);
    appnorth_events *events = open_events(o);
    CHECK(track(events, "kept") == 1, "opted out: the key does not switch it off");
    CHECK_STATUS(appnorth_events_flush(events, 5000, &err), APPNORTH_OK, err);
    CHECK(server_count(app) == 1, "and it uploads");
    json_t *s = stats_of(events);
    CHECK(json_is_false(setting(s, "remote")) && json_is_true(setting(s, "enabled")), "settings: the options");
    json_decref(s);
    appnorth_events_free(events);
    appnorth_config_free(config);
    appnorth_client_free(client);
    remove_tree(dir);
}

/* ---- bad arguments ---------------------------------------------------------------- */

static void test_bad_arguments_are_refused(void) {
    appnorth_error err;
    CHECK_STATUS(appnorth_events_options_set_sample_rate(NULL, 0.5, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_events_options_set_remote_settings(NULL, 1, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    appnorth_events_options *o = appnorth_events_options_new();
    const double bad[] = {NAN, -0.0000001, 1.0000001, INFINITY, -INFINITY, 2.0};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_STATUS(appnorth_events_options_set_sample_rate(o, bad[i], &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(strstr(err.message, "sample rate") != NULL, "the message names it: %s", err.message);
    CHECK_STATUS(appnorth_events_options_set_sample_rate(o, 0.5, NULL), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_events_options_set_remote_settings(o, 2, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK_STATUS(appnorth_events_options_set_remote_settings(o, -1, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    appnorth_events_options_free(o);
}

int main(void) {
    if (!events_suite_start("test_remote_settings")) return 2;
    RUN(test_bad_arguments_are_refused);
    RUN(test_a_remote_off_switch_arrives_live_then_holds_after_an_offline_restart);
    RUN(test_sample_rate_zero_and_one_exactly);
    RUN(test_blocked_events_are_dropped_and_counted);
    RUN(test_out_of_range_values_are_refused_and_the_last_good_stays);
    RUN(test_a_host_that_opts_out_ignores_the_key);
    curl_global_cleanup();
    return check_summary();
}
