/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the raw text of a volume config file.  See config_text.h.
 *
 * The lexer skips what libconfig skips (comments: # // and C style;
 * strings, with their escapes and the lines they span) so that nothing
 * inside a comment or a string is taken for a key, a number or @include.
 */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "config_text.h"

/* A volume config is a few hundred bytes; anything much larger is not one
 * (and must not make a daemon read a huge file into memory).
 */
#define CONFIG_MAX_FILE_SIZE (1024 * 1024)

static bool
is_digit (char c)
{
  return c >= '0' && c <= '9';
}

static bool
is_xdigit (char c)
{
  return is_digit (c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static bool
is_name_start (char c)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '*';
}

static bool
is_name_char (char c)
{
  return is_name_start (c) || is_digit (c) || c == '-' || c == '_';
}

/* Does the integer literal [start, end) (sign, decimal or 0x hex, no L)
 * fit in an int?
 */
static bool
int_literal_fits (const char *start, const char *end, bool hex)
{
  char text[32], *e;

  if ((size_t) (end - start) >= sizeof text)
    return false;
  memcpy (text, start, end - start);
  text[end - start] = '\0';
  errno = 0;
  if (hex) {
    unsigned long long v = strtoull (text, &e, 16);
    return errno == 0 && v <= INT_MAX;
  }
  long long v = strtoll (text, &e, 10);
  return errno == 0 && v >= INT_MIN && v <= INT_MAX;
}

/* Skips one number starting at p (one of + - . 0-9); returns where it ends
 * and whether it is an integer that would be truncated.
 */
static const char *
scan_number (const char *p, const char *end, bool *truncated)
{
  const char *start = p;
  bool hex = false;

  *truncated = false;
  if (*p == '+' || *p == '-')
    p++;
  if (end - p > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')
      && is_xdigit (p[2])) {
    hex = true;
    for (p += 2; p < end && is_xdigit (*p); p++)
      ;
  }
  else {
    while (p < end && is_digit (*p))
      p++;
    if (p < end && (*p == '.' || *p == 'e' || *p == 'E')) {
      /* A float: never truncated. */
      while (p < end && (is_digit (*p) || *p == '.' || *p == 'e' || *p == 'E'))
        p++;
      if (p < end && (*p == '+' || *p == '-'))
        for (p++; p < end && is_digit (*p); p++)
          ;
      return p;
    }
  }
  if (p == start + 1 && !is_digit (*start))
    return p; /* a lone sign: libconfig's business */
  if (p < end && *p == 'L')
    return p; /* int64: read with atoll, wide enough */
  *truncated = !int_literal_fits (start, p, hex);
  return p;
}

enum token_type {
  TOKEN_END,
  TOKEN_NAME,
  TOKEN_STRING,
  TOKEN_NUMBER,
  TOKEN_INCLUDE,
  TOKEN_OTHER, /* one character: = : ; , [ ] ( ) { } ... */
};

struct lexer {
  const char *p, *end;
  int line;
};

struct token {
  enum token_type type;
  const char *start, *end;
  int line;
  bool truncated; /* an integer libconfig would truncate */
};

static void
skip_space_and_comments (struct lexer *lx)
{
  const char *p = lx->p, *end = lx->end;

  while (p < end) {
    if (*p == '\n') {
      lx->line++;
      p++;
    }
    else if (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\f' || *p == '\v')
      p++;
    else if (*p == '#' || (*p == '/' && end - p > 1 && p[1] == '/')) {
      while (p < end && *p != '\n')
        p++;
    }
    else if (*p == '/' && end - p > 1 && p[1] == '*') {
      for (p += 2; p < end && !(*p == '*' && end - p > 1 && p[1] == '/'); p++)
        if (*p == '\n')
          lx->line++;
      p = end - p >= 2 ? p + 2 : end;
    }
    else
      break;
  }
  lx->p = p;
}

/* Every token but TOKEN_END consumes at least one character. */
static void
next_token (struct lexer *lx, struct token *t)
{
  const char *p, *end = lx->end;

  skip_space_and_comments (lx);
  p = lx->p;
  t->start = p;
  t->line = lx->line;
  t->truncated = false;
  if (p == end)
    t->type = TOKEN_END;
  else if (*p == '"') {
    t->type = TOKEN_STRING;
    for (p++; p < end && *p != '"'; p++) {
      if (*p == '\\' && end - p > 1)
        p++;
      if (*p == '\n')
        lx->line++;
    }
    if (p < end)
      p++;
  }
  else if (end - p >= 8 && memcmp (p, "@include", 8) == 0) {
    t->type = TOKEN_INCLUDE;
    p += 8;
  }
  else if (is_name_start (*p)) {
    t->type = TOKEN_NAME;
    while (p < end && is_name_char (*p))
      p++;
  }
  else if (is_digit (*p) || *p == '+' || *p == '-' || *p == '.') {
    t->type = TOKEN_NUMBER;
    p = scan_number (p, end, &t->truncated);
  }
  else {
    t->type = TOKEN_OTHER;
    p++;
  }
  t->end = p;
  lx->p = p;
}

static void
lexer_init (struct lexer *lx, const struct config_text *t)
{
  lx->p = t->text;
  lx->end = t->text + t->len;
  lx->line = 1;
}

int
config_text_element_line (const struct config_text *text, const char *name,
                          int line, int idx)
{
  size_t len = strlen (name);
  struct lexer lx;
  struct token t;
  int depth = 0, k = 0;

  if (text->text == NULL)
    return 0;
  lexer_init (&lx, text);
  do {
    next_token (&lx, &t);
    if (t.type == TOKEN_END)
      return 0;
  } while (!(t.type == TOKEN_NAME && t.line == line
             && (size_t) (t.end - t.start) == len
             && memcmp (t.start, name, len) == 0));
  next_token (&lx, &t);
  if (t.type != TOKEN_OTHER || (*t.start != '=' && *t.start != ':'))
    return 0;
  next_token (&lx, &t);
  if (t.type != TOKEN_OTHER || (*t.start != '[' && *t.start != '('))
    return 0;
  for (;;) {
    next_token (&lx, &t);
    if (t.type == TOKEN_END)
      return 0;
    if (depth == 0 && k == idx)
      return t.line;
    if (t.type != TOKEN_OTHER)
      continue;
    if (*t.start == '[' || *t.start == '(' || *t.start == '{')
      depth++;
    else if (*t.start == ']' || *t.start == ')' || *t.start == '}') {
      if (depth-- == 0)
        return 0;
    }
    else if (*t.start == ',' && depth == 0)
      k++;
  }
}

int
config_text_element_span (const struct config_text *text, const char *name,
                          int idx, size_t *start, size_t *end)
{
  size_t len = strlen (name);
  struct lexer lx;
  struct token t, prev = { .type = TOKEN_END };
  int depth = 0, k = 0;
  const char *first = NULL, *last = NULL;
  bool found = false;

  if (text->text == NULL)
    return -1;
  lexer_init (&lx, text);
  /* The setting: NAME then = or :, at depth 0 (no group, list or array
   * open around it).
   */
  for (;;) {
    next_token (&lx, &t);
    if (t.type == TOKEN_END)
      return -1;
    if (t.type == TOKEN_OTHER) {
      if (*t.start == '{' || *t.start == '[' || *t.start == '(')
        depth++;
      else if ((*t.start == '}' || *t.start == ']' || *t.start == ')')
               && depth > 0)
        depth--;
      else if ((*t.start == '=' || *t.start == ':') && depth == 0
               && prev.type == TOKEN_NAME
               && (size_t) (prev.end - prev.start) == len
               && memcmp (prev.start, name, len) == 0) {
        found = true;
        break;
      }
    }
    prev = t;
  }
  if (!found)
    return -1;
  next_token (&lx, &t);
  if (t.type != TOKEN_OTHER || (*t.start != '[' && *t.start != '('))
    return -1;
  depth = 0;
  for (;;) {
    next_token (&lx, &t);
    if (t.type == TOKEN_END)
      return -1;
    if (t.type == TOKEN_OTHER
        && (*t.start == ']' || *t.start == ')' || *t.start == ',')
        && depth == 0) {
      if (k == idx) {
        if (first == NULL)
          return -1; /* an empty element */
        *start = first - text->text;
        *end = last - text->text;
        return 0;
      }
      if (*t.start != ',')
        return -1; /* the list ended before element idx */
      k++;
      continue;
    }
    if (k != idx) {
      if (t.type == TOKEN_OTHER
          && (*t.start == '[' || *t.start == '(' || *t.start == '{'))
        depth++;
      else if (t.type == TOKEN_OTHER
               && (*t.start == ']' || *t.start == ')' || *t.start == '}'))
        depth--;
      continue;
    }
    if (t.type != TOKEN_STRING)
      return -1; /* element idx is not (only) strings */
    if (first == NULL)
      first = t.start;
    last = t.end;
  }
}

int
config_text_element_cut (const struct config_text *text, const char *name,
                         int idx, size_t cut[2][2], unsigned *nr)
{
  size_t a, b, len = strlen (name);
  struct lexer lx;
  struct token t, prev = { .type = TOKEN_END };
  const char *before = NULL, *after = NULL; /* the commas around idx */
  const char *elem = NULL, *elem_end = NULL;
  int depth = 0, k = 0;

  if (config_text_element_span (text, name, idx, &a, &b) == -1)
    return -1;
  lexer_init (&lx, text);
  /* The setting, as config_text_element_span found it. */
  for (;;) {
    next_token (&lx, &t);
    if (t.type == TOKEN_END)
      return -1;
    if (t.type == TOKEN_OTHER) {
      if (*t.start == '{' || *t.start == '[' || *t.start == '(')
        depth++;
      else if ((*t.start == '}' || *t.start == ']' || *t.start == ')')
               && depth > 0)
        depth--;
      else if ((*t.start == '=' || *t.start == ':') && depth == 0
               && prev.type == TOKEN_NAME
               && (size_t) (prev.end - prev.start) == len
               && memcmp (prev.start, name, len) == 0)
        break;
    }
    prev = t;
  }
  next_token (&lx, &t); /* the [ or ( */
  depth = 0;
  for (;;) {
    next_token (&lx, &t);
    if (t.type == TOKEN_END)
      return -1;
    if (t.type == TOKEN_OTHER && depth == 0
        && (*t.start == ']' || *t.start == ')'))
      break;
    if (t.type == TOKEN_OTHER && depth == 0 && *t.start == ',') {
      if (k == idx - 1)
        before = t.start;
      else if (k == idx)
        after = t.start;
      k++;
      if (k > idx && after)
        break;
      continue;
    }
    if (t.type == TOKEN_OTHER
        && (*t.start == '[' || *t.start == '(' || *t.start == '{'))
      depth++;
    else if (t.type == TOKEN_OTHER
             && (*t.start == ']' || *t.start == ')' || *t.start == '}'))
      depth--;
    if (k == idx) {
      if (elem == NULL)
        elem = t.start;
      elem_end = t.end;
    }
  }
  if (elem == NULL || (size_t) (elem - text->text) != a
      || (size_t) (elem_end - text->text) != b)
    return -1;
  *nr = 1;
  cut[0][0] = a;
  cut[0][1] = b;
  if (after) {
    /* "x" , -> one span when only space separates them. */
    size_t c = after - text->text;
    if (strspn (text->text + b, " \t\r\n") >= c - b)
      cut[0][1] = c + 1;
    else {
      cut[1][0] = c;
      cut[1][1] = c + 1;
      *nr = 2;
    }
  }
  else if (before) {
    size_t c = before - text->text;
    bool space = true;
    for (size_t i = c + 1; i < a && space; ++i)
      space = text->text[i] == ' ' || text->text[i] == '\t'
              || text->text[i] == '\r' || text->text[i] == '\n';
    if (space)
      cut[0][0] = c;
    else {
      cut[1][0] = cut[0][0];
      cut[1][1] = cut[0][1];
      cut[0][0] = c;
      cut[0][1] = c + 1;
      *nr = 2;
    }
  }
  return 0;
}

int
config_text_setting_span (const struct config_text *text, const char *name,
                          size_t *start, size_t *end)
{
  size_t len = strlen (name);
  struct lexer lx;
  struct token t, prev = { .type = TOKEN_END };
  int depth = 0;

  if (text->text == NULL)
    return -1;
  lexer_init (&lx, text);
  for (;;) {
    next_token (&lx, &t);
    if (t.type == TOKEN_END)
      return -1;
    if (t.type == TOKEN_OTHER) {
      if (*t.start == '{' || *t.start == '[' || *t.start == '(')
        depth++;
      else if ((*t.start == '}' || *t.start == ']' || *t.start == ')')
               && depth > 0)
        depth--;
      else if ((*t.start == '=' || *t.start == ':') && depth == 0
               && prev.type == TOKEN_NAME
               && (size_t) (prev.end - prev.start) == len
               && memcmp (prev.start, name, len) == 0)
        break;
    }
    prev = t;
  }
  *start = prev.start - text->text;
  /* The value: up to the ; or , that ends it at depth 0, or to the next
   * setting (libconfig does not require the terminator), or the end.
   */
  const char *value_end = t.end; /* of the token before prev */
  depth = 0;
  prev = t;
  for (;;) {
    const char *here = lx.p;
    next_token (&lx, &t);
    if (t.type == TOKEN_END) {
      *end = here - text->text;
      return 0;
    }
    if (t.type != TOKEN_OTHER) {
      value_end = prev.end;
      prev = t;
      continue;
    }
    if (*t.start == '{' || *t.start == '[' || *t.start == '(')
      depth++;
    else if (*t.start == '}' || *t.start == ']' || *t.start == ')') {
      if (depth == 0) { /* the end of the file's group: not ours */
        *end = t.start - text->text;
        return 0;
      }
      depth--;
    }
    else if ((*t.start == ';' || *t.start == ',') && depth == 0) {
      *end = t.end - text->text;
      return 0;
    }
    else if (depth == 0 && (*t.start == '=' || *t.start == ':')) {
      if (prev.type != TOKEN_NAME)
        return -1;
      *end = value_end - text->text; /* the value, before the next name */
      return 0;
    }
    value_end = prev.end;
    prev = t;
  }
}

/* The token t as written, at most 60 characters ("..." when cut). */
static void
token_text (const struct token *t, char *buf, size_t len)
{
  int n = (int) (t->end - t->start);

  snprintf (buf, len, "%.*s%s", n > 60 ? 60 : n, t->start,
            n > 60 ? "..." : "");
}

/* Whether the string token t, on its own, starts a member: an absolute
 * path or a URI (nbd://...).
 */
static bool
starts_a_member (const struct token *t)
{
  const char *p = t->start + 1; /* after the quote */

  if (p < t->end && *p == '/')
    return true;
  for (; p < t->end && ((*p >= 'a' && *p <= 'z') || *p == '+'); ++p)
    ;
  return t->end - p > 3 && memcmp (p, "://", 3) == 0;
}

bool
config_text_element_joined (const struct config_text *text, const char *name,
                            int idx, int *line, char first[64],
                            char second[64])
{
  struct lexer lx;
  struct token t, prev;
  size_t a, b;

  if (config_text_element_span (text, name, idx, &a, &b) == -1)
    return false;
  lx.p = text->text + a;
  lx.end = text->text + b;
  lx.line = 1;
  for (size_t i = 0; i < a; ++i)
    lx.line += text->text[i] == '\n';
  next_token (&lx, &prev);
  for (;;) {
    int end_line = lx.line; /* where prev ends */
    next_token (&lx, &t);
    if (t.type != TOKEN_STRING)
      return false;
    if (starts_a_member (&t)) {
      *line = end_line;
      token_text (&prev, first, 64);
      token_text (&t, second, 64);
      return true;
    }
    prev = t;
  }
}

/* A size suffix as config_parse_size takes them: b s K M G T P E, or KiB
 * ... EiB, of either case.
 */
static bool
is_size_suffix (const struct token *t)
{
  size_t n = t->end - t->start;

  if (n == 0 || strchr ("bBsSkKmMgGtTpPeE", t->start[0]) == NULL)
    return false;
  return n == 1
         || (n == 3 && strchr ("kKmMgGtTpPeE", t->start[0])
             && (t->start[1] == 'i' || t->start[1] == 'I')
             && (t->start[2] == 'b' || t->start[2] == 'B'));
}

/* The lexer reads 128K as a number and a name with nothing between them;
 * 128 K (a space) is something else, and left to libconfig.
 */
bool
config_text_unquoted_size (const struct config_text *text, int line,
                           char key[64], char size[32])
{
  struct lexer lx;
  struct token t, prev = { .type = TOKEN_END };

  key[0] = '\0';
  if (text->text == NULL)
    return false;
  lexer_init (&lx, text);
  for (;;) {
    next_token (&lx, &t);
    if (t.type == TOKEN_END || t.line > line)
      return false;
    if (t.type == TOKEN_OTHER && (*t.start == '=' || *t.start == ':')
        && prev.type == TOKEN_NAME)
      snprintf (
        key, 64, "%.*s",
        (int) (prev.end - prev.start < 63 ? prev.end - prev.start : 63),
        prev.start);
    if (t.type == TOKEN_NAME && t.line == line && prev.type == TOKEN_NUMBER
        && prev.end == t.start && is_size_suffix (&t)) {
      snprintf (size, 32, "%.*s",
                (int) (t.end - prev.start < 31 ? t.end - prev.start : 31),
                prev.start);
      return true;
    }
    prev = t;
  }
}

/* One pass, before libconfig: the loader refuses @include before libconfig
 * would open the included file, and reports a truncated integer only once
 * libconfig has had its say on the syntax.
 */
void
config_text_scan (const struct config_text *text,
                  struct config_text_found *found)
{
  struct lexer lx;
  struct token t;

  found->include_line = 0;
  found->truncated_line = 0;
  found->truncated[0] = '\0';
  lexer_init (&lx, text);
  do {
    next_token (&lx, &t);
    if (t.type == TOKEN_INCLUDE) {
      found->include_line = t.line;
      return;
    }
    if (t.truncated && found->truncated_line == 0) {
      found->truncated_line = t.line;
      snprintf (found->truncated, sizeof found->truncated, "%.*s",
                (int) (t.end - t.start < 40 ? t.end - t.start : 40), t.start);
    }
  } while (t.type != TOKEN_END);
}

/* why and *line for a file that cannot be read.  Returns -1. */
static int __attribute__ ((format (printf, 5, 6)))
fail (int *line, char *why, size_t whylen, int at, const char *fmt, ...)
{
  va_list args;

  *line = at;
  va_start (args, fmt);
  vsnprintf (why, whylen, fmt, args);
  va_end (args);
  return -1;
}

/* Reading the file here rather than with libconfig's config_read_file is
 * also what lets the loader say why a file cannot be read, rather than
 * libconfig's bare "file I/O error".  A NUL byte, where libconfig's string
 * (config_read_string) would end, is refused.
 */
int
config_text_read (const char *path, struct config_text *t, int *line,
                  char *why, size_t whylen)
{
  struct stat st;
  char *buf = NULL;
  const char *nul;
  size_t len = 0;
  FILE *fp;

  t->text = NULL;
  t->len = 0;
  /* O_NONBLOCK: a FIFO must not hang the loader (and everything that
   * loads a config) waiting for a writer; only a regular file is read.
   */
  int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd == -1)
    return fail (line, why, whylen, 0, "%s", strerror (errno));
  if (fstat (fd, &st) == -1) {
    int e = errno;
    close (fd);
    return fail (line, why, whylen, 0, "%s", strerror (e));
  }
  if (!S_ISREG (st.st_mode)) {
    close (fd);
    return fail (line, why, whylen, 0,
                 "is %s, expected a volume config file (a regular file)",
                 S_ISDIR (st.st_mode)    ? "a directory"
                 : S_ISFIFO (st.st_mode) ? "a FIFO"
                 : S_ISSOCK (st.st_mode) ? "a socket"
                 : S_ISCHR (st.st_mode)  ? "a character device"
                 : S_ISBLK (st.st_mode)  ? "a block device"
                                         : "not a regular file");
  }
  fp = fdopen (fd, "r");
  if (fp == NULL) {
    int e = errno;
    close (fd);
    return fail (line, why, whylen, 0, "%s", strerror (e));
  }
  for (size_t size = 4096;; size *= 2) {
    char *p = realloc (buf, size);
    if (p == NULL) {
      fail (line, why, whylen, 0, "out of memory");
      goto err;
    }
    buf = p;
    len += fread (buf + len, 1, size - len, fp);
    if (ferror (fp)) {
      fail (line, why, whylen, 0, "read: %s", strerror (errno));
      goto err;
    }
    if (len > CONFIG_MAX_FILE_SIZE) {
      fail (line, why, whylen, 0, "larger than %d bytes: not a volume config",
            CONFIG_MAX_FILE_SIZE);
      goto err;
    }
    if (len < size)
      break; /* end of file */
  }
  buf[len] = '\0'; /* len < size */
  nul = memchr (buf, '\0', len);
  if (nul) {
    int at = 1;
    for (const char *p = buf; p < nul; ++p)
      at += *p == '\n';
    fail (line, why, whylen, at, "a NUL byte: expected a text file");
    goto err;
  }
  fclose (fp);
  t->text = buf;
  t->len = len;
  return 0;

err:
  free (buf);
  fclose (fp);
  return -1;
}

void
config_text_free (struct config_text *t)
{
  free (t->text);
  t->text = NULL;
  t->len = 0;
}
