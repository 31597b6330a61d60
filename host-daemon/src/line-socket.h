/*
 * Newline-delimited messages over a non-blocking stream socket, read and
 * written from the GLib main loop: the framing both QMP (vmced as a client
 * of QEMU) and vmced's own control protocol use.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <gio/gio.h>

typedef struct _VmceLineSocket VmceLineSocket;

/* @time_us: monotonic time the line was read */
typedef void (*VmceLineFunc) (VmceLineSocket *sock,
                              const gchar *line,
                              gsize len,
                              gint64 time_us,
                              gpointer user_data);
/* @error is NULL when the peer closed the connection */
typedef void (*VmceLineClosedFunc) (VmceLineSocket *sock, const GError *error, gpointer user_data);

/* The callbacks may close the socket, or free it (on_line: the free
 * happens once the lines already read are handed out) */
VmceLineSocket *vmce_line_socket_new (GSocket *socket,
                                      gsize max_line,
                                      VmceLineFunc on_line,
                                      VmceLineClosedFunc on_closed,
                                      gpointer user_data);
void vmce_line_socket_free (VmceLineSocket *self);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VmceLineSocket, vmce_line_socket_free)

/* Queues @line and a newline; never blocks */
void vmce_line_socket_send (VmceLineSocket *self, const gchar *line);
/* Closes without calling on_closed */
void vmce_line_socket_close (VmceLineSocket *self);
gboolean vmce_line_socket_is_closed (VmceLineSocket *self);
GSocket *vmce_line_socket_get_socket (VmceLineSocket *self);
