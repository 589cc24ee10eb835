/* Storage, the offline write queue (non-blocking submits and flushes), the
 * read cache and the manual clock. Local-disk calls are synchronous, as the
 * header allows (no network, no library thread waited for). */
#include "addon.h"

#include <stdlib.h>

static napi_value wrap_new(napi_env env, an_kind kind, void *ptr) {
    an_handle *h = calloc(1, sizeof *h);
    if (h == NULL) {
        napi_throw_error(env, "ERR_MEMORY", "out of memory");
        return NULL;
    }
    h->kind = kind;
    h->ptr = ptr;
    return an_wrap(env, an_env_get(env), h);
}

/* ---- storage ----------------------------------------------------------- */

/* storageSqlite(dataDir, name) */
static napi_value storage_sqlite(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err;
    char *dir = NULL, *name = NULL;
    appnorth_storage *storage = NULL;
    bool ok = an_get_args(env, info, &a) && an_string(env, a.argv[0], "dataDir", false, &dir) &&
              an_string(env, a.argv[1], "name", false, &name) &&
              an_ok(env, appnorth_storage_new_sqlite(dir, name, &storage, &err), &err);
    an_free_string(dir), an_free_string(name);
    return ok ? wrap_new(env, AN_STORAGE, storage) : NULL;
}

static napi_value storage_memory(napi_env env, napi_callback_info info) {
    (void)info;
    appnorth_error err;
    appnorth_storage *storage = NULL;
    if (!an_ok(env, appnorth_storage_new_memory(&storage, &err), &err)) return NULL;
    return wrap_new(env, AN_STORAGE, storage);
}

static napi_value storage_erase(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err;
    an_handle *s = an_get_args(env, info, &a) ? an_unwrap(env, a.argv[0], AN_STORAGE, "storage") : NULL;
    return s != NULL && an_ok(env, appnorth_storage_erase(s->ptr, &err), &err) ? an_undefined(env) : NULL;
}

/* ---- queue ------------------------------------------------------------------ */

/* queueNew(storage, maxEntries) */
static napi_value queue_new(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err;
    int32_t max = 0;
    appnorth_queue *queue = NULL;
    an_handle *s = an_get_args(env, info, &a) ? an_unwrap(env, a.argv[0], AN_STORAGE, "storage") : NULL;
    if (s == NULL || !an_int32(env, a.argv[1], "maxEntries", 0, 10000, &max) ||
        !an_ok(env, appnorth_queue_new(s->ptr, max, &queue, &err), &err))
        return NULL;
    return wrap_new(env, AN_QUEUE, queue);
}

/* queueSubmitIdea(queue, client, boardId, title, body, key) */
static napi_value queue_submit_idea(napi_env env, napi_callback_info info) {
    static const char *const names[] = {"boardId", "title", "?body", "?idempotencyKey", NULL};
    an_start k;
    if (!an_start_args(env, info, AN_QUEUE, names, &k) || !an_start_op(env, &k)) return NULL;
    return an_start_end(env, &k, appnorth_queue_submit_idea_async(k.owner->ptr, k.client->h.ptr, k.s[0], k.s[1],
                                                                  k.s[2], k.s[3], AN_TAIL(k)));
}

/* queueSubmitComment(queue, client, ideaId, body, key) */
static napi_value queue_submit_comment(napi_env env, napi_callback_info info) {
    static const char *const names[] = {"ideaId", "body", "?idempotencyKey", NULL};
    an_start k;
    if (!an_start_args(env, info, AN_QUEUE, names, &k) || !an_start_op(env, &k)) return NULL;
    return an_start_end(env, &k, appnorth_queue_submit_comment_async(k.owner->ptr, k.client->h.ptr, k.s[0], k.s[1],
                                                                     k.s[2], AN_TAIL(k)));
}

/* queueSubmitFeedback(queue, client, feedback, key) */
static napi_value queue_submit_feedback(napi_env env, napi_callback_info info) {
    an_start k;
    if (!an_start_args(env, info, AN_QUEUE, NULL, &k)) return NULL;
    an_handle *f = an_unwrap(env, k.a.argv[2], AN_FEEDBACK, "feedback");
    if (f == NULL || !an_string(env, k.a.argv[3], "idempotencyKey", true, &k.s[0]) || !an_start_op(env, &k)) {
        an_start_abort(&k);
        return NULL;
    }
    return an_start_end(env, &k, appnorth_queue_submit_feedback_async(k.owner->ptr, k.client->h.ptr, f->ptr, k.s[0],
                                                                      AN_TAIL(k)));
}

/* queueFlush(queue, client) */
static napi_value queue_flush(napi_env env, napi_callback_info info) {
    an_start k;
    if (!an_start_args(env, info, AN_QUEUE, NULL, &k) || !an_start_op(env, &k)) return NULL;
    return an_start_end(env, &k, appnorth_queue_flush_async(k.owner->ptr, k.client->h.ptr, AN_TAIL(k)));
}

static napi_value queue_pending_count(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err;
    int32_t count = 0;
    an_handle *q = an_get_args(env, info, &a) ? an_unwrap(env, a.argv[0], AN_QUEUE, "queue") : NULL;
    if (q == NULL || !an_ok(env, appnorth_queue_pending_count(q->ptr, &count, &err), &err)) return NULL;
    return an_i32(env, count);
}

static napi_value queue_entries(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err;
    char *json = NULL;
    an_handle *q = an_get_args(env, info, &a) ? an_unwrap(env, a.argv[0], AN_QUEUE, "queue") : NULL;
    if (q == NULL || !an_ok(env, appnorth_queue_entries(q->ptr, &json, &err), &err)) return NULL;
    return an_take(env, json);
}

/* queueDiscard(queue, scope|null) / queueDiscardEntry(queue, entryId) */
static napi_value queue_discard_common(napi_env env, napi_callback_info info, bool one) {
    an_args a;
    appnorth_error err;
    char *text = NULL;
    int32_t discarded = 0;
    an_handle *q = an_get_args(env, info, &a) ? an_unwrap(env, a.argv[0], AN_QUEUE, "queue") : NULL;
    if (q == NULL || !an_string(env, a.argv[1], one ? "entryId" : "scope", !one, &text)) return NULL;
    int32_t rc = one ? appnorth_queue_discard_entry(q->ptr, text, &discarded, &err)
                     : appnorth_queue_discard(q->ptr, text, &discarded, &err);
    an_free_string(text);
    return an_ok(env, rc, &err) ? an_i32(env, discarded) : NULL;
}

static napi_value queue_discard(napi_env env, napi_callback_info info) { return queue_discard_common(env, info, false); }
static napi_value queue_discard_entry(napi_env env, napi_callback_info info) {
    return queue_discard_common(env, info, true);
}

/* ---- clock ------------------------------------------------------------------- */

static napi_value clock_new(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err;
    int64_t wall = 0;
    appnorth_clock *clock = NULL;
    if (!an_get_args(env, info, &a) || !an_int64(env, a.argv[0], "wallMs", &wall) ||
        !an_ok(env, appnorth_clock_new_manual(wall, &clock, &err), &err))
        return NULL;
    return wrap_new(env, AN_CLOCK, clock);
}

/* clockAdvance(clock, ms) / clockSetWall(clock, wallMs) */
static napi_value clock_change(napi_env env, napi_callback_info info, bool advance) {
    an_args a;
    appnorth_error err;
    int64_t ms = 0;
    an_handle *c = an_get_args(env, info, &a) ? an_unwrap(env, a.argv[0], AN_CLOCK, "clock") : NULL;
    if (c == NULL || !an_int64(env, a.argv[1], "ms", &ms)) return NULL;
    int32_t rc = advance ? appnorth_clock_advance(c->ptr, ms, &err) : appnorth_clock_set_wall(c->ptr, ms, &err);
    return an_ok(env, rc, &err) ? an_undefined(env) : NULL;
}

static napi_value clock_advance(napi_env env, napi_callback_info info) { return clock_change(env, info, true); }
static napi_value clock_set_wall(napi_env env, napi_callback_info info) { return clock_change(env, info, false); }

/* ---- cache ------------------------------------------------------------------- */

/* cacheNew(storage, ttlSeconds, clock|null) */
static napi_value cache_new(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err;
    int32_t ttl = 0;
    napi_valuetype t;
    an_handle *clock = NULL;
    appnorth_cache *cache = NULL;
    an_handle *s = an_get_args(env, info, &a) ? an_unwrap(env, a.argv[0], AN_STORAGE, "storage") : NULL;
    if (s == NULL || !an_int32(env, a.argv[1], "ttlSeconds", 0, 31536000, &ttl)) return NULL;
    napi_typeof(env, a.argv[2], &t);
    if (t != napi_undefined && t != napi_null && (clock = an_unwrap(env, a.argv[2], AN_CLOCK, "clock")) == NULL)
        return NULL;
    if (!an_ok(env, appnorth_cache_new(s->ptr, ttl, clock != NULL ? clock->ptr : NULL, &cache, &err), &err))
        return NULL;
    return wrap_new(env, AN_CACHE, cache);
}

/* cacheStore(cache, scope, query|null, json, ideas) */
static napi_value cache_store(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err;
    char *scope = NULL, *query = NULL, *json = NULL;
    bool ideas = false;
    an_handle *c = an_get_args(env, info, &a) ? an_unwrap(env, a.argv[0], AN_CACHE, "cache") : NULL;
    bool ok = c != NULL && an_string(env, a.argv[1], "scope", false, &scope) &&
              an_string(env, a.argv[2], "query", true, &query) && an_string(env, a.argv[3], "json", false, &json) &&
              an_bool(env, a.argv[4], "ideas", &ideas);
    if (ok) {
        int32_t rc = ideas ? appnorth_cache_store_ideas(c->ptr, scope, query, json, &err)
                           : appnorth_cache_store_boards(c->ptr, scope, json, &err);
        ok = an_ok(env, rc, &err);
    }
    an_free_string(scope), an_free_string(query), an_free_string(json);
    return ok ? an_undefined(env) : NULL;
}

/* cacheGet(cache, scope, query|null, ideas) -> JSON text or null */
static napi_value cache_get(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err;
    char *scope = NULL, *query = NULL, *json = NULL;
    bool ideas = false;
    an_handle *c = an_get_args(env, info, &a) ? an_unwrap(env, a.argv[0], AN_CACHE, "cache") : NULL;
    bool ok = c != NULL && an_string(env, a.argv[1], "scope", false, &scope) &&
              an_string(env, a.argv[2], "query", true, &query) && an_bool(env, a.argv[3], "ideas", &ideas);
    if (ok) {
        int32_t rc = ideas ? appnorth_cache_ideas(c->ptr, scope, query, &json, &err)
                           : appnorth_cache_boards(c->ptr, scope, &json, &err);
        ok = an_ok(env, rc, &err);
    }
    an_free_string(scope), an_free_string(query);
    return ok ? an_take(env, json) : NULL;
}

static napi_value cache_clear(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err;
    char *scope = NULL;
    an_handle *c = an_get_args(env, info, &a) ? an_unwrap(env, a.argv[0], AN_CACHE, "cache") : NULL;
    if (c == NULL || !an_string(env, a.argv[1], "scope", false, &scope)) return NULL;
    bool ok = an_ok(env, appnorth_cache_clear(c->ptr, scope, &err), &err);
    an_free_string(scope);
    return ok ? an_undefined(env) : NULL;
}

void an_init_offline(napi_env env, napi_value exports) {
    static const an_export list[] = {
        {"storageSqlite", storage_sqlite},
        {"storageMemory", storage_memory},
        {"storageErase", storage_erase},
        {"queueNew", queue_new},
        {"queueSubmitIdea", queue_submit_idea},
        {"queueSubmitComment", queue_submit_comment},
        {"queueSubmitFeedback", queue_submit_feedback},
        {"queueFlush", queue_flush},
        {"queuePendingCount", queue_pending_count},
        {"queueEntries", queue_entries},
        {"queueDiscard", queue_discard},
        {"queueDiscardEntry", queue_discard_entry},
        {"clockNew", clock_new},
        {"clockAdvance", clock_advance},
        {"clockSetWall", clock_set_wall},
        {"cacheNew", cache_new},
        {"cacheStore", cache_store},
        {"cacheGet", cache_get},
        {"cacheClear", cache_clear},
        {NULL, NULL},
    };
    an_export_all(env, exports, list);
}
