/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdkit-stripe-plugin: the engine's log lines through nbdkit's sink
 * (see include/log.h).
 */
#ifndef NBDSTRIPE_LOG_NBDKIT_H
#define NBDSTRIPE_LOG_NBDKIT_H

/* From .load, before nbdkit forks: reads nbdkit's --log and points the
 * engine's log hooks at nbdkit's sink.
 */
extern void log_nbdkit_init (void);

#endif /* NBDSTRIPE_LOG_NBDKIT_H */
