/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: UTF-8 decoding, for the JSON and the terminal output of the
 * plugin's status file, `nbdstripe inspect --json` and `nbdstripe status`
 * (paths and names may hold any byte).
 */
#ifndef NBDSTRIPE_UTF8_H
#define NBDSTRIPE_UTF8_H

#include <stddef.h>

/* The code point of the valid UTF-8 sequence at s (at most n bytes) and
 * its length, or 0 if it is not one (overlong, surrogate, beyond
 * U+10FFFF, truncated).  A NUL ends a sequence (it is no continuation
 * byte), so n = 4 is safe on a NUL-terminated string.
 */
extern size_t utf8_decode (const unsigned char *s, size_t n, unsigned *cp);

#endif /* NBDSTRIPE_UTF8_H */
