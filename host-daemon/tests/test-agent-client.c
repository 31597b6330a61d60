/*
 * A VM's guest agent through its socket: a scripted agent that answers,
 * fails, says nothing, sends garbage or hangs up, and no socket at all.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib/gstdio.h>
#include <string.h>

#include "agent-client.h"
#include "fake-agent.h"
#include "json-util.h"

typedef struct {
  gchar *dir;
  gchar *path;
  FakeAgent *agent;
  VmceAgentClient *client;
} Fixture;

/* One request's outcome */
typedef struct {
  gboolean done;
  JsonNode *answer;
  GError *error;
  guint order; /* when it was answered, from 1 */
} Outcome;

static guint answered;

static void
outcome_clear (Outcome *o)
{
  g_clear_pointer (&o->answer, json_node_unref);
  g_clear_error (&o->error);
}

static void
fixture_setup (Fixture *fx, gconstpointer data)
{
  g_autoptr(GError) error = NULL;

  fx->dir = g_dir_make_tmp ("vmce-test-agent-XXXXXX", &error);
  g_assert_no_error (error);
  fx->path = g_build_filename (fx->dir, "agent.sock", NULL);
  fx->client = vmce_agent_client_new (fx->path, "the guest agent of vm t");
  answered = 0;
}

static void
fixture_teardown (Fixture *fx, gconstpointer data)
{
  vmce_agent_client_unref (fx->client);
  g_clear_pointer (&fx->agent, fake_agent_free);
  /* let deferred frees run */
  while (g_main_context_iteration (NULL, FALSE))
    ;
  (void) g_rmdir (fx->dir);
  g_free (fx->path);
  g_free (fx->dir);
}

static void
request_cb (GObject *source, GAsyncResult *res, gpointer data)
{
  Outcome *o = data;

  o->answer = vmce_agent_client_request_finish (res, &o->error);
  o->order = ++answered;
  o->done = TRUE;
}

static void
wait_for (Outcome *o)
{
  for (gint64 deadline = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;
       !o->done && g_get_monotonic_time () < deadline;)
    g_main_context_iteration (NULL, TRUE);
  g_assert_true (o->done);
}

static void
request (Fixture *fx, const gchar *line, guint timeout_ms, Outcome *o)
{
  vmce_agent_client_request_async (fx->client, line, timeout_ms, request_cb, o);
  wait_for (o);
}

/* The answer's "return", the request as the agent read it */
static void
test_agent_answer (Fixture *fx, gconstpointer data)
{
  Outcome o = { 0 };

  fx->agent = fake_agent_new (fx->path, FAKE_AGENT_ANSWER, 0);
  request (fx, "victim-status pid=12", 1000, &o);
  g_assert_no_error (o.error);
  g_assert_true (JSON_NODE_HOLDS_OBJECT (o.answer));
  g_assert_cmpstr (vmce_json_object_get_string_opt (json_node_get_object (o.answer), "request"), ==,
                   "victim-status pid=12");
  g_assert_cmpuint (fake_agent_get_n_connections (fx->agent), ==, 1);
  outcome_clear (&o);
}

/* The agent's own error: its class as GIO's code, its words */
static void
test_agent_error_answer (Fixture *fx, gconstpointer data)
{
  Outcome o = { 0 };

  fx->agent = fake_agent_new (fx->path, FAKE_AGENT_ERROR, 0);
  request (fx, "victim-status pid=12", 1000, &o);
  g_assert_error (o.error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND);
  g_assert_cmpstr (o.error->message, ==, "the guest agent of vm t: no such victim");
  outcome_clear (&o);
}

/* No socket there: one error naming the agent, the path and why */
static void
test_agent_no_socket (Fixture *fx, gconstpointer data)
{
  g_autofree gchar *want = NULL;
  Outcome o = { 0 };

  request (fx, "ping", 1000, &o);
  g_assert_error (o.error, G_IO_ERROR, G_IO_ERROR_NOT_FOUND);
  want = g_strdup_printf ("cannot reach the guest agent of vm t at %s: No such file or directory", fx->path);
  g_assert_cmpstr (o.error->message, ==, want);
  outcome_clear (&o);
}

/* No answer within the timeout; the next request is served all the same */
static void
test_agent_timeout (Fixture *fx, gconstpointer data)
{
  Outcome o = { 0 }, next = { 0 };
  gint64 start = g_get_monotonic_time ();

  fx->agent = fake_agent_new (fx->path, FAKE_AGENT_SILENT, 0);
  request (fx, "ping", 100, &o);
  g_assert_error (o.error, G_IO_ERROR, G_IO_ERROR_TIMED_OUT);
  g_assert_nonnull (strstr (o.error->message, "did not answer within 100 ms"));
  g_assert_cmpint (g_get_monotonic_time () - start, <, 2 * G_USEC_PER_SEC);
  fake_agent_set_mode (fx->agent, FAKE_AGENT_ANSWER);
  request (fx, "ping", 1000, &next);
  g_assert_no_error (next.error);
  g_assert_cmpuint (fake_agent_get_n_connections (fx->agent), ==, 2);
  outcome_clear (&o);
  outcome_clear (&next);
}

/* Garbage, and a hang-up without an answer */
static void
test_agent_garbage (Fixture *fx, gconstpointer data)
{
  Outcome o = { 0 }, closed = { 0 };

  fx->agent = fake_agent_new (fx->path, FAKE_AGENT_GARBAGE, 0);
  request (fx, "ping", 1000, &o);
  g_assert_error (o.error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA);
  g_assert_nonnull (strstr (o.error->message, "the guest agent of vm t at "));
  g_assert_nonnull (strstr (o.error->message, " answered garbage: "));
  fake_agent_set_mode (fx->agent, FAKE_AGENT_CLOSE);
  request (fx, "ping", 1000, &closed);
  g_assert_error (closed.error, G_IO_ERROR, G_IO_ERROR_CONNECTION_CLOSED);
  outcome_clear (&o);
  outcome_clear (&closed);
}

/* QEMU serves one client per socket: requests asked at once go one at a
 * time, in order, each on its own connection; the client may go first */
static void
test_agent_one_at_a_time (Fixture *fx, gconstpointer data)
{
  Outcome o[3] = { { 0 } };
  const gchar *const *got;

  fx->agent = fake_agent_new (fx->path, FAKE_AGENT_ANSWER, 50);
  vmce_agent_client_request_async (fx->client, "ping token=0", 1000, request_cb, &o[0]);
  vmce_agent_client_request_async (fx->client, "ping token=1", 1000, request_cb, &o[1]);
  vmce_agent_client_request_async (fx->client, "ping token=2", 1000, request_cb, &o[2]);
  /* the daemon's ref goes (the VM detached): the requests are answered still */
  g_clear_pointer (&fx->client, vmce_agent_client_unref);
  fx->client = vmce_agent_client_new (fx->path, "unused");
  for (guint i = 0; i < 3; i++) {
    wait_for (&o[i]);
    g_assert_no_error (o[i].error);
    g_assert_cmpuint (o[i].order, ==, i + 1);
  }
  got = fake_agent_get_requests (fx->agent);
  g_assert_cmpstr (got[0], ==, "ping token=0");
  g_assert_cmpstr (got[2], ==, "ping token=2");
  g_assert_cmpuint (fake_agent_get_max_waiting (fx->agent), ==, 1);
  g_assert_cmpuint (fake_agent_get_n_connections (fx->agent), ==, 3);
  for (guint i = 0; i < 3; i++)
    outcome_clear (&o[i]);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/agent-client/answer", Fixture, NULL, fixture_setup, test_agent_answer, fixture_teardown);
  g_test_add ("/agent-client/error-answer", Fixture, NULL, fixture_setup, test_agent_error_answer,
              fixture_teardown);
  g_test_add ("/agent-client/no-socket", Fixture, NULL, fixture_setup, test_agent_no_socket, fixture_teardown);
  g_test_add ("/agent-client/timeout", Fixture, NULL, fixture_setup, test_agent_timeout, fixture_teardown);
  g_test_add ("/agent-client/garbage", Fixture, NULL, fixture_setup, test_agent_garbage, fixture_teardown);
  g_test_add ("/agent-client/one-at-a-time", Fixture, NULL, fixture_setup, test_agent_one_at_a_time,
              fixture_teardown);
  return g_test_run ();
}
