/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe integration tests: preloaded into nbdkit (after libasan) only
 * in sanitizer builds.
 *
 * With libasan preloaded, nbdkit (any plugin, e.g. the stock file plugin:
 * `LD_PRELOAD=libasan.so nbdkit -f file file=/nonexistent`) deadlocks on
 * exit after an error message that used strerror: glibc's setlocale lock is
 * left with a negative reader count, and p11-kit's destructor (pulled in by
 * gnutls) then blocks forever in freelocale.  Making freelocale a no-op in
 * the nbdkit process lets it exit; the only cost is one locale object not
 * freed at exit.  This is a workaround for the environment, not for our
 * plugin.
 */
#include <locale.h>

void
freelocale (locale_t l)
{
  (void) l;
}
