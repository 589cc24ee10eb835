/* The client's writes (non-blocking, each a Promise) and the feedback builder. */
#include "addon.h"

#include <stdlib.h>

/* The strings of one write: up to four, freed together. */
typedef struct strings {
    char *s[4];
} strings;

static void strings_free(strings *s) {
    for (int i = 0; i < 4; i++) an_free_string(s->s[i]);
}

/* Reads argv[first + i] as string i for each name (a name starting with '?'
 * may be null or undefined). */
static bool take_strings(napi_env env, const an_args *a, size_t first, const char *const *names, strings *out) {
    for (int i = 0; i < 4; i++) out->s[i] = NULL;
    for (int i = 0; names[i] != NULL; i++) {
        bool nullable = names[i][0] == '?';
        if (!an_string(env, a->argv[first + (size_t)i], names[i] + (nullable ? 1 : 0), nullable, &out->s[i])) {
            strings_free(out);
            return false;
        }
    }
    return true;
}

/* submitIdea(client, boardId, title, body, key) */
static napi_value submit_idea(napi_env env, napi_callback_info info) {
    static const char *const names[] = {"boardId", "title", "?body", "?idempotencyKey", NULL};
    an_args a;
    strings s;
    appnorth_error err;
    uint64_t op = 0;
    an_client *c = an_get_args(env, info, &a) ? an_client_arg(env, a.argv[0]) : NULL;
    if (c == NULL || !take_strings(env, &a, 1, names, &s)) return NULL;
    an_pending *p = an_pending_new(env, c, a.argv[0], NULL);
    int32_t rc = p != NULL ? appnorth_client_submit_idea_async(c->h.ptr, s.s[0], s.s[1], s.s[2], s.s[3], an_on_done, p,
                                                               &op, &err)
                           : 0;
    strings_free(&s);
    return an_pending_started(env, p, rc, op, &err);
}

/* submitComment(client, ideaId, body, key) */
static napi_value submit_comment(napi_env env, napi_callback_info info) {
    static const char *const names[] = {"ideaId", "body", "?idempotencyKey", NULL};
    an_args a;
    strings s;
    appnorth_error err;
    uint64_t op = 0;
    an_client *c = an_get_args(env, info, &a) ? an_client_arg(env, a.argv[0]) : NULL;
    if (c == NULL || !take_strings(env, &a, 1, names, &s)) return NULL;
    an_pending *p = an_pending_new(env, c, a.argv[0], NULL);
    int32_t rc =
        p != NULL ? appnorth_client_submit_comment_async(c->h.ptr, s.s[0], s.s[1], s.s[2], an_on_done, p, &op, &err) : 0;
    strings_free(&s);
    return an_pending_started(env, p, rc, op, &err);
}

/* submitFeedback(client, feedback, key) */
static napi_value submit_feedback(napi_env env, napi_callback_info info) {
    static const char *const names[] = {"?idempotencyKey", NULL};
    an_args a;
    strings s;
    appnorth_error err;
    uint64_t op = 0;
    an_client *c = an_get_args(env, info, &a) ? an_client_arg(env, a.argv[0]) : NULL;
    an_handle *f = c != NULL ? an_unwrap(env, a.argv[1], AN_FEEDBACK, "feedback") : NULL;
    if (f == NULL || !take_strings(env, &a, 2, names, &s)) return NULL;
    an_pending *p = an_pending_new(env, c, a.argv[0], NULL);
    int32_t rc =
        p != NULL ? appnorth_client_submit_feedback_async(c->h.ptr, f->ptr, s.s[0], an_on_done, p, &op, &err) : 0;
    strings_free(&s);
    return an_pending_started(env, p, rc, op, &err);
}

/* vote(client, ideaId, key) */
static napi_value vote(napi_env env, napi_callback_info info) {
    static const char *const names[] = {"ideaId", "?idempotencyKey", NULL};
    an_args a;
    strings s;
    appnorth_error err;
    uint64_t op = 0;
    an_client *c = an_get_args(env, info, &a) ? an_client_arg(env, a.argv[0]) : NULL;
    if (c == NULL || !take_strings(env, &a, 1, names, &s)) return NULL;
    an_pending *p = an_pending_new(env, c, a.argv[0], NULL);
    int32_t rc = p != NULL ? appnorth_client_vote_async(c->h.ptr, s.s[0], s.s[1], an_on_done, p, &op, &err) : 0;
    strings_free(&s);
    return an_pending_started(env, p, rc, op, &err);
}

/* sendChatMessage(client, body, key) */
static napi_value send_chat_message(napi_env env, napi_callback_info info) {
    static const char *const names[] = {"body", "?idempotencyKey", NULL};
    an_args a;
    strings s;
    appnorth_error err;
    uint64_t op = 0;
    an_client *c = an_get_args(env, info, &a) ? an_client_arg(env, a.argv[0]) : NULL;
    if (c == NULL || !take_strings(env, &a, 1, names, &s)) return NULL;
    an_pending *p = an_pending_new(env, c, a.argv[0], NULL);
    int32_t rc =
        p != NULL ? appnorth_client_send_chat_message_async(c->h.ptr, s.s[0], s.s[1], an_on_done, p, &op, &err) : 0;
    strings_free(&s);
    return an_pending_started(env, p, rc, op, &err);
}

/* ---- feedback -------------------------------------------------------------- */

static napi_value feedback_new(napi_env env, napi_callback_info info) {
    (void)info;
    an_handle *h = calloc(1, sizeof *h);
    appnorth_feedback *f = appnorth_feedback_new();
    if (h == NULL || f == NULL) {
        free(h);
        appnorth_feedback_free(f);
        napi_throw_error(env, "ERR_MEMORY", "out of memory");
        return NULL;
    }
    h->kind = AN_FEEDBACK;
    h->ptr = f;
    return an_wrap(env, an_env_get(env), h);
}

/* feedbackSetText(feedback, text) / feedbackSetDiagnostics(feedback, json|null) */
static napi_value feedback_set(napi_env env, napi_callback_info info, bool diagnostics) {
    an_args a;
    appnorth_error err;
    char *text = NULL;
    an_handle *f = an_get_args(env, info, &a) ? an_unwrap(env, a.argv[0], AN_FEEDBACK, "feedback") : NULL;
    if (f == NULL || !an_string(env, a.argv[1], diagnostics ? "diagnostics" : "text", diagnostics, &text)) return NULL;
    int32_t rc = diagnostics ? appnorth_feedback_set_diagnostics(f->ptr, text, &err)
                             : appnorth_feedback_set_text(f->ptr, text, &err);
    an_free_string(text);
    return an_ok(env, rc, &err) ? an_undefined(env) : NULL;
}

static napi_value feedback_set_text(napi_env env, napi_callback_info info) { return feedback_set(env, info, false); }
static napi_value feedback_set_diagnostics(napi_env env, napi_callback_info info) {
    return feedback_set(env, info, true);
}

/* feedbackAddScreenshot(feedback, bytes, contentType) */
static napi_value feedback_add_screenshot(napi_env env, napi_callback_info info) {
    an_args a;
    appnorth_error err;
    void *bytes = NULL;
    size_t length = 0;
    char *type = NULL;
    an_handle *f = an_get_args(env, info, &a) ? an_unwrap(env, a.argv[0], AN_FEEDBACK, "feedback") : NULL;
    if (f == NULL || !an_bytes(env, a.argv[1], "bytes", &bytes, &length) ||
        !an_string(env, a.argv[2], "contentType", false, &type))
        return NULL;
    int32_t rc = appnorth_feedback_add_screenshot(f->ptr, bytes, length, type, &err);
    an_free_string(type);
    return an_ok(env, rc, &err) ? an_undefined(env) : NULL;
}

void an_init_writes(napi_env env, napi_value exports) {
    static const an_export list[] = {
        {"submitIdea", submit_idea},
        {"submitComment", submit_comment},
        {"submitFeedback", submit_feedback},
        {"vote", vote},
        {"sendChatMessage", send_chat_message},
        {"feedbackNew", feedback_new},
        {"feedbackSetText", feedback_set_text},
        {"feedbackSetDiagnostics", feedback_set_diagnostics},
        {"feedbackAddScreenshot", feedback_add_screenshot},
        {NULL, NULL},
    };
    an_export_all(env, exports, list);
}
