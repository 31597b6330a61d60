/*
 * The control commands that need a vm attached, spoken over a socketpair
 * to a real daemon: a child process standing for QEMU (real ptrace, a
 * scripted monitor) and a scripted guest agent. `guest` relays one request
 * to the VM's agent (answer, no socket, no answer in time, garbage);
 * query-status (and the attach record) gives counts where query-vm gives
 * the lists.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib/gstdio.h>
#include <string.h>

#include "commands.h"
#include "control-client.h"
#include "daemon.h"
#include "fake-agent.h"
#include "fake-qemu.h"
#include "json-util.h"
#include "line-socket.h"
#include "proc-info.h"

/* pages the journal holds for the child before vmced starts: a restart
 * brings them back at attach */
#define N_JOURNALED 40

typedef struct {
  gchar *dir;
  gchar *agent_path;
  VmceDaemon *daemon;
  TestChild *child;
  FakeQmp *fake;
  FakeAgent *agent;
  VmceLineSocket *client;
  GQueue lines; /* of JsonNode: what vmced sent */
  VmceVm *vm;
  gboolean attached;
  gint64 next_id;
} Fixture;

/* A journal of vmced's last run: the child's memory errors, one page each,
 * and one machine check `vmcectl inject` sent (the guest told, the host
 * page fine) */
static void
write_journal (Fixture *fx, const gchar *path)
{
  g_autoptr(GString) text = g_string_new (NULL);
  g_autoptr(GError) error = NULL;
  g_autofree gchar *identity = vmce_proc_identity (fx->child->pid, &error);

  g_assert_no_error (error);
  for (guint i = 0; i <= N_JOURNALED; i++)
    g_string_append_printf (text,
                            "{\"type\":\"memory-error\",\"seq\":%u,\"time\":\"2026-12-03T22:58:44.983788Z\","
                            "\"vm\":\"fake-qemu\",\"pid\":%d,\"qemu_id\":\"%s\",\"source\":\"%s\","
                            "\"si_code\":\"BUS_MCEERR_AO\",\"hva\":\"0x7f00%08x\",\"gpa\":\"0x%x\","
                            "\"result\":\"injected\"}\n",
                            i + 1, fx->child->pid, identity, i < N_JOURNALED ? "kernel" : "inject",
                            (i + 1) << 12, (i + 1) << 12);
  g_assert_true (g_file_set_contents (path, text->str, -1, &error));
}

static void
attach_cb (GObject *source, GAsyncResult *res, gpointer data)
{
  Fixture *fx = data;
  g_autoptr(GError) error = NULL;

  fx->vm = vmce_daemon_attach_finish (fx->daemon, res, &error);
  g_assert_no_error (error);
  fx->attached = TRUE;
}

static void
fixture_setup (Fixture *fx, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *socket_path = NULL, *journal_path = NULL, *qmp_path = NULL;
  VmceDaemonOptions options = { 0 };

  if (!test_ptrace_allowed ()) {
    g_test_skip ("ptrace is not allowed here (not root, or yama ptrace_scope)");
    return;
  }
  fx->dir = g_dir_make_tmp ("vmce-test-commands-XXXXXX", &error);
  g_assert_no_error (error);
  socket_path = g_build_filename (fx->dir, "vmced.sock", NULL);
  journal_path = g_build_filename (fx->dir, "journal.jsonl", NULL);
  qmp_path = g_build_filename (fx->dir, "qmp.sock", NULL);
  fx->agent_path = g_build_filename (fx->dir, "agent.sock", NULL);
  fx->child = test_child_spawn ();
  write_journal (fx, journal_path);
  options.socket_path = socket_path;
  options.journal_path = journal_path;
  fx->daemon = vmce_daemon_new (&options, &error);
  g_assert_no_error (error);
  vmce_commands_register (vmce_daemon_get_control (fx->daemon), fx->daemon);
  g_queue_init (&fx->lines);
  fx->client = control_client_new (vmce_daemon_get_control (fx->daemon), &fx->lines, 1 << 24);

  fx->fake = fake_qmp_new_listening (qmp_path);
  fake_qmp_send_greeting (fx->fake);
  fake_qmp_expect (fx->fake, "qmp_capabilities", "{}");
  fake_qemu_script_attach (fx->fake, fx->child, NULL, NULL, FALSE);
  vmce_daemon_attach_async (fx->daemon, fx->child->pid, qmp_path, NULL, fx->agent_path,
                            VMCE_POLICY_FORWARD, attach_cb, fx);
  test_wait (fx->attached);
  g_assert_true (fx->attached);
}

static void
fixture_teardown (Fixture *fx, gconstpointer data)
{
  g_autofree gchar *journal_path = NULL, *qmp_path = NULL;

  if (fx->dir == NULL)
    return;
  journal_path = g_build_filename (fx->dir, "journal.jsonl", NULL);
  qmp_path = g_build_filename (fx->dir, "qmp.sock", NULL);
  g_clear_pointer (&fx->vm, vmce_vm_unref);
  vmce_line_socket_free (fx->client);
  vmce_daemon_free (fx->daemon);
  g_clear_pointer (&fx->agent, fake_agent_free);
  fake_qmp_free (fx->fake);
  test_child_free (fx->child);
  g_queue_clear_full (&fx->lines, (GDestroyNotify) json_node_unref);
  while (g_main_context_iteration (NULL, FALSE))
    ;
  (void) g_unlink (journal_path);
  (void) g_unlink (qmp_path);
  (void) g_rmdir (fx->dir);
  g_free (fx->agent_path);
  g_free (fx->dir);
}

/* Sends @command with @args (JSON text, or NULL) and returns vmced's answer
 * to it (owned by @fx until the next call) */
static JsonObject *
call (Fixture *fx, const gchar *command, const gchar *args)
{
  static JsonNode *last = NULL;
  g_autofree gchar *line = g_strdup_printf ("{\"execute\": \"%s\"%s%s, \"id\": %" G_GINT64_FORMAT "}",
                                            command, args != NULL ? ", \"arguments\": " : "",
                                            args != NULL ? args : "", ++fx->next_id);

  vmce_line_socket_send (fx->client, line);
  g_clear_pointer (&last, json_node_unref);
  for (gint64 deadline = g_get_monotonic_time () + 5 * G_USEC_PER_SEC; g_get_monotonic_time () < deadline;) {
    while (!g_queue_is_empty (&fx->lines)) {
      JsonNode *msg = g_queue_pop_head (&fx->lines);
      JsonObject *obj = json_node_get_object (msg);

      if (json_object_has_member (obj, "id") && json_object_get_int_member (obj, "id") == fx->next_id) {
        last = msg;
        return obj;
      }
      json_node_unref (msg); /* the greeting */
    }
    test_iterate ();
  }
  g_assert_not_reached ();
}

static const gchar *
error_class (JsonObject *reply)
{
  g_assert_true (json_object_has_member (reply, "error"));
  return vmce_json_object_get_string_opt (json_object_get_object_member (reply, "error"), "class");
}

static const gchar *
error_desc (JsonObject *reply)
{
  g_assert_true (json_object_has_member (reply, "error"));
  return vmce_json_object_get_string_opt (json_object_get_object_member (reply, "error"), "desc");
}

/* `guest`: vmced opens the agent's socket, on its own host; each way it
 * can fail is one error naming the vm and the socket */
static void
test_commands_guest (Fixture *fx, gconstpointer data)
{
  g_autofree gchar *missing = NULL, *asked = NULL;
  JsonObject *r;

  if (fx->dir == NULL)
    return; /* skipped */
  r = call (fx, "guest", "{\"vm\": \"fake-qemu\", \"request\": \"ping\"}");
  missing = g_strdup_printf ("cannot reach the guest agent of vm fake-qemu at %s: No such file or directory",
                             fx->agent_path);
  g_assert_cmpstr (error_class (r), ==, "NotFound");
  g_assert_cmpstr (error_desc (r), ==, missing);

  fx->agent = fake_agent_new (fx->agent_path, FAKE_AGENT_ANSWER, 0);
  r = call (fx, "guest", "{\"vm\": \"fake-qemu\", \"request\": \"victim-start mode=idle\"}");
  g_assert_cmpstr (vmce_json_object_get_string_opt (json_object_get_object_member (r, "return"), "request"),
                   ==, "victim-start mode=idle");

  fake_agent_set_mode (fx->agent, FAKE_AGENT_SILENT);
  r = call (fx, "guest", "{\"vm\": \"fake-qemu\", \"request\": \"ping\", \"timeout-ms\": 100}");
  g_assert_cmpstr (error_class (r), ==, "Timeout");
  g_assert_nonnull (strstr (error_desc (r), "did not answer within 100 ms"));

  fake_agent_set_mode (fx->agent, FAKE_AGENT_GARBAGE);
  r = call (fx, "guest", "{\"vm\": \"fake-qemu\", \"request\": \"ping\"}");
  g_assert_cmpstr (error_class (r), ==, "GenericError");
  g_assert_nonnull (strstr (error_desc (r), "answered garbage"));

  fake_agent_set_mode (fx->agent, FAKE_AGENT_ERROR);
  r = call (fx, "guest", "{\"vm\": \"fake-qemu\", \"request\": \"victim-status pid=9\"}");
  g_assert_cmpstr (error_class (r), ==, "NotFound");
  g_assert_cmpstr (error_desc (r), ==, "the guest agent of vm fake-qemu: no such victim");

  /* bad input: vmced's own answers, the agent not asked */
  r = call (fx, "guest", "{\"vm\": \"fake-qemu\", \"request\": \"ping\\nreboot\"}");
  g_assert_cmpstr (error_class (r), ==, "InvalidParameter");
  r = call (fx, "guest", "{\"vm\": \"fake-qemu\"}");
  g_assert_cmpstr (error_class (r), ==, "InvalidParameter");
  r = call (fx, "guest", "{\"vm\": \"nosuch\", \"request\": \"ping\"}");
  g_assert_cmpstr (error_class (r), ==, "NotFound");
  asked = g_strjoinv (",", (gchar **) fake_agent_get_requests (fx->agent));
  g_assert_cmpstr (asked, ==, "victim-start mode=idle,ping,ping,victim-status pid=9");
}

/* attach's sockets are opened by vmced, whose working directory is not
 * the client's: a relative path is refused, before anything is tried */
static void
test_commands_attach_relative (Fixture *fx, gconstpointer data)
{
  g_autofree gchar *journal = NULL;
  g_autofree gchar *args = NULL;
  JsonObject *r;

  if (fx->dir == NULL)
    return; /* skipped */
  r = call (fx, "attach", "{\"pid\": 1, \"qmp\": \"qmp.sock\"}");
  g_assert_cmpstr (error_class (r), ==, "InvalidParameter");
  g_assert_cmpstr (error_desc (r), ==, "'qmp' and 'agent' must be absolute paths (vmced opens them)");
  r = call (fx, "attach", "{\"pid\": 1, \"qmp\": \"/run/qmp.sock\", \"agent\": \"./agent.sock\"}");
  g_assert_cmpstr (error_class (r), ==, "InvalidParameter");
  /* no pid: the socket is probed first (attach-watch.c), and what is not a
   * free monitor is one error naming it */
  r = call (fx, "attach", "{\"qmp\": \"/nonexistent/qmp.sock\"}");
  g_assert_cmpstr (error_class (r), ==, "NotFound");
  g_assert_nonnull (strstr (error_desc (r), "/nonexistent/qmp.sock"));
  journal = g_build_filename (fx->dir, "journal.jsonl", NULL);
  args = g_strdup_printf ("{\"qmp\": \"%s\"}", journal);
  r = call (fx, "attach", args);
  g_assert_cmpstr (error_class (r), ==, "InvalidParameter");
  g_assert_nonnull (strstr (error_desc (r), "not a socket"));
}

/* The journal's attach record's "vm" (owned by @fx), once written */
static JsonObject *
attach_record (Fixture *fx)
{
  static JsonNode *last = NULL;
  g_autofree gchar *path = g_build_filename (fx->dir, "journal.jsonl", NULL);

  g_clear_pointer (&last, json_node_unref);
  /* io_uring writes it from the main loop */
  for (gint64 deadline = g_get_monotonic_time () + 5 * G_USEC_PER_SEC; g_get_monotonic_time () < deadline;) {
    g_autofree gchar *text = NULL;
    g_auto(GStrv) lines = NULL;

    test_iterate ();
    if (!g_file_get_contents (path, &text, NULL, NULL))
      continue;
    lines = g_strsplit (text, "\n", -1);
    for (guint i = 0; lines[i] != NULL; i++) {
      if (strstr (lines[i], "\"type\":\"attach\"") == NULL)
        continue;
      last = vmce_json_parse_object (lines[i], -1, "journal", NULL);
      g_assert_nonnull (last);
      return json_object_get_object_member (json_node_get_object (last), "vm");
    }
  }
  return NULL;
}

/* query-status: every VM with counts, no list; query-vm has the lists */
static void
test_commands_status_counts (Fixture *fx, gconstpointer data)
{
  JsonObject *r, *vm, *counts, *attach;

  if (fx->dir == NULL)
    return; /* skipped */
  r = json_object_get_object_member (call (fx, "query-status", NULL), "return");
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (r, "vms")), ==, 1);
  vm = json_array_get_object_element (json_object_get_array_member (r, "vms"), 0);
  g_assert_cmpstr (vmce_json_object_get_string_opt (vm, "name"), ==, "fake-qemu");
  for (const gchar *const *list = (const gchar *const[]) { "poisoned", "vcpus", "stops", "layout", NULL };
       *list != NULL; list++)
    g_assert_false (json_object_has_member (vm, *list));
  counts = json_object_get_object_member (vm, "counts");
  g_assert_cmpint (json_object_get_int_member (counts, "vcpus"), ==, 1);
  g_assert_cmpint (json_object_get_int_member (counts, "poisoned"), ==, N_JOURNALED + 1);
  g_assert_cmpint (json_object_get_int_member (counts, "told"), ==, N_JOURNALED + 1);
  g_assert_cmpint (json_object_get_int_member (counts, "untold"), ==, 0);
  g_assert_cmpint (json_object_get_int_member (counts, "host_poisoned"), ==, N_JOURNALED);
  g_assert_cmpint (json_object_get_int_member (counts, "restored"), ==, N_JOURNALED + 1);
  g_assert_true (json_object_has_member (vm, "hugepage"));

  /* the journal's attach record counts them too: each has its own record */
  attach = attach_record (fx);
  g_assert_nonnull (attach);
  g_assert_false (json_object_has_member (attach, "poisoned"));
  g_assert_true (json_object_has_member (attach, "vcpus"));
  g_assert_cmpint (json_object_get_int_member (json_object_get_object_member (attach, "counts"), "poisoned"), ==,
                   N_JOURNALED + 1);

  vm = json_object_get_object_member (call (fx, "query-vm", "{\"vm\": \"fake-qemu\"}"), "return");
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (vm, "poisoned")), ==, N_JOURNALED + 1);
  g_assert_cmpuint (json_array_get_length (json_object_get_array_member (vm, "vcpus")), ==, 1);
  g_assert_true (json_object_has_member (vm, "layout"));
  counts = json_object_get_object_member (vm, "counts");
  g_assert_cmpint (json_object_get_int_member (counts, "poisoned"), ==, N_JOURNALED + 1);
}

int
main (int argc, char **argv)
{
  test_block_sigchld ();
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/commands/guest", Fixture, NULL, fixture_setup, test_commands_guest, fixture_teardown);
  g_test_add ("/commands/attach-relative", Fixture, NULL, fixture_setup, test_commands_attach_relative,
              fixture_teardown);
  g_test_add ("/commands/status-counts", Fixture, NULL, fixture_setup, test_commands_status_counts,
              fixture_teardown);
  return g_test_run ();
}
