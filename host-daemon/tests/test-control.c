/*
 * vmced's control protocol, spoken over a socketpair.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include "control-client.h"
#include "control.h"
#include "json-util.h"
#include "line-socket.h"

typedef struct {
  VmceControl *control;
  VmceLineSocket *client;
  GQueue lines; /* of JsonNode */
  VmceControlRequest *held;
} Fixture;

static JsonObject *
next_message (Fixture *fx)
{
  static JsonNode *last = NULL;

  for (gint64 deadline = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;
       g_queue_is_empty (&fx->lines) && g_get_monotonic_time () < deadline;)
    g_main_context_iteration (NULL, TRUE);
  g_assert_false (g_queue_is_empty (&fx->lines));
  g_clear_pointer (&last, json_node_unref);
  last = g_queue_pop_head (&fx->lines);
  return json_node_get_object (last);
}

static void
send_line (Fixture *fx, const gchar *line)
{
  vmce_line_socket_send (fx->client, line);
}

static void
cmd_echo (VmceControlRequest *req, JsonObject *args, gpointer data)
{
  JsonNode *node = json_node_new (JSON_NODE_OBJECT);

  json_node_set_object (node, args);
  vmce_control_request_return (req, node);
  json_node_unref (node);
}

static void
cmd_later (VmceControlRequest *req, JsonObject *args, gpointer data)
{
  ((Fixture *) data)->held = req;
}

static void
cmd_subscribe (VmceControlRequest *req, JsonObject *args, gpointer data)
{
  vmce_control_request_subscribe (req);
  vmce_control_request_return (req, NULL);
}

static void
fixture_setup (Fixture *fx, gconstpointer data)
{
  g_queue_init (&fx->lines);
  fx->control = vmce_control_new_unbound ();
  vmce_control_add_command (fx->control, "echo", cmd_echo, fx);
  vmce_control_add_command (fx->control, "later", cmd_later, fx);
  vmce_control_add_command (fx->control, "subscribe", cmd_subscribe, fx);
  fx->client = control_client_new (fx->control, &fx->lines, 1 << 20);
}

static void
fixture_teardown (Fixture *fx, gconstpointer data)
{
  vmce_line_socket_free (fx->client);
  vmce_control_free (fx->control);
  g_queue_clear_full (&fx->lines, (GDestroyNotify) json_node_unref);
  /* let deferred frees run */
  while (g_main_context_iteration (NULL, FALSE))
    ;
}

static void
test_control_greeting_and_commands (Fixture *fx, gconstpointer data)
{
  JsonObject *msg = next_message (fx);
  JsonObject *ret;

  g_assert_true (json_object_has_member (msg, "vmced"));
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (msg, "vmced"),
                                                  "version"),
                   ==, PACKAGE_VERSION);

  send_line (fx, "{\"execute\": \"echo\", \"arguments\": {\"gpa\": \"0x1000\"}, \"id\": 5}");
  msg = next_message (fx);
  g_assert_cmpint (json_object_get_int_member (msg, "id"), ==, 5);
  ret = json_object_get_object_member (msg, "return");
  g_assert_cmpstr (json_object_get_string_member (ret, "gpa"), ==, "0x1000");

  /* no arguments: the handler gets an empty object */
  send_line (fx, "{\"execute\": \"echo\"}");
  msg = next_message (fx);
  g_assert_cmpuint (json_object_get_size (json_object_get_object_member (msg, "return")), ==, 0);
}

/* Bad requests get an error each, and the connection stays usable */
static void
test_control_bad_requests (Fixture *fx, gconstpointer data)
{
  JsonObject *msg = next_message (fx);
  JsonObject *err;

  send_line (fx, "{\"execute\": \"nope\", \"id\": 1}");
  msg = next_message (fx);
  err = json_object_get_object_member (msg, "error");
  g_assert_cmpstr (json_object_get_string_member (err, "class"), ==, "CommandNotFound");
  g_assert_cmpint (json_object_get_int_member (msg, "id"), ==, 1);

  send_line (fx, "this is not json");
  msg = next_message (fx);
  err = json_object_get_object_member (msg, "error");
  g_assert_nonnull (strstr (json_object_get_string_member (err, "desc"), "invalid JSON"));

  send_line (fx, "{\"exec\": \"echo\"}");
  msg = next_message (fx);
  g_assert_true (json_object_has_member (msg, "error"));

  send_line (fx, "{\"execute\": \"echo\", \"arguments\": [1]}");
  msg = next_message (fx);
  g_assert_true (json_object_has_member (msg, "error"));

  send_line (fx, "{\"execute\": \"echo\", \"id\": \"still-here\"}");
  msg = next_message (fx);
  g_assert_cmpstr (json_object_get_string_member (msg, "id"), ==, "still-here");
}

/* Answers may come later; events reach subscribers only */
static void
test_control_async_and_events (Fixture *fx, gconstpointer data)
{
  g_autoptr(JsonNode) ev = json_from_string ("{\"vm\": \"g1\"}", NULL);
  JsonObject *msg = next_message (fx);

  vmce_control_broadcast (fx->control, "MEMORY_ERROR", ev);
  send_line (fx, "{\"execute\": \"later\", \"id\": 1}");
  while (fx->held == NULL)
    g_main_context_iteration (NULL, TRUE);
  /* the event before subscribing was not sent */
  g_assert_true (g_queue_is_empty (&fx->lines));
  vmce_control_request_error (fx->held, VMCE_ERROR_GENERIC, "it took %d s", 3);
  msg = next_message (fx);
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (msg, "error"),
                                                  "desc"),
                   ==, "it took 3 s");

  send_line (fx, "{\"execute\": \"subscribe\"}");
  msg = next_message (fx);
  g_assert_true (json_object_has_member (msg, "return"));
  vmce_control_broadcast (fx->control, "MEMORY_ERROR", ev);
  msg = next_message (fx);
  g_assert_cmpstr (json_object_get_string_member (msg, "event"), ==, "MEMORY_ERROR");
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (msg, "data"),
                                                  "vm"),
                   ==, "g1");
  g_assert_true (json_object_has_member (json_object_get_object_member (msg, "timestamp"),
                                         "seconds"));
}

/* A client that leaves while its request is pending does not crash vmced */
static void
test_control_client_gone (Fixture *fx, gconstpointer data)
{
  (void) next_message (fx);
  send_line (fx, "{\"execute\": \"later\"}");
  while (fx->held == NULL)
    g_main_context_iteration (NULL, TRUE);
  vmce_line_socket_close (fx->client);
  for (guint i = 0; i < 10; i++)
    g_main_context_iteration (NULL, FALSE);
  vmce_control_request_return (fx->held, NULL);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/control/greeting-and-commands", Fixture, NULL, fixture_setup,
              test_control_greeting_and_commands, fixture_teardown);
  g_test_add ("/control/bad-requests", Fixture, NULL, fixture_setup, test_control_bad_requests,
              fixture_teardown);
  g_test_add ("/control/async-and-events", Fixture, NULL, fixture_setup,
              test_control_async_and_events, fixture_teardown);
  g_test_add ("/control/client-gone", Fixture, NULL, fixture_setup, test_control_client_gone,
              fixture_teardown);
  return g_test_run ();
}
