// The C side of the config listener trampoline. The library calls a C
// function pointer with `const char *` arguments and a `void *user_data`;
// Go exports functions with plain `char *` and must not receive a Go
// pointer back through C. So the C function pointer is this trampoline, and
// user_data carries a runtime/cgo.Handle (an integer) that Go turns back
// into its listener.
#include <stdint.h>
#include <appnorth.h>
#include "_cgo_export.h"

static void config_trampoline(const char *config_json, const char *changed_keys_json, int32_t tier,
                              void *user_data) {
    goConfigListener((char *)config_json, (char *)changed_keys_json, tier, (uintptr_t)user_data);
}

int32_t go_config_add_listener(appnorth_config *config, uintptr_t handle, int64_t *out_token,
                               appnorth_error *err) {
    return appnorth_config_add_listener(config, config_trampoline, (void *)handle, out_token, err);
}
