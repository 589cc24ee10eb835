#include <zlib.h>

/* deflateInit2 is a macro over deflateInit2_, which Swift cannot call.
 * windowBits 15 + 16 asks zlib for the gzip wrapper (RFC 1952) that
 * Content-Encoding: gzip means; memLevel 8 is zlib's default. */
static inline int czlib_deflate_init_gzip(z_stream *stream, int level) {
    return deflateInit2(stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
}
