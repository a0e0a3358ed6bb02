/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: libFuzzer target for the member header decoder.
 *
 * header_decode must survive any bytes (the sanitizers watch for overreads and
 * undefined behaviour), and whatever it accepts must re-encode to exactly
 * the bytes it was given: one valid encoding per header, so that no
 * information in an accepted header is silently dropped or rewritten.
 *
 * Random bytes almost never carry a valid CRC, which would leave the field
 * checks unexplored, so each input is decoded twice: as it is, and with its
 * CRC recomputed.
 *
 * Built by run_fuzz_header.sh with clang -fsanitize=fuzzer; gcc has no libFuzzer.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "header.h"

static void
check (const uint8_t *data, size_t size)
{
  struct header sb;
  const char *field = NULL;
  uint8_t again[HEADER_SIZE];
  char uuid[37];
  enum header_error err = header_decode (data, size, &sb, &field);

  if (header_strerror (err) == NULL)
    abort ();
  if ((err == HEADER_ERR_FIELD) != (field != NULL))
    abort ();
  if (err != HEADER_OK)
    return;
  if (size < HEADER_SIZE)
    abort ();
  header_encode (&sb, again);
  if (memcmp (again, data, HEADER_SIZE) != 0)
    abort ();
  header_uuid_format (sb.array_uuid, uuid);
  if (strlen (uuid) != 36)
    abort ();
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  uint8_t resealed[HEADER_SIZE];
  uint32_t crc;

  check (data, size);
  if (size >= HEADER_SIZE) {
    memcpy (resealed, data, HEADER_SIZE);
    crc = crc32c (0, resealed, HEADER_SIZE - 4);
    for (unsigned i = 0; i < 4; ++i)
      resealed[HEADER_SIZE - 4 + i] = (uint8_t) (crc >> (8 * i));
    check (resealed, HEADER_SIZE);
  }
  return 0;
}
