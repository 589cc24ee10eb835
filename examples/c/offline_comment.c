/* A walk-through of the offline write queue and the read cache, step by
 * step as the seed's Verify list has them, against the local dev server:
 *
 *   1. Lose connectivity and submit one comment: it is queued, 1 pending.
 *   2. Reconnect and flush: 1 sent, 1 more comment on the server, 0 pending.
 *   3. Queue a comment as ada, switch to bob before flushing: bob's flush
 *      sends nothing and ada's entry stays pending; logging ada out
 *      discards it.
 *   4. Read boards through the cache before and after its TTL expires,
 *      moving a manual clock instead of waiting, then forget it on logout.
 *   5. A poison entry: a comment queued on an idea that is deleted before
 *      the flush fails NOT_FOUND on every flush and holds back the valid
 *      comment behind it. The flush names it, the entry list shows its
 *      attempts and last error, and discarding that one entry lets the
 *      valid comment go out.
 *
 * usage: offline_comment API_URL APP_ID DATA_DIR
 *   e.g. DEVSERVER_FLAGS=--seed-demo scripts/with-devserver.sh \
 *          sh -c 'build/examples/offline_comment "$APPNORTH_TEST_SERVER" demo /tmp/oc-data'
 *
 * DEV SERVER ONLY: to "lose connectivity" without unplugging anything, the
 * example asks the local dev server (devserver/, docs/protocol.md) to drop
 * every API connection (POST /admin/faults {"drop":true}); "reconnecting"
 * clears the faults. That is a real network failure for the library: the
 * request is sent and no answer comes back. It also registers two test
 * accounts through /admin/users, and step 5 deletes its own throwaway
 * idea through /admin/apps/{app}/ideas/{id}. A real app does none of this: it calls
 * appnorth_queue_flush() when the OS says it is back online. The admin
 * calls use a few lines of plain sockets so the example needs nothing but
 * libappnorth and jansson.
 */
/* POSIX 2008 (sockets, clock_gettime, mkdtemp, nanosleep) under strict -std=c11. */
#define _POSIX_C_SOURCE 200809L

#include <appnorth.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "devserver_admin.h"

/* ---- the walk-through ------------------------------------------------------ */

#define ADA "ada@example.com"
#define ADA_TOKEN "ada-dev-token"
#define BOB "bob@example.com"
#define BOB_TOKEN "bob-dev-token"

static int fail(const char *what, const appnorth_error *err) {
    fprintf(stderr, "%s failed: %s (%s, HTTP %d)\n", what, err->message, appnorth_status_str(err->code),
            err->http_status);
    return 1;
}

static appnorth_client *new_client(const char *api_url, const char *app_id, const char *email,
                                   const char *token) {
    appnorth_error err;
    appnorth_client_options *options = appnorth_client_options_new();
    appnorth_client *client = NULL;
    if (appnorth_client_options_set_api_url(options, api_url, &err) != APPNORTH_OK ||
        appnorth_client_options_set_app_id(options, app_id, &err) != APPNORTH_OK ||
        appnorth_client_options_set_credential(options, email, token, &err) != APPNORTH_OK ||
        appnorth_client_options_set_timeouts(options, 5000, 5000, &err) != APPNORTH_OK ||
        appnorth_client_new(options, &client, &err) != APPNORTH_OK)
        fail("creating a client", &err);
    appnorth_client_options_free(options); /* the client keeps a copy */
    return client;
}

static int32_t pending(appnorth_queue *queue) {
    int32_t count = -1;
    appnorth_queue_pending_count(queue, &count, NULL);
    return count;
}

/* How many comments the server has on an idea, or -1. */
static int comment_count(appnorth_client *client, const char *idea_id) {
    char *text = NULL;
    appnorth_error err;
    if (appnorth_client_list_comments(client, idea_id, &text, &err) != APPNORTH_OK) return -1;
    json_t *reply = json_loads(text, 0, NULL);
    appnorth_string_free(text);
    int n = (int)json_array_size(json_object_get(reply, "comments"));
    json_decref(reply);
    return n;
}

/* Picks the app's first idea: its id and title into the buffers. */
static int first_idea(appnorth_client *client, char *id, size_t id_size, char *title, size_t title_size) {
    char *text = NULL;
    appnorth_error err;
    if (appnorth_client_list_ideas(client, "{\"limit\":1}", &text, &err) != APPNORTH_OK)
        return fail("listing ideas", &err);
    json_t *page = json_loads(text, 0, NULL);
    appnorth_string_free(text);
    json_t *idea = json_array_get(json_object_get(page, "ideas"), 0);
    const char *idea_id = json_string_value(json_object_get(idea, "id"));
    if (!idea_id) {
        json_decref(page);
        fprintf(stderr, "the app has no ideas; start the dev server with --seed-demo\n");
        return 1;
    }
    snprintf(id, id_size, "%s", idea_id);
    snprintf(title, title_size, "%s", json_string_value(json_object_get(idea, "title")));
    json_decref(page);
    return 0;
}

/* Step 1 and 2: a comment written offline is queued, then sent on flush. */
static int offline_then_flush(const char *api_url, appnorth_queue *queue, appnorth_client *client,
                              const char *idea_id, const char *title) {
    appnorth_error err;
    int before = comment_count(client, idea_id);

    printf("1. Offline: submit one comment on \"%s\"\n", title);
    lose_connectivity(api_url);
    int32_t submitted = -1;
    /* NULL key: the library makes one and keeps it with the entry, so a
     * replay can never be applied twice by the server. */
    if (appnorth_queue_submit_comment(queue, client, idea_id, "Written on the train, sent later", NULL,
                                      &submitted, &err) != APPNORTH_OK)
        return fail("submitting the comment", &err);
    printf("   submit: %s\n", submitted ? "sent" : "queued");
    printf("   pending: %d\n", pending(queue));

    printf("2. Reconnect and flush\n");
    reconnect(api_url);
    int32_t sent = 0;
    if (appnorth_queue_flush(queue, client, &sent, &err) != APPNORTH_OK) return fail("flushing", &err);
    printf("   flush: sent %d\n", sent);
    printf("   server comments on \"%s\": %d (before: %d)\n", title, comment_count(client, idea_id), before);
    printf("   pending: %d\n", pending(queue));
    return 0;
}

/* Step 3: an entry queued as ada is never sent by bob's client. */
static int switch_accounts(const char *api_url, const char *app_id, appnorth_queue *queue, const char *idea_id) {
    appnorth_error err;
    printf("3. Switch accounts before flushing\n");
    appnorth_client *ada = new_client(api_url, app_id, ADA, ADA_TOKEN);
    if (!ada) return 1;
    char *ada_scope = NULL;
    appnorth_client_scope(ada, &ada_scope, NULL);

    lose_connectivity(api_url);
    int32_t submitted = -1;
    int32_t rc = appnorth_queue_submit_comment(queue, ada, idea_id, "Ada's offline comment", NULL, &submitted, &err);
    if (rc == APPNORTH_OK) {
        printf("   %s submits offline: %s\n", ADA, submitted ? "sent" : "queued");
        printf("   pending: %d\n", pending(queue));
    }
    printf("   %s signs out, %s signs in\n", ADA, BOB);
    appnorth_client_free(ada);
    reconnect(api_url);
    if (rc != APPNORTH_OK) {
        appnorth_string_free(ada_scope);
        return fail("submitting as ada", &err);
    }

    appnorth_client *bob = new_client(api_url, app_id, BOB, BOB_TOKEN);
    int32_t sent = -1;
    rc = bob ? appnorth_queue_flush(queue, bob, &sent, &err) : APPNORTH_E_INVALID_ARGUMENT;
    appnorth_client_free(bob);
    if (rc != APPNORTH_OK) {
        appnorth_string_free(ada_scope);
        return fail("flushing as bob", &err);
    }
    printf("   %s flushes: sent %d\n", BOB, sent);
    printf("   pending: %d (ada's entry is not sent as bob)\n", pending(queue));

    /* Ada's logout, for good: discard her entries (the queue does not do it by
     * itself; the app's retention policy decides). */
    int32_t discarded = 0;
    rc = appnorth_queue_discard(queue, ada_scope, &discarded, &err);
    appnorth_string_free(ada_scope);
    if (rc != APPNORTH_OK) return fail("discarding ada's entries", &err);
    printf("   forgetting %s: discarded %d\n", ADA, discarded);
    printf("   pending: %d\n", pending(queue));
    return 0;
}

/* Prints one delivery of appnorth_read_boards. */
static void print_boards(int32_t source, const char *json, void *user_data) {
    (void)user_data;
    json_t *boards = json_loads(json, 0, NULL);
    printf("     %s %zu boards\n", source == APPNORTH_SOURCE_CACHE ? "[cache]  " : "[network]",
           json_array_size(boards));
    json_decref(boards);
}

/* Prints what the cache holds for a scope; `absent` says why it may not. */
static void show_cached_boards(appnorth_cache *cache, const char *scope, const char *when, const char *absent) {
    char *text = NULL;
    appnorth_cache_boards(cache, scope, &text, NULL);
    json_t *boards = text ? json_loads(text, 0, NULL) : NULL;
    if (boards)
        printf("   cache %s: %zu boards\n", when, json_array_size(boards));
    else
        printf("   cache %s: nothing (%s)\n", when, absent);
    json_decref(boards);
    appnorth_string_free(text);
}

/* Step 4: cached-then-fresh reads, and expiry on a manual clock. */
static int cache_ttl(appnorth_cache *cache, appnorth_clock *clock, appnorth_client *client) {
    appnorth_error err;
    char *scope = NULL;
    appnorth_client_scope(client, &scope, NULL);
    printf("4. Read cache (TTL %d s, manual clock)\n", APPNORTH_CACHE_DEFAULT_TTL_SECONDS);

    printf("   read boards, cache empty:\n");
    if (appnorth_read_boards(cache, client, print_boards, NULL, &err) != APPNORTH_OK) goto failed;
    printf("   read boards again, cached first, then fresh:\n");
    if (appnorth_read_boards(cache, client, print_boards, NULL, &err) != APPNORTH_OK) goto failed;

    appnorth_clock_advance(clock, (APPNORTH_CACHE_DEFAULT_TTL_SECONDS - 1) * 1000LL, NULL);
    show_cached_boards(cache, scope, "299 s later, before expiry", "?");
    appnorth_clock_advance(clock, 2 * 1000, NULL);
    show_cached_boards(cache, scope, "301 s later, after expiry", "expired entries read as absent, no stale data");
    printf("   read boards after expiry, network only:\n");
    if (appnorth_read_boards(cache, client, print_boards, NULL, &err) != APPNORTH_OK) goto failed;

    /* Logout: forget this account's cached reads. */
    if (appnorth_cache_clear(cache, scope, &err) != APPNORTH_OK) goto failed;
    show_cached_boards(cache, scope, "after logout", "cleared");
    appnorth_string_free(scope);
    return 0;
failed:
    appnorth_string_free(scope);
    return fail("reading through the cache", &err);
}

/* Creates a throwaway idea on the app's first board; its id into `id`. */
static int throwaway_idea(appnorth_client *client, char *id, size_t id_size) {
    char *text = NULL;
    appnorth_error err;
    if (appnorth_client_list_boards(client, &text, &err) != APPNORTH_OK) return fail("listing boards", &err);
    json_t *boards = json_loads(text, 0, NULL);
    appnorth_string_free(text);
    const char *board = json_string_value(json_object_get(json_array_get(json_object_get(boards, "boards"), 0), "id"));
    int32_t rc = board ? appnorth_client_submit_idea(client, board, "Soon withdrawn", "", NULL, &text, &err)
                       : APPNORTH_E_NOT_FOUND;
    json_decref(boards);
    if (rc != APPNORTH_OK) return fail("creating an idea", &err);
    json_t *reply = json_loads(text, 0, NULL);
    appnorth_string_free(text);
    snprintf(id, id_size, "%s", json_string_value(json_object_get(json_object_get(reply, "idea"), "id")));
    json_decref(reply);
    return 0;
}

/* Step 5: one entry the server refuses for good must not hold back the rest. */
static int poison_entry(const char *api_url, const char *app_id, appnorth_queue *queue, appnorth_client *client,
                        const char *idea_id, const char *title) {
    appnorth_error err;
    char doomed[64];
    printf("5. A queued comment whose idea is deleted before the flush\n");
    if (throwaway_idea(client, doomed, sizeof doomed) != 0) return 1;
    lose_connectivity(api_url);
    int32_t submitted = -1;
    int32_t rc = appnorth_queue_submit_comment(queue, client, doomed, "On an idea about to go", NULL, &submitted, &err);
    if (rc == APPNORTH_OK)
        rc = appnorth_queue_submit_comment(queue, client, idea_id, "A valid comment behind it", NULL, &submitted, &err);
    reconnect(api_url);
    if (rc != APPNORTH_OK) return fail("queueing the comments", &err);
    printf("   pending: %d\n", pending(queue));
    char path[256];
    snprintf(path, sizeof path, "/admin/apps/%s/ideas/%s", app_id, doomed);
    dev_admin(api_url, "DELETE", path, NULL);
    printf("   [dev server] idea %s deleted\n", doomed);

    /* The seed's rule: the failing entry stays pending and the flush
     * returns its error. flush_v2 also says which entry it was. */
    int32_t sent = 0;
    char *failed = NULL;
    rc = appnorth_queue_flush_v2(queue, client, &sent, &failed, &err);
    printf("   flush: %s (%s), sent %d, failing entry %s\n", appnorth_status_str(rc), err.message, sent,
           failed ? failed : "none");
    if (rc == APPNORTH_OK || !failed) {
        appnorth_string_free(failed);
        fprintf(stderr, "expected the flush to name a failing entry\n");
        return 1;
    }

    /* Inspect it: attempts and last error help decide that it can never
     * succeed. This app drops entries refused as NOT_FOUND. */
    char *listing = NULL;
    if (appnorth_queue_entries(queue, &listing, &err) == APPNORTH_OK) {
        json_t *entries = json_loads(listing, 0, NULL);
        size_t i;
        json_t *entry;
        json_array_foreach(entries, i, entry) {
            if (strcmp(json_string_value(json_object_get(entry, "id")), failed) != 0) continue;
            printf("   entry %s: %s, %lld attempts, last error \"%s\"\n", failed,
                   json_string_value(json_object_get(entry, "kind")),
                   (long long)json_integer_value(json_object_get(entry, "attempts")),
                   json_string_value(json_object_get(entry, "last_error")));
        }
        json_decref(entries);
        appnorth_string_free(listing);
    }
    int32_t discarded = 0;
    rc = rc == APPNORTH_E_NOT_FOUND ? appnorth_queue_discard_entry(queue, failed, &discarded, &err) : rc;
    appnorth_string_free(failed);
    if (rc != APPNORTH_OK) return fail("discarding the entry", &err);
    printf("   discarded that entry alone: %d\n", discarded);
    if (appnorth_queue_flush_v2(queue, client, &sent, NULL, &err) != APPNORTH_OK) return fail("flushing", &err);
    printf("   flush: sent %d; server comments on \"%s\": %d\n", sent, title, comment_count(client, idea_id));
    printf("   pending: %d\n", pending(queue));
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s API_URL APP_ID DATA_DIR\n", argv[0]);
        return 2;
    }
    const char *api_url = argv[1], *app_id = argv[2], *data_dir = argv[3];
    int status = 1;
    appnorth_error err;
    appnorth_client *guest = NULL;
    appnorth_storage *queue_storage = NULL, *cache_storage = NULL;
    appnorth_queue *queue = NULL;
    appnorth_cache *cache = NULL;
    appnorth_clock *clock = NULL;

    /* Dev server only: the two accounts of step 3. */
    char user[256];
    snprintf(user, sizeof user, "{\"app\":\"%s\",\"email\":\"%s\",\"token\":\"%s\"}", app_id, ADA, ADA_TOKEN);
    dev_admin(api_url, "POST", "/admin/users", user);
    snprintf(user, sizeof user, "{\"app\":\"%s\",\"email\":\"%s\",\"token\":\"%s\"}", app_id, BOB, BOB_TOKEN);
    dev_admin(api_url, "POST", "/admin/users", user);

    /* Separate storages for the queue and the cache, in one private data
     * directory (created 0700; the database file is 0600). */
    if (appnorth_storage_new_sqlite(data_dir, "queue", &queue_storage, &err) != APPNORTH_OK ||
        appnorth_storage_new_sqlite(data_dir, "cache", &cache_storage, &err) != APPNORTH_OK ||
        appnorth_queue_new(queue_storage, 0, &queue, &err) != APPNORTH_OK) {
        fail("opening the data directory", &err);
        goto done;
    }
    /* A manual clock starting now: step 4 moves it past the TTL. */
    if (appnorth_clock_new_manual((int64_t)time(NULL) * 1000, &clock, &err) != APPNORTH_OK ||
        appnorth_cache_new(cache_storage, 0, clock, &cache, &err) != APPNORTH_OK) {
        fail("opening the cache", &err);
        goto done;
    }
    printf("offline_comment: %s, app %s, data in %s\n", api_url, app_id, data_dir);
    if (pending(queue) > 0) {
        /* Left by an interrupted earlier run; this walk-through starts clean. */
        int32_t discarded = 0;
        appnorth_queue_discard(queue, NULL, &discarded, NULL);
        printf("(discarded %d entries left by an earlier run)\n", discarded);
    }

    guest = new_client(api_url, app_id, NULL, NULL);
    char idea_id[64], title[256];
    if (!guest || first_idea(guest, idea_id, sizeof idea_id, title, sizeof title) != 0) goto done;
    if (offline_then_flush(api_url, queue, guest, idea_id, title) != 0) goto done;
    if (switch_accounts(api_url, app_id, queue, idea_id) != 0) goto done;
    if (cache_ttl(cache, clock, guest) != 0) goto done;
    if (poison_entry(api_url, app_id, queue, guest, idea_id, title) != 0) goto done;
    printf("done: pending %d\n", pending(queue));
    status = 0;

done:
    appnorth_cache_free(cache);
    appnorth_queue_free(queue);
    appnorth_storage_free(cache_storage);
    appnorth_storage_free(queue_storage);
    appnorth_clock_free(clock);
    appnorth_client_free(guest);
    return status;
}
