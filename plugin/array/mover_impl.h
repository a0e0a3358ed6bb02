/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: what mover.c and mover_copy.c share. */
#ifndef NBDSTRIPE_MOVER_IMPL_H
#define NBDSTRIPE_MOVER_IMPL_H

#include <stdbool.h>

#include "mover.h"

/* Whether a move in state s has ended. */
extern bool mover_final (enum mover_state s);

/* The copier thread (mover_start). */
extern void *mover_copier (void *arg);

#endif /* NBDSTRIPE_MOVER_IMPL_H */
