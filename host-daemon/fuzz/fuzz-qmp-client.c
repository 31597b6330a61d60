/*
 * Fuzz target: whatever a QMP monitor may send. The input is the peer's
 * byte stream; the client is mid-handshake with one command pending, and
 * must neither crash nor leak, whatever arrives.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include "qmp-client.h"

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

static void
done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GError) error = NULL;

  (void) vmce_qmp_client_handshake_finish (VMCE_QMP_CLIENT (source), res, &error);
  *(gboolean *) user_data = TRUE;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  g_autoptr(GSocket) sock = NULL;
  g_autoptr(VmceQmpClient) client = NULL;
  gboolean done = FALSE;
  int fds[2];

  if (size > 1 << 20 || socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0)
    return 0;
  sock = g_socket_new_from_fd (fds[0], NULL);
  client = vmce_qmp_client_new (sock, "fuzz");
  vmce_qmp_client_set_timeout (client, 1000);
  vmce_qmp_client_handshake_async (client, NULL, done_cb, &done);
  /* the peer says everything at once, then hangs up */
  for (size_t off = 0; off < size;) {
    ssize_t n = write (fds[1], data + off, size - off);
    if (n <= 0)
      break;
    off += (size_t) n;
  }
  close (fds[1]);
  while (!done)
    g_main_context_iteration (NULL, TRUE);
  /* whatever the handshake did, the connection ends closed */
  while (vmce_qmp_client_is_open (client))
    g_main_context_iteration (NULL, TRUE);
  while (g_main_context_iteration (NULL, FALSE))
    ;
  return 0;
}
