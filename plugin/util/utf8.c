/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: UTF-8 decoding.  See include/utf8.h. */

#include <stddef.h>

#include "utf8.h"

size_t
utf8_decode (const unsigned char *s, size_t n, unsigned *cp)
{
  size_t len;
  unsigned min, c;

  if (s[0] < 0x80)
    len = 1, min = 0, c = s[0];
  else if ((s[0] & 0xe0) == 0xc0)
    len = 2, min = 0x80, c = s[0] & 0x1f;
  else if ((s[0] & 0xf0) == 0xe0)
    len = 3, min = 0x800, c = s[0] & 0x0f;
  else if ((s[0] & 0xf8) == 0xf0)
    len = 4, min = 0x10000, c = s[0] & 0x07;
  else
    return 0;
  if (len > n)
    return 0;
  for (size_t i = 1; i < len; ++i) {
    if ((s[i] & 0xc0) != 0x80)
      return 0;
    c = c << 6 | (s[i] & 0x3f);
  }
  if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
    return 0;
  *cp = c;
  return len;
}
