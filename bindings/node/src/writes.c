/* The client's writes (non-blocking, each a Promise) and the feedback builder. */
#include "addon.h"

#include <stdlib.h>

/* submitIdea(client, boardId, title, body, key) */
static napi_value submit_idea(napi_env env, napi_callback_info info) {
    static const char *const names[] = {"boardId", "title", "?body", "?idempotencyKey", NULL};
    an_start k;
    if (!an_start_args(env, info, AN_CLIENT, names, &k) || !an_start_op(env, &k)) return NULL;
    return an_start_end(env, &k, appnorth_client_submit_idea_async(k.client->h.ptr, k.s[0], k.s[1], k.s[2], k.s[3],
                                                                   AN_TAIL(k)));
}

/* submitComment(client, ideaId, body, key) */
static napi_value submit_comment(napi_env env, napi_callback_info info) {
    static const char *const names[] = {"ideaId", "body", "?idempotencyKey", NULL};
    an_start k;
    if (!an_start_args(env, info, AN_CLIENT, names, &k) || !an_start_op(env, &k)) return NULL;
    return an_start_end(env, &k,
                        appnorth_client_submit_comment_async(k.client->h.ptr, k.s[0], k.s[1], k.s[2], AN_TAIL(k)));
}

/* submitFeedback(client, feedback, key) */
static napi_value submit_feedback(napi_env env, napi_callback_info info) {
    an_start k;
    if (!an_start_args(env, info, AN_CLIENT, NULL, &k)) return NULL;
    an_handle *f = an_unwrap(env, k.a.argv[1], AN_FEEDBACK, "feedback");
    if (f == NULL || !an_string(env, k.a.argv[2], "idempotencyKey", true, &k.s[0]) || !an_start_op(env, &k)) {
        an_start_abort(&k);
        return NULL;
    }
    return an_start_end(env, &k, appnorth_client_submit_feedback_async(k.client->h.ptr, f->ptr, k.s[0], AN_TAIL(k)));
}

/* vote(client, ideaId, key) */
static napi_value vote(napi_env env, napi_callback_info info) {
    static const char *const names[] = {"ideaId", "?idempotencyKey", NULL};
    an_start k;
    if (!an_start_args(env, info, AN_CLIENT, names, &k) || !an_start_op(env, &k)) return NULL;
    return an_start_end(env, &k, appnorth_client_vote_async(k.client->h.ptr, k.s[0], k.s[1], AN_TAIL(k)));
}

/* sendChatMessage(client, body, key) */
static napi_value send_chat_message(napi_env env, napi_callback_info info) {
    static const char *const names[] = {"body", "?idempotencyKey", NULL};
    an_start k;
    if (!an_start_args(env, info, AN_CLIENT, names, &k) || !an_start_op(env, &k)) return NULL;
    return an_start_end(env, &k, appnorth_client_send_chat_message_async(k.client->h.ptr, k.s[0], k.s[1], AN_TAIL(k)));
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
