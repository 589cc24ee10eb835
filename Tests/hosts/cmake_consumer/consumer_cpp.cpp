// The C++17 layer through the same imported target: appnorth.hpp sits next
// to appnorth.h in the package's include directory.
#include <appnorth.hpp>

#include <cstdio>

int main() {
    try {
        appnorth::Client client("ftp://not-a-valid-url", "demo");
        return 1;  // a bad URL must throw
    } catch (const appnorth::Error &e) {
        std::printf("consumer_cpp: %s, as expected\n", e.status_name());
        return e.status() == APPNORTH_E_INVALID_ARGUMENT && appnorth::version() == APPNORTH_VERSION_STRING ? 0 : 1;
    }
}
