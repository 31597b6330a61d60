/*
 * Fuzz target: whatever a control client may send to vmced.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static void
cmd_echo (VmceControlRequest *req, JsonObject *args, gpointer user_data)
{
  JsonNode *node = json_node_new (JSON_NODE_OBJECT);

  json_node_set_object (node, args);
  vmce_control_request_return (req, node);
  json_node_unref (node);
}

static void
cmd_subscribe (VmceControlRequest *req, JsonObject *args, gpointer user_data)
{
  vmce_control_request_subscribe (req);
  vmce_control_request_error (req, VMCE_ERROR_GENERIC, "subscribed, and an error for good measure");
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  VmceControl *control;
  g_autoptr(GSocket) sock = NULL;
  g_autoptr(JsonNode) event = json_from_string ("{\"vm\": \"fuzz\"}", NULL);
  char sink[65536];
  int fds[2];

  if (size > 1 << 20 || socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0)
    return 0;
  sock = g_socket_new_from_fd (fds[0], NULL);
  control = vmce_control_new_unbound ();
  vmce_control_add_command (control, "echo", cmd_echo, NULL);
  vmce_control_add_command (control, "subscribe", cmd_subscribe, NULL);
  vmce_control_add_connection (control, sock);
  for (size_t off = 0; off < size;) {
    ssize_t n = write (fds[1], data + off, size - off);
    if (n <= 0)
      break;
    off += (size_t) n;
  }
  shutdown (fds[1], SHUT_WR);
  /* serve until the control side sees the end, draining what it answers */
  for (guint idle = 0; idle < 3;) {
    if (g_main_context_iteration (NULL, FALSE))
      idle = 0;
    else
      idle++;
    while (recv (fds[1], sink, sizeof sink, MSG_DONTWAIT) > 0)
      ;
  }
  vmce_control_broadcast (control, "MEMORY_ERROR", event);
  vmce_control_free (control);
  close (fds[1]);
  while (g_main_context_iteration (NULL, FALSE))
    ;
  return 0;
}
