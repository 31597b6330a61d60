/*
 * The QMP client against a scripted monitor.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include "fake-qmp.h"
#include "qmp-client.h"

typedef struct {
  gboolean done;
  gboolean ok;
  JsonNode *ret;
  gchar *text;
  GError *error;
  gint64 reply_time;
} Result;

static void
result_clear (Result *r)
{
  g_clear_pointer (&r->ret, json_node_unref);
  g_clear_pointer (&r->text, g_free);
  g_clear_error (&r->error);
  memset (r, 0, sizeof *r);
}

static void
handshake_cb (GObject *source, GAsyncResult *res, gpointer data)
{
  Result *r = data;

  r->ok = vmce_qmp_client_handshake_finish (VMCE_QMP_CLIENT (source), res, &r->error);
  r->done = TRUE;
}

static void
execute_cb (GObject *source, GAsyncResult *res, gpointer data)
{
  Result *r = data;

  r->ret = vmce_qmp_client_execute_finish (VMCE_QMP_CLIENT (source), res, &r->reply_time,
                                           &r->error);
  r->done = TRUE;
}

static void
hmp_cb (GObject *source, GAsyncResult *res, gpointer data)
{
  Result *r = data;

  r->text = vmce_qmp_client_hmp_finish (VMCE_QMP_CLIENT (source), res, NULL, &r->error);
  r->done = TRUE;
}

typedef struct {
  guint n_events;
  gchar *last_event;
  gboolean closed;
  gchar *closed_message;
} Seen;

static void
event_cb (VmceQmpClient *client, const gchar *name, JsonObject *data, gint64 t, gpointer user)
{
  Seen *seen = user;

  seen->n_events++;
  g_free (seen->last_event);
  seen->last_event = g_strdup (name);
}

static void
closed_cb (VmceQmpClient *client, GError *error, gpointer user)
{
  Seen *seen = user;

  seen->closed = TRUE;
  g_free (seen->closed_message);
  seen->closed_message = g_strdup (error->message);
}

static VmceQmpClient *
connected_client (FakeQmp **fake, Seen *seen)
{
  g_autoptr(GSocket) sock = NULL;
  VmceQmpClient *client;
  Result r = { 0 };

  *fake = fake_qmp_new (&sock);
  client = vmce_qmp_client_new (sock, "fake");
  g_signal_connect (client, "event", G_CALLBACK (event_cb), seen);
  g_signal_connect (client, "closed", G_CALLBACK (closed_cb), seen);
  fake_qmp_send_greeting (*fake);
  fake_qmp_expect (*fake, "qmp_capabilities", "{}");
  vmce_qmp_client_handshake_async (client, NULL, handshake_cb, &r);
  fake_qmp_wait (r.done);
  g_assert_no_error (r.error);
  g_assert_true (r.ok);
  g_assert_nonnull (vmce_qmp_client_get_greeting (client));
  return client;
}

static void
seen_clear (Seen *seen)
{
  g_free (seen->last_event);
  g_free (seen->closed_message);
}

static void
test_qmp_execute_and_events (void)
{
  g_autoptr(FakeQmp) fake = NULL;
  g_autoptr(VmceQmpClient) client = NULL;
  Seen seen = { 0 };
  Result r = { 0 };

  client = connected_client (&fake, &seen);
  /* an event before the answer is delivered as an event, not as the answer */
  fake_qmp_expect (fake, "query-kvm", "raw:{\"event\": \"RESET\", \"data\": {\"guest\": true}, "
                                      "\"timestamp\": {\"seconds\": 1, \"microseconds\": 2}}");
  vmce_qmp_client_execute_async (client, "query-kvm", NULL, NULL, execute_cb, &r);
  fake_qmp_wait (seen.n_events == 1);
  g_assert_cmpstr (seen.last_event, ==, "RESET");
  g_assert_false (r.done);
  fake_qmp_send (fake, "{\"return\": {\"enabled\": false, \"present\": true}, \"id\": 2}");
  fake_qmp_wait (r.done);
  g_assert_no_error (r.error);
  g_assert_true (JSON_NODE_HOLDS_OBJECT (r.ret));
  g_assert_true (json_object_get_boolean_member (json_node_get_object (r.ret), "present"));
  g_assert_cmpint (r.reply_time, >, 0);
  result_clear (&r);

  /* HMP text comes back as it is */
  fake_qmp_expect (fake, "human-monitor-command",
                   "\"Host virtual address for 0x100000 (pc.ram) is 0x7f1234500000\\r\\n\"");
  vmce_qmp_client_hmp_async (client, "gpa2hva 0x100000", NULL, hmp_cb, &r);
  fake_qmp_wait (r.done);
  g_assert_no_error (r.error);
  g_assert_cmpstr (r.text, ==, "Host virtual address for 0x100000 (pc.ram) is 0x7f1234500000\r\n");
  g_assert_cmpstr (fake_qmp_get_last_arguments (fake), ==,
                   "{\"command-line\":\"gpa2hva 0x100000\"}");
  result_clear (&r);
  g_assert_true (fake_qmp_script_done (fake));
  g_assert_false (seen.closed);
  seen_clear (&seen);
}

static void
test_qmp_error_reply (void)
{
  g_autoptr(FakeQmp) fake = NULL;
  g_autoptr(VmceQmpClient) client = NULL;
  Seen seen = { 0 };
  Result r = { 0 };

  client = connected_client (&fake, &seen);
  fake_qmp_expect (fake, "qom-get", "error:Device 'nope' not found");
  vmce_qmp_client_execute_async (client, "qom-get", NULL, NULL, execute_cb, &r);
  fake_qmp_wait (r.done);
  g_assert_error (r.error, VMCE_QMP_ERROR, VMCE_QMP_ERROR_COMMAND);
  g_assert_nonnull (strstr (r.error->message, "Device 'nope' not found"));
  g_assert_nonnull (strstr (r.error->message, "qom-get"));
  /* the connection is still good */
  g_assert_true (vmce_qmp_client_is_open (client));
  result_clear (&r);
  seen_clear (&seen);
}

/* A monitor that answers garbage is cut off, with one clear message */
static void
test_qmp_garbage (void)
{
  g_autoptr(FakeQmp) fake = NULL;
  g_autoptr(VmceQmpClient) client = NULL;
  Seen seen = { 0 };
  Result r = { 0 }, r2 = { 0 };

  client = connected_client (&fake, &seen);
  fake_qmp_expect (fake, "query-name", "raw:this is not json");
  fake_qmp_expect (fake, "query-kvm", NULL);
  vmce_qmp_client_execute_async (client, "query-name", NULL, NULL, execute_cb, &r);
  vmce_qmp_client_execute_async (client, "query-kvm", NULL, NULL, execute_cb, &r2);
  fake_qmp_wait (r.done && r2.done);
  g_assert_error (r.error, VMCE_QMP_ERROR, VMCE_QMP_ERROR_PROTOCOL);
  g_assert_nonnull (strstr (r.error->message, "invalid JSON"));
  g_assert_error (r2.error, VMCE_QMP_ERROR, VMCE_QMP_ERROR_PROTOCOL);
  g_assert_true (seen.closed);
  g_assert_nonnull (strstr (seen.closed_message, "monitor fake"));
  g_assert_false (vmce_qmp_client_is_open (client));
  result_clear (&r);
  result_clear (&r2);

  /* later commands fail at once */
  vmce_qmp_client_execute_async (client, "query-kvm", NULL, NULL, execute_cb, &r);
  fake_qmp_wait (r.done);
  g_assert_error (r.error, VMCE_QMP_ERROR, VMCE_QMP_ERROR_CLOSED);
  result_clear (&r);
  seen_clear (&seen);
}

static void
test_qmp_not_an_answer (void)
{
  g_autoptr(FakeQmp) fake = NULL;
  g_autoptr(VmceQmpClient) client = NULL;
  Seen seen = { 0 };
  Result r = { 0 };

  client = connected_client (&fake, &seen);
  fake_qmp_expect (fake, "query-name", "raw:[1, 2, 3]");
  vmce_qmp_client_execute_async (client, "query-name", NULL, NULL, execute_cb, &r);
  fake_qmp_wait (r.done);
  g_assert_error (r.error, VMCE_QMP_ERROR, VMCE_QMP_ERROR_PROTOCOL);
  g_assert_true (seen.closed);
  result_clear (&r);
  seen_clear (&seen);
}

static void
test_qmp_hang_up (void)
{
  g_autoptr(FakeQmp) fake = NULL;
  g_autoptr(VmceQmpClient) client = NULL;
  Seen seen = { 0 };
  Result r = { 0 };

  client = connected_client (&fake, &seen);
  fake_qmp_expect (fake, "human-monitor-command", NULL);
  vmce_qmp_client_hmp_async (client, "info mtree -f", NULL, hmp_cb, &r);
  fake_qmp_wait (fake_qmp_script_done (fake));
  fake_qmp_hang_up (fake);
  fake_qmp_wait (r.done);
  g_assert_error (r.error, VMCE_QMP_ERROR, VMCE_QMP_ERROR_CLOSED);
  g_assert_true (seen.closed);
  result_clear (&r);
  seen_clear (&seen);
}

static void
test_qmp_timeout (void)
{
  g_autoptr(FakeQmp) fake = NULL;
  g_autoptr(VmceQmpClient) client = NULL;
  Seen seen = { 0 };
  Result r = { 0 };

  client = connected_client (&fake, &seen);
  vmce_qmp_client_set_timeout (client, 50);
  fake_qmp_expect (fake, "query-status", NULL);
  vmce_qmp_client_execute_async (client, "query-status", NULL, NULL, execute_cb, &r);
  fake_qmp_wait (r.done);
  g_assert_error (r.error, VMCE_QMP_ERROR, VMCE_QMP_ERROR_TIMEOUT);
  result_clear (&r);
  /* the late answer is dropped, and the next command gets its own */
  fake_qmp_send (fake, "{\"return\": {\"status\": \"running\"}, \"id\": 2}");
  fake_qmp_expect (fake, "query-name", "{\"name\": \"vm1\"}");
  vmce_qmp_client_execute_async (client, "query-name", NULL, NULL, execute_cb, &r);
  fake_qmp_wait (r.done);
  g_assert_no_error (r.error);
  g_assert_cmpstr (json_object_get_string_member (json_node_get_object (r.ret), "name"), ==,
                   "vm1");
  g_assert_false (seen.closed);
  result_clear (&r);
  seen_clear (&seen);
}

static void
test_qmp_no_greeting (void)
{
  g_autoptr(GSocket) sock = NULL;
  g_autoptr(FakeQmp) fake = fake_qmp_new (&sock);
  g_autoptr(VmceQmpClient) client = vmce_qmp_client_new (sock, "silent");
  Result r = { 0 };

  vmce_qmp_client_set_timeout (client, 50);
  vmce_qmp_client_handshake_async (client, NULL, handshake_cb, &r);
  fake_qmp_wait (r.done);
  g_assert_error (r.error, VMCE_QMP_ERROR, VMCE_QMP_ERROR_TIMEOUT);
  g_assert_nonnull (strstr (r.error->message, "greeting"));
  result_clear (&r);
}

static void
test_qmp_wrong_greeting (void)
{
  g_autoptr(GSocket) sock = NULL;
  g_autoptr(FakeQmp) fake = fake_qmp_new (&sock);
  g_autoptr(VmceQmpClient) client = vmce_qmp_client_new (sock, "not-qemu");
  Result r = { 0 };

  fake_qmp_send (fake, "{\"hello\": \"world\"}");
  vmce_qmp_client_handshake_async (client, NULL, handshake_cb, &r);
  fake_qmp_wait (r.done);
  g_assert_error (r.error, VMCE_QMP_ERROR, VMCE_QMP_ERROR_PROTOCOL);
  g_assert_nonnull (strstr (r.error->message, "greeting"));
  result_clear (&r);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/qmp-client/execute-and-events", test_qmp_execute_and_events);
  g_test_add_func ("/qmp-client/error-reply", test_qmp_error_reply);
  g_test_add_func ("/qmp-client/garbage", test_qmp_garbage);
  g_test_add_func ("/qmp-client/not-an-answer", test_qmp_not_an_answer);
  g_test_add_func ("/qmp-client/hang-up", test_qmp_hang_up);
  g_test_add_func ("/qmp-client/timeout", test_qmp_timeout);
  g_test_add_func ("/qmp-client/no-greeting", test_qmp_no_greeting);
  g_test_add_func ("/qmp-client/wrong-greeting", test_qmp_wrong_greeting);
  return g_test_run ();
}
