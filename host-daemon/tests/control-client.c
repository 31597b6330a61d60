/*
 * A client of vmced's control socket for unit tests (control-client.h).
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <sys/socket.h>

#include "control-client.h"
#include "json-util.h"

static void
control_client_line_cb (VmceLineSocket *sock, const gchar *line, gsize len, gint64 t, gpointer data)
{
  GQueue *lines = data;
  g_autoptr(GError) error = NULL;
  JsonNode *node = vmce_json_parse_object (line, (gssize) len, "vmced", &error);

  g_assert_no_error (error);
  g_queue_push_tail (lines, node);
}

VmceLineSocket *
control_client_new (VmceControl *control, GQueue *lines, gsize max_line)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(GSocket) a = NULL;
  g_autoptr(GSocket) b = NULL;
  int fds[2];

  g_assert_no_errno (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds));
  a = g_socket_new_from_fd (fds[0], &error);
  g_assert_no_error (error);
  b = g_socket_new_from_fd (fds[1], &error);
  g_assert_no_error (error);
  vmce_control_add_connection (control, a);
  return vmce_line_socket_new (b, max_line, control_client_line_cb, NULL, lines);
}
