/* When the transfer thread stops, nothing it was handed is left without a
 * completion (issue #31). It stops when the last handle that started a
 * non-blocking call is freed; here three threads start non-blocking reads
 * on the one client while a fourth frees it, round after round. Every start
 * that returned APPNORTH_OK gets exactly one on_done; every other start is
 * refused with APPNORTH_E_WRONG_STATE (the handle is being freed, or the
 * transfer thread has stopped) and never called; 0 hung (each round waits
 * on a condition with a deadline; the watchdog ends a hung program).
 *
 * The client is in dispatch mode, and the test holds one completion open
 * inside appnorth_dispatch() on a thread of its own: the free waits for
 * that call in flight, so the starters can keep calling until they are
 * refused without ever touching freed memory. The other completions run in
 * the free (queued ones) or on a library thread (after the free closed the
 * dispatcher). $APPNORTH_TEST_ROUNDS sets the number of rounds. */
#define _XOPEN_SOURCE 700
#include <appnorth.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "fixtures.h"
#include "support.h"

#define APP "enginestop"
#define STARTERS 3
#define PER_STARTER 64
#define SLOTS (1 + STARTERS * PER_STARTER)

static const char *server;

typedef struct round_state round_state;

typedef struct {
    round_state *r;
    int index;
} slot;

struct round_state {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    appnorth_client *client;
    int pinned, release;
    int started, completions, free_after;
    int refused_freeing, refused_stopped, refused_other;
    char other_message[300];
    int ok[SLOTS], calls[SLOTS];
    int32_t status[SLOTS];
    slot slots[SLOTS];
    slot starter[STARTERS]; /* each starter thread's round and number */
};

static void signal_locked(round_state *r) { pthread_cond_broadcast(&r->cv); }

/* Waits (the mutex held) until *value >= goal, or `ms`; returns whether it got there. */
static int wait_at_least(round_state *r, const int *value, int goal, int ms) {
    int64_t until = mono_ms() + ms;
    while (*value < goal)
        if (cond_wait_until(&r->cv, &r->mu, until) == ETIMEDOUT) break;
    return *value >= goal;
}

static void on_done(uint64_t op, int32_t status, const appnorth_error *err, const char *json, void *user) {
    (void)op; (void)err; (void)json;
    slot *s = user;
    round_state *r = s->r;
    pthread_mutex_lock(&r->mu);
    r->calls[s->index]++;
    r->status[s->index] = status;
    r->completions++;
    signal_locked(r);
    pthread_mutex_unlock(&r->mu);
}

/* Slot 0's completion: runs inside appnorth_dispatch() on the pin thread
 * and stays there until the starters are done. */
static void on_pin(uint64_t op, int32_t status, const appnorth_error *err, const char *json, void *user) {
    on_done(op, status, err, json, user);
    round_state *r = ((slot *)user)->r;
    pthread_mutex_lock(&r->mu);
    r->pinned = 1;
    signal_locked(r);
    wait_at_least(r, &r->release, 1, 20000);
    pthread_mutex_unlock(&r->mu);
}

static void *pin_thread(void *arg) {
    round_state *r = arg;
    appnorth_error err;
    int32_t fd = -1;
    CHECK_STATUS(appnorth_dispatch_fd(r->client, &fd, &err), APPNORTH_OK, err);
    for (int pinned = 0; !pinned;) {
        struct pollfd p = {fd, POLLIN, 0};
        (void)poll(&p, 1, 1000); /* readable once the completion is queued */
        int32_t ran = 0;
        CHECK_STATUS(appnorth_dispatch(r->client, 1, &ran, &err), APPNORTH_OK, err);
        pthread_mutex_lock(&r->mu);
        pinned = r->pinned;
        pthread_mutex_unlock(&r->mu);
    }
    return NULL;
}

static void *starter_thread(void *arg) {
    slot *me = arg;
    round_state *r = me->r;
    for (int j = 0; j < PER_STARTER; j++) {
        int i = 1 + me->index * PER_STARTER + j;
        appnorth_error err;
        int32_t rc = appnorth_client_list_boards_async(r->client, on_done, &r->slots[i], NULL, &err);
        pthread_mutex_lock(&r->mu);
        if (rc == APPNORTH_OK) {
            r->ok[i] = 1;
            r->started++;
        } else if (rc == APPNORTH_E_WRONG_STATE && strstr(err.message, "being freed")) {
            r->refused_freeing++;
        } else if (rc == APPNORTH_E_WRONG_STATE && strstr(err.message, "transfer thread has stopped")) {
            r->refused_stopped++;
        } else {
            r->refused_other++;
            snprintf(r->other_message, sizeof r->other_message, "%d: %s", rc, err.message);
        }
        signal_locked(r);
        pthread_mutex_unlock(&r->mu);
        if (rc != APPNORTH_OK) break; /* refused once: the free has begun */
    }
    return NULL;
}

static void *freer_thread(void *arg) {
    round_state *r = arg;
    pthread_mutex_lock(&r->mu);
    wait_at_least(r, &r->started, r->free_after, 20000); /* lands among the starts */
    pthread_mutex_unlock(&r->mu);
    appnorth_client_free(r->client);
    return NULL;
}

static appnorth_client *dispatch_client(void) {
    appnorth_error err;
    appnorth_client_options *o = appnorth_client_options_new();
    CHECK_STATUS(appnorth_client_options_set_api_url(o, server, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_app_id(o, APP, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_timeouts(o, 5000, 5000, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_dispatch_mode(o, 1, &err), APPNORTH_OK, err);
    appnorth_client *c = NULL;
    CHECK_STATUS(appnorth_client_new(o, &c, &err), APPNORTH_OK, err);
    appnorth_client_options_free(o);
    return c;
}

/* Threads of this process the library named (appnorth-*). */
static int library_threads(void) {
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char path[300], name[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f && fgets(name, sizeof name, f) && strncmp(name, "appnorth-", 9) == 0) {
            n++;
            fprintf(stderr, "library thread left: %s", name);
        }
        if (f) fclose(f);
    }
    if (d) closedir(d);
    return n;
}

typedef struct {
    int started, refused_freeing, refused_stopped, refused_other, completed_ok, completed_cancelled,
        completed_other, twice, called_refused, hung;
} totals;

/* One round; returns 0 when it hung (its state is then left alone: a
 * late completion may still write to it). */
static int one_round(int round, totals *t) {
    round_state *r = calloc(1, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    cond_init_mono(&r->cv);
    for (int i = 0; i < SLOTS; i++) r->slots[i] = (slot){r, i};
    for (int i = 0; i < STARTERS; i++) r->starter[i] = (slot){r, i};
    r->free_after = 1 + round % 24;
    r->client = dispatch_client();
    appnorth_error err;
    CHECK_STATUS(appnorth_client_list_boards_async(r->client, on_pin, &r->slots[0], NULL, &err), APPNORTH_OK, err);
    r->ok[0] = 1;
    pthread_t pin, starters[STARTERS], freer;
    pthread_create(&pin, NULL, pin_thread, r);
    pthread_mutex_lock(&r->mu);
    int pinned = wait_at_least(r, &r->pinned, 1, 20000);
    pthread_mutex_unlock(&r->mu);
    CHECK(pinned, "round %d: the first read completed into dispatch", round);
    for (int i = 0; i < STARTERS; i++) pthread_create(&starters[i], NULL, starter_thread, &r->starter[i]);
    pthread_create(&freer, NULL, freer_thread, r);
    for (int i = 0; i < STARTERS; i++) pthread_join(starters[i], NULL);
    pthread_mutex_lock(&r->mu);
    r->release = 1; /* every starter is done: the free may return */
    signal_locked(r);
    pthread_mutex_unlock(&r->mu);
    pthread_join(pin, NULL);
    pthread_join(freer, NULL);

    pthread_mutex_lock(&r->mu);
    int all = wait_at_least(r, &r->completions, r->started + 1, 10000);
    t->started += r->started;
    t->refused_freeing += r->refused_freeing;
    t->refused_stopped += r->refused_stopped;
    t->refused_other += r->refused_other;
    if (r->refused_other) fprintf(stderr, "round %d: a start refused with %s\n", round, r->other_message);
    if (!all) t->hung += r->started + 1 - r->completions;
    for (int i = 1; i < SLOTS; i++) {
        if (!r->ok[i]) {
            t->called_refused += r->calls[i];
            continue;
        }
        if (r->calls[i] > 1) t->twice++;
        if (r->calls[i] != 1) continue;
        if (r->status[i] == APPNORTH_OK) t->completed_ok++;
        else if (r->status[i] == APPNORTH_E_CANCELLED) t->completed_cancelled++;
        else t->completed_other++;
    }
    pthread_mutex_unlock(&r->mu);
    if (!all) return 0;
    free(r);
    return 1;
}

static void test_starts_racing_the_last_free_each_complete_once_or_are_refused(void) {
    admin_reset(server);
    int rounds = test_count("APPNORTH_TEST_ROUNDS", 50, 200);
    totals t;
    memset(&t, 0, sizeof t);
    int ran = 0;
    int64_t began = mono_ms();
    for (int round = 0; round < rounds; round++, ran++)
        if (!one_round(round, &t)) break;
    int left = library_threads();
    printf("%d rounds in %lld ms: %d started (%d read, %d cancelled, %d other), %d refused (%d being freed, "
           "%d transfer thread stopped, %d other); %d hung, %d completed twice; library threads left %d\n",
           ran, (long long)(mono_ms() - began), t.started, t.completed_ok, t.completed_cancelled, t.completed_other,
           t.refused_freeing + t.refused_stopped + t.refused_other, t.refused_freeing, t.refused_stopped,
           t.refused_other, t.hung, t.twice, left);
    CHECK(ran == rounds, "%d of %d rounds ran", ran, rounds);
    CHECK(t.hung == 0, "%d started reads never completed", t.hung);
    CHECK(t.twice == 0, "%d reads completed more than once", t.twice);
    CHECK(t.called_refused == 0, "%d refused starts were called", t.called_refused);
    CHECK(t.refused_other == 0, "%d starts refused with another status", t.refused_other);
    CHECK(t.completed_other == 0, "%d reads ended neither read nor cancelled", t.completed_other);
    CHECK(t.refused_freeing > 0, "the free landed among the starts (%d refused as being freed)", t.refused_freeing);
    CHECK(left == 0, "%d library threads left after the last free", left);
}

int main(void) {
    server = test_start("test_engine_stop", 300);
    if (!server) return 2;
    RUN(test_starts_racing_the_last_free_each_complete_once_or_are_refused);
    return check_summary();
}
