/*
 * Newline-delimited messages over a non-blocking stream socket.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-socket"

#include "line-socket.h"

struct _VmceLineSocket {
  GSocket *socket;
  gsize max_line;
  VmceLineFunc on_line;
  VmceLineClosedFunc on_closed;
  gpointer user_data;
  GSource *in_source;
  GSource *out_source;
  GByteArray *inbuf;
  GString *outbuf;
  gboolean closed;
  /* inside on_line: a free then only marks it, the dispatch loop frees */
  gboolean dispatching;
  gboolean free_pending;
  gboolean inbuf_grown; /* held a long line since it was last made */
};

/* A GByteArray keeps the room of its longest content: one `info mtree`
 * or query-ram-layout answer at attach (tens of KB) would stay allocated
 * for each VM's monitor for good, on a host of hundreds of VMs */
#define VMCE_LINE_SOCKET_KEEP 8192

static void vmce_line_socket_destroy (VmceLineSocket *self);

static void
vmce_line_socket_drop_sources (VmceLineSocket *self)
{
  if (self->in_source != NULL) {
    g_source_destroy (self->in_source);
    g_clear_pointer (&self->in_source, g_source_unref);
  }
  if (self->out_source != NULL) {
    g_source_destroy (self->out_source);
    g_clear_pointer (&self->out_source, g_source_unref);
  }
}

void
vmce_line_socket_close (VmceLineSocket *self)
{
  if (self->closed)
    return;
  self->closed = TRUE;
  vmce_line_socket_drop_sources (self);
  g_socket_close (self->socket, NULL);
}

static void
vmce_line_socket_fail (VmceLineSocket *self, const GError *error)
{
  if (self->closed)
    return;
  vmce_line_socket_close (self);
  if (self->on_closed != NULL)
    self->on_closed (self, error, self->user_data);
}

static gboolean vmce_line_socket_out_cb (GSocket *socket, GIOCondition cond, gpointer user_data);

static void
vmce_line_socket_flush (VmceLineSocket *self)
{
  while (self->outbuf->len > 0 && !self->closed) {
    g_autoptr(GError) error = NULL;
    gssize n = g_socket_send_with_blocking (self->socket, self->outbuf->str, self->outbuf->len,
                                            FALSE, NULL, &error);
    if (n < 0) {
      if (!g_error_matches (error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK)) {
        g_prefix_error (&error, "cannot send: ");
        vmce_line_socket_fail (self, error);
        return;
      }
      if (self->out_source == NULL) {
        self->out_source = g_socket_create_source (self->socket, G_IO_OUT, NULL);
        g_source_set_callback (self->out_source, G_SOURCE_FUNC (vmce_line_socket_out_cb), self,
                               NULL);
        g_source_attach (self->out_source, NULL);
      }
      return;
    }
    g_string_erase (self->outbuf, 0, n);
  }
  if (self->out_source != NULL) {
    g_source_destroy (self->out_source);
    g_clear_pointer (&self->out_source, g_source_unref);
  }
}

static gboolean
vmce_line_socket_out_cb (GSocket *socket, GIOCondition cond, gpointer user_data)
{
  /* flush() destroys this source once the buffer is empty */
  vmce_line_socket_flush (user_data);
  return G_SOURCE_CONTINUE;
}

void
vmce_line_socket_send (VmceLineSocket *self, const gchar *line)
{
  if (self->closed)
    return;
  g_string_append (self->outbuf, line);
  g_string_append_c (self->outbuf, '\n');
  vmce_line_socket_flush (self);
}

static gboolean
vmce_line_socket_in_cb (GSocket *socket, GIOCondition cond, gpointer user_data)
{
  VmceLineSocket *self = user_data;
  g_autoptr(GError) error = NULL;
  guint8 buf[8192];
  gsize start = 0;
  gint64 now;
  gssize n;

  n = g_socket_receive_with_blocking (self->socket, (gchar *) buf, sizeof buf, FALSE, NULL,
                                      &error);
  if (n < 0) {
    if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_WOULD_BLOCK))
      return G_SOURCE_CONTINUE;
    vmce_line_socket_fail (self, error);
    return G_SOURCE_REMOVE;
  }
  if (n == 0) {
    vmce_line_socket_fail (self, NULL);
    return G_SOURCE_REMOVE;
  }
  now = g_get_monotonic_time ();
  g_byte_array_append (self->inbuf, buf, n);
  if (self->inbuf->len > VMCE_LINE_SOCKET_KEEP)
    self->inbuf_grown = TRUE;
  /* a reply can end its owner's life (a failed attach drops the monitor)
   * while lines are still being handed out */
  self->dispatching = TRUE;
  for (gsize i = 0; i < self->inbuf->len && !self->closed; i++) {
    gsize len;
    if (self->inbuf->data[i] != '\n')
      continue;
    len = i - start;
    if (len > 0 && self->inbuf->data[start + len - 1] == '\r')
      len--;
    if (len > 0)
      self->on_line (self, (const gchar *) self->inbuf->data + start, len, now, self->user_data);
    start = i + 1;
  }
  self->dispatching = FALSE;
  if (self->free_pending) {
    vmce_line_socket_destroy (self);
    return G_SOURCE_REMOVE;
  }
  if (self->closed)
    return G_SOURCE_REMOVE;
  g_byte_array_remove_range (self->inbuf, 0, start);
  if (self->inbuf->len == 0 && self->inbuf_grown) {
    g_byte_array_unref (self->inbuf);
    self->inbuf = g_byte_array_new ();
    self->inbuf_grown = FALSE;
  }
  if (self->inbuf->len > self->max_line) {
    g_autoptr(GError) too_long = g_error_new (G_IO_ERROR, G_IO_ERROR_MESSAGE_TOO_LARGE,
                                              "sent more than %" G_GSIZE_FORMAT
                                              " bytes without a newline",
                                              self->max_line);
    vmce_line_socket_fail (self, too_long);
    return G_SOURCE_REMOVE;
  }
  return G_SOURCE_CONTINUE;
}

VmceLineSocket *
vmce_line_socket_new (GSocket *socket,
                      gsize max_line,
                      VmceLineFunc on_line,
                      VmceLineClosedFunc on_closed,
                      gpointer user_data)
{
  VmceLineSocket *self = g_new0 (VmceLineSocket, 1);

  self->socket = g_object_ref (socket);
  self->max_line = max_line;
  self->on_line = on_line;
  self->on_closed = on_closed;
  self->user_data = user_data;
  self->inbuf = g_byte_array_new ();
  self->outbuf = g_string_new (NULL);
  g_socket_set_blocking (socket, FALSE);
  self->in_source = g_socket_create_source (socket, G_IO_IN | G_IO_HUP | G_IO_ERR, NULL);
  g_source_set_callback (self->in_source, G_SOURCE_FUNC (vmce_line_socket_in_cb), self, NULL);
  g_source_attach (self->in_source, NULL);
  return self;
}

void
vmce_line_socket_free (VmceLineSocket *self)
{
  if (self == NULL)
    return;
  if (self->dispatching) {
    vmce_line_socket_close (self);
    self->free_pending = TRUE;
    return;
  }
  vmce_line_socket_destroy (self);
}

static void
vmce_line_socket_destroy (VmceLineSocket *self)
{
  vmce_line_socket_drop_sources (self);
  if (!self->closed)
    g_socket_close (self->socket, NULL);
  g_object_unref (self->socket);
  g_byte_array_unref (self->inbuf);
  g_string_free (self->outbuf, TRUE);
  g_free (self);
}

gboolean
vmce_line_socket_is_closed (VmceLineSocket *self)
{
  return self->closed;
}

GSocket *
vmce_line_socket_get_socket (VmceLineSocket *self)
{
  return self->socket;
}
