/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: a replace's insides, shared by its two files:
 *
 *   replace.c        the job as the mover runs it: the I/O path while it
 *                    copies, the copy, the switch, its end
 *   replace_start.c  the start: NEW checked and prepared (nothing is
 *                    written to it before every check has passed), and
 *                    on_failing's replace onto a spare
 *
 * Not for anyone else: include/replace.h is the interface.
 */
#ifndef NBDSTRIPE_REPLACE_IMPL_H
#define NBDSTRIPE_REPLACE_IMPL_H

#include <stdbool.h>

#include "member.h"
#include "mover.h"

/* The mover's positions are member INDEX's offsets. */
struct replace {
  struct mover mv; /* first */
  struct array *a; /* its spares, its spare policy */
  unsigned index;
  struct member newm; /* NEW (after the switch: old, to be closed) */
  bool newm_open;
  bool from_spare; /* NEW was taken from the volume's spares */
  bool automatic;  /* on_failing's (replace_params) */
  bool reshaping;  /* a grow or shrink stopped half-way (replace_start) */
  char *old_path, *new_path, *config;
  /* Under mv.lock. */
  bool config_updated;
  bool new_failed; /* NEW failed an operation: a spare goes back failing */
  char config_note[1024];
};

/* The replace as a mover job (replace.c). */
extern const struct mover_job replace_job;
/* Free r, giving a spare it took back as it was (refused before it
 * started), or as the job left it.
 */
extern void replace_discard (struct mover *mv);

#endif /* NBDSTRIPE_REPLACE_IMPL_H */
