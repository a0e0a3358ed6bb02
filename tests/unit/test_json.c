/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe unit tests: reading JSON with json.h's typed getters
 * (plugin/util/json.c), on texts parsed by json-c as the control socket
 * and the command parse them.  Each getter gives the member's value only
 * when it is there and of its type, and otherwise says which member is
 * missing or what it is instead.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "json.h"
#include "unit_main.h"

static struct json_object *doc;
static char why[256];

static struct json_object *
parse (const char *text)
{
  json_object_put (doc);
  doc = json_tokener_parse (text);
  assert_non_null (doc);
  why[0] = '\0';
  return doc;
}

static int
teardown (void **state)
{
  (void) state;
  json_object_put (doc);
  doc = NULL;
  return 0;
}

static int
setup (void **state)
{
  (void) state;
  return 0;
}

static void
json_getters_read_every_type_from_its_member (void **state)
{
  struct json_object *o = parse (
    "{ \"s\": \"a b\", \"i\": -3, \"u\": 42, \"d\": 2.5, \"n\": 7,"
    "  \"t\": true, \"f\": false, \"o\": { \"x\": 1 }, \"a\": [ 1, 2 ] }");
  const char *s = NULL;
  int64_t i = 0;
  uint64_t u = 0;
  double d = 0, n = 0;
  bool t = false, f = true;
  struct json_object *obj = NULL, *arr = NULL;

  (void) state;
  assert_int_equal (json_get_string (o, "s", &s, why, sizeof why), 0);
  assert_string_equal (s, "a b");
  assert_int_equal (json_get_int64 (o, "i", &i, why, sizeof why), 0);
  assert_int_equal (i, -3);
  assert_int_equal (json_get_uint64 (o, "u", &u, why, sizeof why), 0);
  assert_int_equal (u, 42);
  assert_int_equal (json_get_double (o, "d", &d, why, sizeof why), 0);
  assert_true (d == 2.5);
  /* An integer is a number too. */
  assert_int_equal (json_get_double (o, "n", &n, why, sizeof why), 0);
  assert_true (n == 7.0);
  assert_int_equal (json_get_bool (o, "t", &t, why, sizeof why), 0);
  assert_true (t);
  assert_int_equal (json_get_bool (o, "f", &f, why, sizeof why), 0);
  assert_false (f);
  assert_int_equal (json_get_object (o, "o", &obj, why, sizeof why), 0);
  assert_true (json_object_is_type (obj, json_type_object));
  assert_int_equal (json_get_array (o, "a", &arr, why, sizeof why), 0);
  assert_int_equal (json_object_array_length (arr), 2);
  assert_string_equal (why, "");
}

static void
json_missing_member_is_named_and_its_value_left_alone (void **state)
{
  struct json_object *o = parse ("{ \"state\": \"copying\" }");
  uint64_t u = 99;

  (void) state;
  errno = 0;
  assert_int_equal (json_get_uint64 (o, "rate", &u, why, sizeof why), -1);
  assert_string_equal (why, "\"rate\" is missing");
  assert_int_equal (errno, EINVAL);
  assert_int_equal (u, 99);
  assert_false (json_has (o, "rate"));
  assert_true (json_has (o, "state"));
}

static void
json_member_of_another_type_is_refused_saying_what_it_is (void **state)
{
  struct json_object *o = parse ("{ \"member\": \"1\", \"force\": 1,"
                                 "  \"new\": 5, \"rate\": 1.0,"
                                 "  \"status\": [ ], \"replace\": { } }");
  const char *s = "kept";
  int64_t i = 5;
  uint64_t u = 5;
  bool b = true;
  double d = 0;
  struct json_object *x = NULL;

  (void) state;
  assert_int_equal (json_get_int64 (o, "member", &i, why, sizeof why), -1);
  assert_string_equal (why, "\"member\" must be an integer, not a string");
  assert_int_equal (i, 5);
  assert_int_equal (json_get_bool (o, "force", &b, why, sizeof why), -1);
  assert_string_equal (why, "\"force\" must be true or false, not an integer");
  assert_true (b);
  assert_int_equal (json_get_string (o, "new", &s, why, sizeof why), -1);
  assert_string_equal (why, "\"new\" must be a string, not an integer");
  assert_string_equal (s, "kept");
  /* 1.0 is a number, not an integer: never rounded into one. */
  assert_int_equal (json_get_uint64 (o, "rate", &u, why, sizeof why), -1);
  assert_string_equal (why, "\"rate\" must be an integer, not a number "
                            "with a fraction or an exponent");
  assert_int_equal (u, 5);
  assert_int_equal (json_get_object (o, "status", &x, why, sizeof why), -1);
  assert_string_equal (why, "\"status\" must be an object, not an array");
  assert_int_equal (json_get_array (o, "replace", &x, why, sizeof why), -1);
  assert_string_equal (why, "\"replace\" must be an array, not an object");
  assert_null (x);
  assert_int_equal (json_get_double (o, "member", &d, why, sizeof why), -1);
  assert_string_equal (why, "\"member\" must be a number, not a string");
}

static void
json_null_member_is_present_but_of_no_type (void **state)
{
  struct json_object *o = parse ("{ \"eta_seconds\": null }");
  double d = 1;

  (void) state;
  assert_true (json_has (o, "eta_seconds"));
  assert_int_equal (json_get_double (o, "eta_seconds", &d, why, sizeof why),
                    -1);
  assert_string_equal (why, "\"eta_seconds\" must be a number, not null");
  assert_true (d == 1);
}

static void
json_not_an_object_has_no_members (void **state)
{
  const char *s = NULL;

  (void) state;
  assert_false (json_has (NULL, "op"));
  assert_int_equal (json_get_string (NULL, "op", &s, why, sizeof why), -1);
  assert_string_equal (why, "\"op\" is missing");
  parse ("[ \"op\" ]");
  assert_false (json_has (doc, "op"));
  assert_int_equal (json_get_string (doc, "op", &s, why, sizeof why), -1);
  assert_string_equal (why, "\"op\" is missing");
}

static void
json_string_holding_a_nul_is_refused (void **state)
{
  struct json_object *o = parse ("{ \"new\": \"/dev/sdb\\u0000/etc\" }");
  const char *s = NULL;

  (void) state;
  assert_int_equal (json_get_string (o, "new", &s, why, sizeof why), -1);
  assert_string_equal (why, "\"new\" must be a string without NUL bytes");
  assert_null (s);
}

static void
json_value_of_a_type_comes_as_json_c_holds_it (void **state)
{
  struct json_object *o = parse ("{ \"path\": \"/dev/sdb\\u0000x\","
                                 "  \"eta\": null, \"n\": 3 }");
  struct json_object *v = NULL;

  (void) state;
  /* A string holding a NUL, whole: for text shown escaped. */
  assert_int_equal (
    json_get_value (o, "path", json_type_string, &v, why, sizeof why), 0);
  assert_int_equal (json_object_get_string_len (v), 10);
  assert_memory_equal (json_object_get_string (v), "/dev/sdb\0x", 10);
  /* null is a type of its own here. */
  v = o;
  assert_int_equal (
    json_get_value (o, "eta", json_type_null, &v, why, sizeof why), 0);
  assert_null (v);
  v = o;
  assert_int_equal (
    json_get_value (o, "n", json_type_null, &v, why, sizeof why), -1);
  assert_string_equal (why, "\"n\" must be null, not an integer");
  assert_ptr_equal (v, o);
  assert_int_equal (
    json_get_value (o, "eta", json_type_boolean, &v, why, sizeof why), -1);
  assert_string_equal (why, "\"eta\" must be true or false, not null");
  assert_int_equal (
    json_get_value (o, "gone", json_type_int, &v, why, sizeof why), -1);
  assert_string_equal (why, "\"gone\" is missing");
  assert_ptr_equal (v, o);
}

static void
json_integers_keep_64_bits_and_are_refused_beyond_their_range (void **state)
{
  struct json_object *o = parse ("{ \"imax\": 9223372036854775807,"
                                 "  \"imin\": -9223372036854775808,"
                                 "  \"big\": 9223372036854775808,"
                                 "  \"umax\": 18446744073709551615,"
                                 "  \"neg\": -1 }");
  int64_t i = 0;
  uint64_t u = 0;

  (void) state;
  assert_int_equal (json_get_int64 (o, "imax", &i, why, sizeof why), 0);
  assert_true (i == INT64_MAX);
  assert_int_equal (json_get_int64 (o, "imin", &i, why, sizeof why), 0);
  assert_true (i == INT64_MIN);
  assert_int_equal (json_get_uint64 (o, "imax", &u, why, sizeof why), 0);
  assert_true (u == (uint64_t) INT64_MAX);
  assert_int_equal (json_get_uint64 (o, "big", &u, why, sizeof why), 0);
  assert_true (u == (uint64_t) INT64_MAX + 1);
  assert_int_equal (json_get_uint64 (o, "umax", &u, why, sizeof why), 0);
  assert_true (u == UINT64_MAX);

  i = 5;
  assert_int_equal (json_get_int64 (o, "big", &i, why, sizeof why), -1);
  assert_string_equal (why,
                       "\"big\" is too large (at most 9223372036854775807)");
  assert_int_equal (i, 5);
  u = 5;
  assert_int_equal (json_get_uint64 (o, "neg", &u, why, sizeof why), -1);
  assert_string_equal (why, "\"neg\" must not be negative (-1)");
  assert_int_equal (u, 5);
}

static void
json_number_beyond_the_finite_is_refused (void **state)
{
  struct json_object *o = parse ("{ \"huge\": 1e400, \"nan\": NaN,"
                                 "  \"umax\": 18446744073709551615 }");
  double d = 3;

  (void) state;
  assert_int_equal (json_get_double (o, "huge", &d, why, sizeof why), -1);
  assert_string_equal (why, "\"huge\" must be a finite number");
  assert_int_equal (json_get_double (o, "nan", &d, why, sizeof why), -1);
  assert_true (d == 3);
  /* An integer above INT64_MAX is read whole, not as the saturated one. */
  assert_int_equal (json_get_double (o, "umax", &d, why, sizeof why), 0);
  assert_true (d == 18446744073709551615.0);
}

static void
json_getter_may_be_asked_without_a_reason (void **state)
{
  struct json_object *o = parse ("{ \"ok\": \"yes\" }");
  bool b = false;

  (void) state;
  assert_int_equal (json_get_bool (o, "ok", &b, NULL, 0), -1);
  assert_int_equal (json_get_bool (o, "gone", &b, NULL, 0), -1);
  assert_false (b);
}

static void
json_lenient_getters_read_what_is_there_and_null_or_0_otherwise (void **state)
{
  struct json_object *o =
    parse ("{ \"s\": \"copying\", \"n\": 2.5, \"u\": 7, \"a\": [ 1 ], "
           "\"neg\": -1, \"z\": null, \"nul\": \"a\\u0000b\" }");

  (void) state;
  assert_string_equal (json_str_or_null (o, "s"), "copying");
  assert_true (json_num_or_0 (o, "n") == 2.5);
  assert_true (json_num_or_0 (o, "u") == 7);
  assert_int_equal (json_u64_or_0 (o, "u"), 7);
  assert_int_equal (json_object_array_length (json_array_or_null (o, "a")), 1);
  /* Missing, null, of another type, out of range or holding a NUL. */
  assert_null (json_str_or_null (o, "gone"));
  assert_null (json_str_or_null (o, "z"));
  assert_null (json_str_or_null (o, "n"));
  assert_null (json_str_or_null (o, "nul"));
  assert_true (json_num_or_0 (o, "s") == 0);
  assert_true (json_num_or_0 (o, "gone") == 0);
  assert_int_equal (json_u64_or_0 (o, "n"), 0);
  assert_int_equal (json_u64_or_0 (o, "neg"), 0);
  assert_null (json_array_or_null (o, "s"));
  assert_null (json_array_or_null (o, "z"));
  /* Not an object at all. */
  assert_null (json_str_or_null (json_object_array_get_idx (
                                   json_array_or_null (o, "a"), 0),
                                 "s"));
}

int
main (int argc, char **argv)
{
  const struct CMUnitTest tests[] = {
    fixture_test (json_getters_read_every_type_from_its_member),
    fixture_test (json_missing_member_is_named_and_its_value_left_alone),
    fixture_test (json_member_of_another_type_is_refused_saying_what_it_is),
    fixture_test (json_null_member_is_present_but_of_no_type),
    fixture_test (json_not_an_object_has_no_members),
    fixture_test (json_string_holding_a_nul_is_refused),
    fixture_test (json_value_of_a_type_comes_as_json_c_holds_it),
    fixture_test (
      json_integers_keep_64_bits_and_are_refused_beyond_their_range),
    fixture_test (json_number_beyond_the_finite_is_refused),
    fixture_test (json_getter_may_be_asked_without_a_reason),
    fixture_test (
      json_lenient_getters_read_what_is_there_and_null_or_0_otherwise),
  };

  return run_unit_tests ("json", tests, sizeof tests / sizeof tests[0], argc,
                         argv);
}
