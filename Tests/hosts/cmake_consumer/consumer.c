/* Links through appnorth::appnorth and checks that the header it found
 * matches the library it loaded. */
#include <appnorth.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    appnorth_client_options *options = appnorth_client_options_new();
    int ok = options != NULL && strcmp(appnorth_version(), APPNORTH_VERSION_STRING) == 0
             && appnorth_version_number() == APPNORTH_VERSION_NUMBER;
    appnorth_client_options_free(options);
    printf("consumer: header %s, library %s\n", APPNORTH_VERSION_STRING, appnorth_version());
    return ok ? 0 : 1;
}
