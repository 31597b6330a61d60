/*
 * ctl-connect: the ssh command for a target, the greeting's checks, and
 * events that arrive while a command waits for its reply, over a real
 * socket pair whose far end is scripted.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <gio/gio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ctl-connect.h"

static gchar *
joined (gchar **argv)
{
  return g_strjoinv (" ", argv);
}

static void
test_ctl_ssh_argv (void)
{
  g_autoptr(GError) error = NULL;
  g_auto(GStrv) argv = NULL;
  g_autofree gchar *line = NULL;

  argv = vmce_ctl_ssh_argv ("ssh://root@hv7.example:2200?socket=/run/x%20y.sock&keyfile=/k/id&no_verify=1"
                            "&vmcectl=/opt/vmce/bin/vmcectl",
                            "ssh -F /tmp/cfg", &error);
  g_assert_no_error (error);
  line = joined (argv);
  g_assert_cmpstr (line, ==,
                   "ssh -F /tmp/cfg -T -o BatchMode=yes -o ConnectTimeout=10 -p 2200 -l root -i /k/id -o "
                   "IdentitiesOnly=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o "
                   "LogLevel=ERROR -- hv7.example '/opt/vmce/bin/vmcectl' --stdio-bridge --socket '/run/x y.sock'");
  g_clear_pointer (&argv, g_strfreev);
  g_clear_pointer (&line, g_free);

  /* the defaults: ssh's own port, user and keys, the remote's vmcectl on
   * its PATH and its default socket */
  argv = vmce_ctl_ssh_argv ("ssh://hv8/", NULL, &error);
  g_assert_no_error (error);
  line = joined (argv);
  g_assert_cmpstr (line, ==,
                   "ssh -T -o BatchMode=yes -o ConnectTimeout=10 -- hv8 'vmcectl' --stdio-bridge");
}

static void
test_ctl_ssh_argv_bad (void)
{
  static const struct {
    const gchar *target;
    const gchar *says;
  } bad[] = {
    { "ssh://", "names no host" },
    { "ssh://hv7/system", "a path means nothing here" },
    { "ssh://hv7?colour=red", "unknown parameter colour" },
    { "http://hv7", "not a vmced to reach" },
    { "ssh://hv7:notaport", "hv7" },
  };

  for (guint i = 0; i < G_N_ELEMENTS (bad); i++) {
    g_autoptr(GError) error = NULL;
    g_auto(GStrv) argv = vmce_ctl_ssh_argv (bad[i].target, NULL, &error);

    g_assert_null (argv);
    g_assert_nonnull (error);
    g_assert_nonnull (strstr (error->message, bad[i].says));
  }
}

static void
test_ctl_label (void)
{
  g_autofree gchar *a = vmce_ctl_target_label ("ssh://root@hv7:2200?socket=/x");
  g_autofree gchar *b = vmce_ctl_target_label ("ssh://hv8");
  g_autofree gchar *c = vmce_ctl_target_label ("/run/vmce/vmced.sock");

  g_assert_cmpstr (a, ==, "hv7:2200");
  g_assert_cmpstr (b, ==, "hv8");
  g_assert_cmpstr (c, ==, "local");
}

/* A connection whose far end has already said @script; the far end's fd
 * in @peer */
static GIOStream *
scripted_stream (const gchar *script, int *peer)
{
  int sv[2];
  g_autoptr(GSocket) sock = NULL;
  g_autoptr(GError) error = NULL;

  g_assert_no_errno (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
  g_assert_cmpint (write (sv[1], script, strlen (script)), ==, (gssize) strlen (script));
  sock = g_socket_new_from_fd (sv[0], &error);
  g_assert_no_error (error);
  *peer = sv[1];
  return G_IO_STREAM (g_socket_connection_factory_create_connection (sock));
}

#define GREETING(version) "{\"vmced\":{\"version\":\"" version "\",\"pid\":42},\"capabilities\":[\"events\"]}\n"

static void
test_ctl_greeting (void)
{
  static const struct {
    const gchar *script;
    const gchar *says; /* NULL: accepted */
  } cases[] = {
    { GREETING (PACKAGE_VERSION), NULL },
    { GREETING ("0.0.9"), "hv7: vmced there is version 0.0.9, this vmcectl is " PACKAGE_VERSION },
    { "{\"QMP\":{}}\n", "hv7: what answers is not vmced" },
    { "", "hv7: vmced closed the connection" },
    { "not json\n", "hv7: " },
  };

  for (guint i = 0; i < G_N_ELEMENTS (cases); i++) {
    g_autoptr(GError) error = NULL;
    int peer;
    g_autoptr(GIOStream) stream = scripted_stream (cases[i].script, &peer);
    g_autoptr(VmceCtlConn) conn = NULL;

    if (cases[i].script[0] == '\0')
      shutdown (peer, SHUT_WR);
    conn = vmce_ctl_conn_new_for_stream (stream, "hv7", NULL, &error);
    if (cases[i].says == NULL) {
      g_assert_no_error (error);
      g_assert_cmpint (json_object_get_int_member (vmce_ctl_conn_get_vmced (conn), "pid"), ==, 42);
    } else {
      g_assert_null (conn);
      g_assert_nonnull (error);
      g_assert_true (g_str_has_prefix (error->message, cases[i].says));
    }
    close (peer);
  }
}

/* An event that comes before a command's reply is kept, not lost: events
 * --follow subscribes, then asks for the past ones */
static void
test_ctl_events_during_call (void)
{
  g_autoptr(GError) error = NULL;
  int peer;
  g_autoptr(GIOStream) stream = scripted_stream (
    GREETING (PACKAGE_VERSION)
    "{\"event\":\"record\",\"data\":{\"type\":\"memory-error\",\"gpa\":\"0x1000\"}}\n"
    "{\"return\":{},\"id\":1}\n"
    "{\"event\":\"record\",\"data\":{\"type\":\"detach\",\"vm\":\"a\"}}\n",
    &peer);
  g_autoptr(VmceCtlConn) conn = vmce_ctl_conn_new_for_stream (stream, "hv7", NULL, &error);
  g_autoptr(JsonNode) ret = NULL;
  g_autoptr(JsonNode) first = NULL;
  g_autoptr(JsonNode) second = NULL;
  g_autoptr(JsonNode) end = NULL;
  char buf[256];
  gssize n;

  g_assert_no_error (error);
  ret = vmce_ctl_conn_call (conn, "subscribe", NULL, &error);
  g_assert_no_error (error);
  g_assert_nonnull (ret);
  n = read (peer, buf, sizeof buf - 1);
  g_assert_cmpint (n, >, 0);
  buf[n] = '\0';
  g_assert_cmpstr (buf, ==, "{\"execute\":\"subscribe\",\"id\":1}\n");
  first = vmce_ctl_conn_read_event (conn, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (json_object_get_string_member (json_node_get_object (first), "gpa"), ==, "0x1000");
  second = vmce_ctl_conn_read_event (conn, &error);
  g_assert_no_error (error);
  g_assert_cmpstr (json_object_get_string_member (json_node_get_object (second), "type"), ==, "detach");
  /* the far end goes: one error, naming the host */
  close (peer);
  end = vmce_ctl_conn_read_event (conn, &error);
  g_assert_null (end);
  g_assert_nonnull (error);
  g_assert_true (g_str_has_prefix (error->message, "hv7: "));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/ctl-connect/ssh-argv", test_ctl_ssh_argv);
  g_test_add_func ("/ctl-connect/ssh-argv-bad", test_ctl_ssh_argv_bad);
  g_test_add_func ("/ctl-connect/label", test_ctl_label);
  g_test_add_func ("/ctl-connect/greeting", test_ctl_greeting);
  g_test_add_func ("/ctl-connect/events-during-call", test_ctl_events_during_call);
  return g_test_run ();
}
