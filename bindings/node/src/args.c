/* Arguments in, results out, errors: the checks every binding shares. */
#include "addon.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void throw_type(napi_env env, const char *code, const char *name, const char *expected) {
    char message[200];
    snprintf(message, sizeof message, "%s must be %s", name, expected);
    napi_throw_type_error(env, code, message);
}

static void throw_range(napi_env env, const char *name, const char *expected) {
    char message[200];
    snprintf(message, sizeof message, "%s must be %s", name, expected);
    napi_throw_range_error(env, "ERR_OUT_OF_RANGE", message);
}

static bool is_nullish(napi_env env, napi_value v) {
    napi_valuetype t;
    return napi_typeof(env, v, &t) == napi_ok && (t == napi_undefined || t == napi_null);
}

bool an_get_args(napi_env env, napi_callback_info info, an_args *a) {
    a->argc = AN_MAX_ARGS;
    if (napi_get_cb_info(env, info, &a->argc, a->argv, &a->self, NULL) != napi_ok) return false;
    napi_value undefined;
    napi_get_undefined(env, &undefined);
    for (size_t i = a->argc; i < AN_MAX_ARGS; i++) a->argv[i] = undefined;
    return true;
}

bool an_string(napi_env env, napi_value v, const char *name, bool nullable, char **out) {
    *out = NULL;
    if (nullable && is_nullish(env, v)) return true;
    size_t length = 0;
    if (napi_get_value_string_utf8(env, v, NULL, 0, &length) != napi_ok) {
        throw_type(env, "ERR_INVALID_ARG_TYPE", name, nullable ? "a string, null or undefined" : "a string");
        return false;
    }
    if (length > AN_MAX_STRING_BYTES) {
        throw_range(env, name, "at most 32 MiB of UTF-8");
        return false;
    }
    char *copy = malloc(length + 1);
    if (copy == NULL) {
        napi_throw_error(env, "ERR_MEMORY", "out of memory");
        return false;
    }
    size_t written = 0;
    napi_get_value_string_utf8(env, v, copy, length + 1, &written);
    if (memchr(copy, '\0', written) != NULL) {
        free(copy);
        throw_type(env, "ERR_INVALID_ARG_VALUE", name, "a string without NUL characters");
        return false;
    }
    *out = copy;
    return true;
}

void an_free_string(char *s) { free(s); }

static bool number(napi_env env, napi_value v, const char *name, double *out) {
    if (napi_get_value_double(env, v, out) != napi_ok) {
        throw_type(env, "ERR_INVALID_ARG_TYPE", name, "a number");
        return false;
    }
    return true;
}

bool an_int32(napi_env env, napi_value v, const char *name, int32_t lo, int32_t hi, int32_t *out) {
    double d;
    if (!number(env, v, name, &d)) return false;
    if (!(d >= lo && d <= hi) || floor(d) != d) {
        char expected[96];
        snprintf(expected, sizeof expected, "an integer from %d to %d", lo, hi);
        throw_range(env, name, expected);
        return false;
    }
    *out = (int32_t)d;
    return true;
}

bool an_int64(napi_env env, napi_value v, const char *name, int64_t *out) {
    bool lossless = true;
    if (napi_get_value_bigint_int64(env, v, out, &lossless) == napi_ok) {
        if (!lossless) throw_range(env, name, "within a signed 64-bit integer");
        return lossless;
    }
    double d;
    if (!number(env, v, name, &d)) return false;
    /* Safe integers only: beyond 2^53 a number is not the integer written. */
    if (!(d >= -9007199254740991.0 && d <= 9007199254740991.0) || floor(d) != d) {
        throw_range(env, name, "a safe integer or a bigint");
        return false;
    }
    *out = (int64_t)d;
    return true;
}

bool an_double(napi_env env, napi_value v, const char *name, double *out) {
    return number(env, v, name, out);
}

bool an_bool(napi_env env, napi_value v, const char *name, bool *out) {
    if (napi_get_value_bool(env, v, out) != napi_ok) {
        throw_type(env, "ERR_INVALID_ARG_TYPE", name, "a boolean");
        return false;
    }
    return true;
}

bool an_function(napi_env env, napi_value v, const char *name, bool nullable, napi_value *out) {
    napi_valuetype t;
    napi_typeof(env, v, &t);
    if (t == napi_function || (nullable && (t == napi_undefined || t == napi_null))) {
        *out = t == napi_function ? v : NULL;
        return true;
    }
    throw_type(env, "ERR_INVALID_ARG_TYPE", name, nullable ? "a function or null" : "a function");
    return false;
}

bool an_bytes(napi_env env, napi_value v, const char *name, void **data, size_t *length) {
    bool is_buffer = false, is_typed = false;
    napi_is_buffer(env, v, &is_buffer);
    if (is_buffer) return napi_get_buffer_info(env, v, data, length) == napi_ok;
    napi_is_typedarray(env, v, &is_typed);
    if (is_typed) {
        napi_typedarray_type type;
        size_t count, offset;
        napi_value arraybuffer;
        if (napi_get_typedarray_info(env, v, &type, &count, data, &arraybuffer, &offset) == napi_ok &&
            type == napi_uint8_array) {
            *length = count;
            return true;
        }
    }
    throw_type(env, "ERR_INVALID_ARG_TYPE", name, "a Buffer or Uint8Array");
    return false;
}

napi_value an_error_value(napi_env env, int32_t status, const appnorth_error *err) {
    an_env *e = an_env_get(env);
    napi_value fn, global, argv[3], result = NULL;
    napi_get_global(env, &global);
    napi_create_int32(env, status, &argv[0]);
    napi_create_int32(env, err != NULL ? err->http_status : 0, &argv[1]);
    const char *message = err != NULL && err->message[0] != '\0' ? err->message : appnorth_status_str(status);
    napi_create_string_utf8(env, message, NAPI_AUTO_LENGTH, &argv[2]);
    if (e != NULL && e->make_error != NULL && napi_get_reference_value(env, e->make_error, &fn) == napi_ok &&
        fn != NULL && napi_call_function(env, global, fn, 3, argv, &result) == napi_ok) {
        return result;
    }
    napi_create_error(env, NULL, argv[2], &result);
    return result;
}

void an_throw_status(napi_env env, int32_t status, const appnorth_error *err) {
    napi_throw(env, an_error_value(env, status, err));
}

bool an_ok(napi_env env, int32_t rc, const appnorth_error *err) {
    if (rc == APPNORTH_OK) return true;
    an_throw_status(env, rc, err);
    return false;
}

napi_value an_undefined(napi_env env) {
    napi_value v;
    napi_get_undefined(env, &v);
    return v;
}

napi_value an_str(napi_env env, const char *s) {
    napi_value v;
    if (s == NULL) napi_get_null(env, &v);
    else napi_create_string_utf8(env, s, NAPI_AUTO_LENGTH, &v);
    return v;
}

napi_value an_take(napi_env env, char *s) {
    napi_value v = an_str(env, s);
    appnorth_string_free(s);
    return v;
}

/* The small value makers: one Node-API call each. */
#define AN_MAKER(name, type, create)                                            \
    napi_value name(napi_env env, type value) {                                 \
        napi_value v;                                                           \
        create(env, value, &v);                                                 \
        return v;                                                               \
    }
AN_MAKER(an_i32, int32_t, napi_create_int32)
AN_MAKER(an_i64, int64_t, napi_create_int64)
AN_MAKER(an_f64, double, napi_create_double)
AN_MAKER(an_boolean, bool, napi_get_boolean)

void an_call(napi_env env, napi_ref ref, size_t argc, const napi_value *argv) {
    napi_value fn, global, result;
    if (ref == NULL || napi_get_reference_value(env, ref, &fn) != napi_ok || fn == NULL) return;
    napi_get_global(env, &global);
    if (napi_call_function(env, global, fn, argc, argv, &result) == napi_pending_exception) {
        napi_value exception;
        napi_get_and_clear_last_exception(env, &exception);
        napi_fatal_exception(env, exception); /* 'uncaughtException', as an emitter's throw */
    }
}

void an_export_all(napi_env env, napi_value exports, const an_export *list) {
    for (; list->name != NULL; list++) {
        napi_value fn;
        napi_create_function(env, list->name, NAPI_AUTO_LENGTH, list->fn, NULL, &fn);
        napi_set_named_property(env, exports, list->name, fn);
    }
}

bool an_optional_int32(napi_env env, napi_value obj, const char *name, int32_t lo, int32_t hi, int32_t *out) {
    napi_value v = an_prop(env, obj, name);
    napi_valuetype t;
    napi_typeof(env, v, &t);
    return t == napi_undefined || an_int32(env, v, name, lo, hi, out);
}

napi_value an_prop(napi_env env, napi_value obj, const char *name) {
    napi_value v = NULL;
    napi_valuetype t;
    napi_typeof(env, obj, &t);
    if (t != napi_object || napi_get_named_property(env, obj, name, &v) != napi_ok) return an_undefined(env);
    return v;
}
