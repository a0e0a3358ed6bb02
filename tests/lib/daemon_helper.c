/* SPDX-License-Identifier: BSD-3-Clause */
/* Small helpers for the tests of the nbdstripe command; deliberately
 * independent of the code under test.
 *
 *   daemon_helper free-port
 *       Print a TCP port on 127.0.0.1 that was free a moment ago (bound
 *       with port 0 and released).  Callers retry on "address in use".
 *   daemon_helper crc32c FILE OFFSET LENGTH
 *       Print the CRC32C (Castagnoli, reflected, init ~0, final xor ~0) of
 *       LENGTH bytes of FILE at OFFSET as a decimal number: a bit-at-a-time
 *       implementation, the oracle for the header checksum.
 *   daemon_helper wait-gone PID SECONDS
 *       Block until process PID (not necessarily our child) has exited:
 *       poll(2) on a pidfd, an event rather than a polling loop.  Exit
 *       status 0 when it has gone, 1 on timeout, 2 when pidfds are not
 *       supported (the caller falls back to `tail --pid`).
 */

#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

static int
free_port (void)
{
  struct sockaddr_in sin = { .sin_family = AF_INET };
  socklen_t len = sizeof sin;
  int fd = socket (AF_INET, SOCK_STREAM, 0);

  if (fd == -1) {
    perror ("socket");
    return 1;
  }
  sin.sin_addr.s_addr = htonl (INADDR_LOOPBACK);
  sin.sin_port = 0;
  if (bind (fd, (struct sockaddr *) &sin, sizeof sin) == -1
      || getsockname (fd, (struct sockaddr *) &sin, &len) == -1) {
    perror ("bind");
    close (fd);
    return 1;
  }
  printf ("%u\n", ntohs (sin.sin_port));
  close (fd);
  return 0;
}

static int
crc32c_file (const char *path, const char *off_s, const char *len_s)
{
  uint64_t off = strtoull (off_s, NULL, 0), len = strtoull (len_s, NULL, 0);
  uint32_t crc = 0xffffffff;
  FILE *fp = fopen (path, "rb");
  int c;

  if (fp == NULL || fseeko (fp, (off_t) off, SEEK_SET) == -1) {
    perror (path);
    return 1;
  }
  for (uint64_t i = 0; i < len; ++i) {
    if ((c = getc (fp)) == EOF) {
      fprintf (stderr, "%s: short file\n", path);
      fclose (fp);
      return 1;
    }
    crc ^= (uint32_t) c;
    for (int b = 0; b < 8; ++b)
      crc = (crc >> 1) ^ (0x82F63B78u & -(crc & 1u));
  }
  fclose (fp);
  printf ("%" PRIu32 "\n", crc ^ 0xffffffff);
  return 0;
}

static int
wait_gone (const char *pid_s, const char *secs_s)
{
  long pid = strtol (pid_s, NULL, 10);
  int ms = (int) (strtod (secs_s, NULL) * 1000);
  struct pollfd pfd = { .events = POLLIN };
  int r;

  pfd.fd = (int) syscall (SYS_pidfd_open, (pid_t) pid, 0);
  if (pfd.fd == -1) {
    if (errno == ESRCH)
      return 0; /* already gone */
    perror ("pidfd_open");
    return 2;
  }
  do
    r = poll (&pfd, 1, ms);
  while (r == -1 && errno == EINTR);
  close (pfd.fd);
  if (r == -1) {
    perror ("poll");
    return 2;
  }
  return r == 1 ? 0 : 1;
}

int
main (int argc, char **argv)
{
  if (argc == 4 && strcmp (argv[1], "wait-gone") == 0)
    return wait_gone (argv[2], argv[3]);
  if (argc == 2 && strcmp (argv[1], "free-port") == 0)
    return free_port ();
  if (argc == 5 && strcmp (argv[1], "crc32c") == 0)
    return crc32c_file (argv[2], argv[3], argv[4]);
  fprintf (stderr, "usage: daemon_helper free-port | crc32c FILE OFFSET LENGTH"
                   " | wait-gone PID SECONDS\n");
  return 2;
}
