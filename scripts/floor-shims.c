/* Linked into the release library only (scripts/build-release.sh), which is
 * linked against the floor's libstdc++ (GCC 10, Debian 11).
 *
 * The static Swift runtime was compiled with GCC 11+ headers and calls
 * std::__throw_bad_array_new_length(), which libstdc++ exports from
 * GLIBCXX_3.4.29 (GCC 11) on. std::bad_array_new_length is a
 * std::bad_alloc, and GCC 10 exports std::__throw_bad_alloc(): the same
 * failure, thrown as its base class. Hidden: nothing outside the library
 * sees it (the version script exports appnorth_* only). */
__attribute__((noreturn)) void _ZSt17__throw_bad_allocv(void);

__attribute__((visibility("hidden"), noreturn)) void _ZSt28__throw_bad_array_new_lengthv(void) {
    _ZSt17__throw_bad_allocv();
}
