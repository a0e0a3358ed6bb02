/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the raw text of a volume config file, beside libconfig.
 *
 * The loader (config.c) has libconfig 1.5 parse a config, but reads the
 * file here first, once: libconfig and the small lexer of this file then
 * see the same bytes, even if the file is rewritten meanwhile.  The lexer
 * follows libconfig's closely enough to skip comments and strings, and
 * finds what libconfig 1.5 does not tell, or gets wrong:
 * - integers that libconfig would truncate: an integer without the L
 *   suffix is read into an int, so "chunk = 4294971392" would become 4096
 *   and "port = 4294977105" 9809;
 * - @include, which the loader refuses before libconfig opens the
 *   included file: one file describes one volume;
 * - the line of a list element: libconfig records the line it had reached
 *   when it finished reading the element, which for the last element of a
 *   list written one per line is the line of the "]";
 * - adjacent strings, which libconfig joins into one: a comma forgotten
 *   between two members makes one member of both paths;
 * - a size written without quotes (chunk = 128K), for which libconfig
 *   says only "syntax error".
 * Anything else it does not understand is left to libconfig.  It only
 * finds: what to say about it is the loader's business (apart from why the
 * file could not be read).  Internal to plugin/.
 */
#ifndef NBDSTRIPE_CONFIG_TEXT_H
#define NBDSTRIPE_CONFIG_TEXT_H

#include <stdbool.h>
#include <stddef.h>

struct config_text {
  char *text; /* the whole file, NUL-terminated; no NUL inside */
  size_t len;
};

/* Reads the regular file path whole into t.  On failure returns -1 with
 * what is wrong in why ("is a FIFO, expected ...", strerror, "a NUL
 * byte: ...") and where in *line (0: the file as a whole); t is left
 * empty then.  Never waits for a writer (a FIFO is refused, not read),
 * and refuses a file larger than a config can be.
 */
extern int config_text_read (const char *path, struct config_text *t,
                             int *line, char *why, size_t whylen);
extern void config_text_free (struct config_text *t);

/* What config_text_scan finds, in file order. */
struct config_text_found {
  int include_line;   /* the first @include (the scan stops there), 0: none */
  int truncated_line; /* the first integer libconfig would truncate, 0: none */
  char truncated[48]; /* that integer as written, at most 40 characters */
};

extern void config_text_scan (const struct config_text *t,
                              struct config_text_found *found);

/* The line where element idx of the list named name (whose setting is on
 * line line) starts, or 0 when it cannot be found.  Elements are counted
 * by the commas between them, so that adjacent strings ("a" "b", which
 * libconfig joins) count as one.
 */
extern int config_text_element_line (const struct config_text *t,
                                     const char *name, int line, int idx);

/* Where the string element idx of the top-level list named name (the
 * setting outside every group: "members") is in the text: [*start, *end)
 * from its first string to its last (adjacent strings, which libconfig
 * joins, are one element).  -1 when there is no such setting at the top
 * level, it is not a list or array, it has no element idx, or that
 * element is anything but strings.  Comments and strings elsewhere --
 * a comment naming a member, another setting with the same name inside
 * a group -- are never taken for it.
 */
extern int config_text_element_span (const struct config_text *t,
                                     const char *name, int idx,
                                     size_t *start, size_t *end);

/* Whether element idx of the top-level list named name (as
 * config_text_element_span finds it) is adjacent strings of which one
 * after the first starts a path or a URI on its own ("/a/m0" "/a/m1":
 * a comma forgotten; "/srv/" "m0" is one path written in two): then
 * the line where the string before it ends (where the comma belongs) in
 * *line, and the two as written (quotes included, each cut at 60
 * characters) in first and second.
 */
extern bool config_text_element_joined (const struct config_text *t,
                                        const char *name, int idx, int *line,
                                        char first[64], char second[64]);

/* A size written without quotes (a number followed at once by a size
 * suffix: 128K, 4G, 1MiB) on line line: true, with the key it is the
 * value of ("" when none is on that line) in key and the size as
 * written in size.
 */
extern bool config_text_unquoted_size (const struct config_text *t, int line,
                                       char key[64], char size[32]);

/* What to delete to drop element idx of the top-level list named name
 * (as config_text_element_span finds it) with one comma next to it: the
 * comma after it, or, for the last element, the comma before it.  One or
 * two spans [cut[k][0], cut[k][1]) in *nr, in text order, none of them
 * reaching a comment: the element's own tokens, and the comma (joined to
 * the element's span when nothing but space is between them).  -1 as
 * config_text_element_span.
 */
extern int config_text_element_cut (const struct config_text *t,
                                    const char *name, int idx,
                                    size_t cut[2][2], unsigned *nr);

/* Where the top-level setting named name is in the text, [*start, *end)
 * from its name to the ; or , that ends it (or to the end of the text):
 * -1 when there is none at the top level.
 */
extern int config_text_setting_span (const struct config_text *t,
                                     const char *name, size_t *start,
                                     size_t *end);

#endif /* NBDSTRIPE_CONFIG_TEXT_H */
