/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the rules across a config's keys, checked after the walk
 * and pointing at the line of the setting that has to change.
 */

#include <string.h>

#include "config_impl.h"
#include "header.h"

int
loader_check_required (struct loader *ld)
{
  if (ld->cfg->name == NULL)
    return loader_error_line (
      ld, 0,
      "name: missing: every volume needs a name "
      "(1 to 63 characters from A-Z a-z 0-9 . _ -), e.g. "
      "name = \"fast0\";");
  if (ld->cfg->nr_members == 0)
    return loader_error_line (ld, 0,
                              "members: missing: list the member paths in "
                              "order, e.g. members = [ \"/dev/nvme0n1\", "
                              "\"/dev/nvme1n1\" ];");
  return 0;
}

/* A reshape under way: the joining members follow the members (the
 * union the members' headers number them in); the leaving one is one of
 * them; none of them was removed.
 */
int
loader_check_reshape (struct loader *ld)
{
  struct stripe_config *cfg = ld->cfg;

  if (ld->nr_joining && ld->leaving)
    return loader_error_line (ld, ld->leaving_line,
                              "leaving: a volume is grown (joining) or shrunk "
                              "(leaving), not both at once");
  if (cfg->nr_members + ld->nr_joining > LAYOUT_MAX_MEMBERS)
    return loader_error_line (ld, 0,
                              "joining: %u members with the joining ones: "
                              "at most %d are supported",
                              cfg->nr_members + ld->nr_joining,
                              LAYOUT_MAX_MEMBERS);
  for (unsigned j = 0; j < ld->nr_joining; ++j) {
    for (unsigned i = 0; i < cfg->nr_members; ++i)
      if (strcmp (ld->joining[j], cfg->members[i]) == 0)
        return loader_error_line (
          ld, 0, "joining: \"%s\" is members[%u] already", ld->joining[j], i);
    cfg->members[cfg->nr_members++] = ld->joining[j];
    ld->joining[j] = NULL;
  }
  cfg->nr_joining = ld->nr_joining;
  if (ld->leaving) {
    for (unsigned i = 0; i < cfg->nr_members; ++i)
      if (strcmp (ld->leaving, cfg->members[i]) == 0) {
        cfg->leaving = i;
        cfg->has_leaving = true;
      }
    if (!cfg->has_leaving)
      return loader_error_line (ld, ld->leaving_line,
                                "leaving: \"%s\" is none of the members",
                                ld->leaving);
    if (cfg->nr_members == 1)
      return loader_error_line (ld, ld->leaving_line,
                                "leaving: the only member cannot leave");
  }
  for (unsigned r = 0; r < cfg->nr_removed; ++r)
    for (unsigned i = 0; i < cfg->nr_members; ++i)
      if (strcmp (cfg->removed[r], cfg->members[i]) == 0)
        return loader_error_line (
          ld, 0,
          "removed: \"%s\" was removed from the volume and "
          "is members[%u] again: a removed member is never "
          "served again (drop it from removed to use the "
          "device anew, after 'nbdstripe create --force')",
          cfg->removed[r], i);
  return 0;
}

/* A spare is none of the members (joining ones included, after
 * loader_check_reshape) and none of the removed ones: a device is used one
 * way. on_failing = "replace" without a spare loads, but is said.
 */
int
loader_check_spares (struct loader *ld, const config_t *conf)
{
  struct stripe_config *cfg = ld->cfg;

  for (unsigned k = 0; k < cfg->nr_spares; ++k) {
    for (unsigned i = 0; i < cfg->nr_members; ++i)
      if (strcmp (cfg->spares[k], cfg->members[i]) == 0)
        return loader_error_line (
          ld, ld->spare_line[k],
          "spares[%u]: \"%s\" is %s[%u] too: a device is "
          "a member or a spare, not both",
          k, cfg->spares[k],
          i < cfg->nr_members - cfg->nr_joining ? "members" : "joining",
          i < cfg->nr_members - cfg->nr_joining
            ? i
            : i - (cfg->nr_members - cfg->nr_joining));
    for (unsigned r = 0; r < cfg->nr_removed; ++r)
      if (strcmp (cfg->spares[k], cfg->removed[r]) == 0)
        return loader_error_line (
          ld, ld->spare_line[k],
          "spares[%u]: \"%s\" was removed from the volume "
          "(removed[%u]): a removed member is never used "
          "again (drop it from removed, and wipe it, to make "
          "it a spare)",
          k, cfg->spares[k], r);
  }
  if (cfg->on_failing == ON_FAILING_REPLACE && cfg->nr_spares == 0)
    return loader_warn_at (
      ld, config_lookup (conf, "on_failing"),
      "\"replace\" but no spares: a failing member is "
      "reported, never replaced (list devices in spares = "
      "[ ... ])");
  return 0;
}

int
loader_check_data_offset (struct loader *ld, const config_t *conf)
{
  const config_setting_t *s = config_lookup (conf, "data_offset");
  struct stripe_config *cfg = ld->cfg;

  if (cfg->metadata == METADATA_NONE) {
    /* Without metadata data starts where the config says: 0 unless
     * given (an mdadm --build array, dm-stripe), an offset for members
     * that keep something else in front.
     */
    if (!cfg->data_offset_given)
      cfg->data_offset = 0;
  }
  else if (cfg->metadata == METADATA_MD) {
    /* A v1.2 superblock at 4 KiB, 4 KiB long: data after it. */
    if (cfg->data_offset < 2 * HEADER_SIZE)
      return loader_error_at (
        ld, s,
        "expected at least %u with metadata = \"md\": the "
        "md superblock (version 1.2) is at 4096, %u bytes "
        "long",
        2 * HEADER_SIZE, HEADER_SIZE);
  }
  else if (cfg->data_offset < HEADER_SIZE)
    return loader_error_at (
      ld, s,
      "expected at least %u: the member header takes "
      "the first %u bytes (use metadata = \"none\" for data "
      "at offset 0)",
      HEADER_SIZE, HEADER_SIZE);
  return 0;
}

int
loader_check_serve (struct loader *ld, const config_t *conf)
{
  const config_setting_t *sock = config_lookup (conf, "serve.socket");
  const config_setting_t *address = config_lookup (conf, "serve.address");
  const config_setting_t *port = config_lookup (conf, "serve.port");

  if (sock && (port || address)) {
    const config_setting_t *tcp = port ? port : address;
    return loader_error_at (
      ld, tcp,
      "cannot be combined with serve.socket (line "
      "%u): serve either on a Unix socket or on TCP address "
      "+ port, not both",
      config_setting_source_line (sock));
  }
  if (address && !port)
    return loader_error_at (ld, address,
                            "needs serve.port: TCP is address + port "
                            "(for a Unix socket, give serve.socket instead)");
  return 0;
}

int
loader_check_tls (struct loader *ld, const config_t *conf)
{
  const config_setting_t *tls, *certs, *psk, *verify;
  const struct stripe_config *cfg = ld->cfg;

  tls = config_lookup (conf, "serve.tls");
  certs = config_lookup (conf, "serve.tls_certificates");
  psk = config_lookup (conf, "serve.tls_psk");
  verify = config_lookup (conf, "serve.tls_verify_peer");

  /* Over TCP without TLS anybody who can connect -- every local user
   * (while the Unix socket is root's), and every host that can reach the
   * address -- can read and write the volume: only if the config says
   * so, and then loudly.
   */
  if (cfg->serve.port != 0) {
    const char *addr = cfg->serve.address ? cfg->serve.address : "127.0.0.1";

    if (tls == NULL)
      return loader_error_at (
        ld, config_lookup (conf, "serve.port"),
        "TCP without TLS: every local user, and every host "
        "that can reach %s, could read and write the volume; "
        "set tls = \"require\" with tls_psk (a key file) or "
        "tls_certificates (a directory), or tls = \"off\" to "
        "accept that",
        addr);
    if (cfg->serve.tls == TLS_OFF
        && loader_warn_at (
             ld, tls,
             "\"off\" on TCP %s:%d: every local user, and every "
             "host that can reach that address, can read and write "
             "volume '%s' (tls = \"require\" with a key or "
             "certificates prevents it)",
             addr, cfg->serve.port, cfg->name)
             == -1)
      return -1;
  }

  /* TLS material without TLS is most likely a config where the operator
   * believes the export is encrypted: refuse rather than serve in clear.
   */
  if (cfg->serve.tls == TLS_OFF) {
    const config_setting_t *s = certs                        ? certs
                                : psk                        ? psk
                                : cfg->serve.tls_verify_peer ? verify
                                                             : NULL;
    if (s)
      return loader_error_at (ld, s,
                              "given but serve.tls is \"off\": set tls = "
                              "\"on\" or \"require\", or remove it");
    return 0;
  }
  if (!certs && !psk)
    return loader_error_at (ld, tls,
                            "\"%s\" needs serve.tls_certificates (a "
                            "directory) or serve.tls_psk (a file)",
                            cfg->serve.tls == TLS_ON ? "on" : "require");
  if (certs && psk) {
    const config_setting_t *later =
      config_setting_index (psk) > config_setting_index (certs) ? psk : certs;
    return loader_error_at (
      ld, later,
      "serve.tls_certificates (line %u) and "
      "serve.tls_psk (line %u) cannot both be given: choose "
      "X.509 certificates or a pre-shared key",
      config_setting_source_line (certs), config_setting_source_line (psk));
  }
  if (cfg->serve.tls_verify_peer && !certs)
    return loader_error_at (ld, verify,
                            "needs serve.tls_certificates: client "
                            "certificates are verified against its CA (with a "
                            "pre-shared key the key itself authenticates the "
                            "client)");
  return 0;
}
