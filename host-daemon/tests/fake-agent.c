/*
 * A scripted vmce guest agent for unit tests.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <gio/gunixsocketaddress.h>
#include <glib/gstdio.h>

#include "fake-agent.h"
#include "json-util.h"
#include "line-socket.h"

struct _FakeAgent {
  gchar *path;
  FakeAgentMode mode;
  guint delay_ms;
  GSocket *listener;
  GSource *accept_source;
  GPtrArray *conns;    /* of FakeAgentConn, open or closed */
  GPtrArray *requests; /* of gchar *, NULL-terminated */
  guint waiting, max_waiting; /* requests read and not answered yet */
};

typedef struct {
  FakeAgent *agent;
  VmceLineSocket *sock;
  gchar *pending; /* the request waiting out the delay */
  guint delay_id;
} FakeAgentConn;

static void
fake_agent_conn_close (FakeAgentConn *conn)
{
  g_clear_pointer (&conn->sock, vmce_line_socket_free);
}

static void
fake_agent_conn_free (FakeAgentConn *conn)
{
  g_clear_handle_id (&conn->delay_id, g_source_remove);
  fake_agent_conn_close (conn);
  g_free (conn->pending);
  g_free (conn);
}

static void
fake_agent_reply (FakeAgentConn *conn, const gchar *request)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonNode) node = NULL;
  g_autofree gchar *line = NULL;

  if (conn->agent->mode != FAKE_AGENT_SILENT)
    conn->agent->waiting--;
  switch (conn->agent->mode) {
  case FAKE_AGENT_SILENT:
    return;
  case FAKE_AGENT_CLOSE:
    fake_agent_conn_close (conn);
    return;
  case FAKE_AGENT_GARBAGE:
    vmce_line_socket_send (conn->sock, "Segmentation fault (core dumped)");
    return;
  case FAKE_AGENT_ERROR:
    vmce_line_socket_send (conn->sock, "{\"error\":{\"class\":\"NotFound\",\"desc\":\"no such victim\"}}");
    return;
  case FAKE_AGENT_ANSWER:
    break;
  }
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "return");
  json_builder_begin_object (b);
  vmce_json_builder_add_string (b, "request", request);
  json_builder_end_object (b);
  json_builder_end_object (b);
  node = json_builder_get_root (b);
  line = vmce_json_to_line (node);
  vmce_line_socket_send (conn->sock, line);
}

static gboolean
fake_agent_delay_cb (gpointer data)
{
  FakeAgentConn *conn = data;
  g_autofree gchar *request = g_steal_pointer (&conn->pending);

  conn->delay_id = 0;
  if (conn->sock != NULL)
    fake_agent_reply (conn, request);
  return G_SOURCE_REMOVE;
}

static void
fake_agent_line_cb (VmceLineSocket *sock, const gchar *line, gsize len, gint64 t, gpointer data)
{
  FakeAgentConn *conn = data;
  FakeAgent *self = conn->agent;
  g_autofree gchar *request = g_strndup (line, len);

  g_ptr_array_insert (self->requests, self->requests->len - 1, g_strdup (request));
  self->waiting++;
  self->max_waiting = MAX (self->max_waiting, self->waiting);
  if (self->delay_ms == 0) {
    fake_agent_reply (conn, request);
    return;
  }
  g_free (conn->pending);
  conn->pending = g_steal_pointer (&request);
  conn->delay_id = g_timeout_add (self->delay_ms, fake_agent_delay_cb, conn);
}

static void
fake_agent_closed_cb (VmceLineSocket *sock, const GError *error, gpointer data)
{
  FakeAgentConn *conn = data;

  /* the client hung up: this end goes too, as QEMU's does */
  fake_agent_conn_close (conn);
}

static gboolean
fake_agent_accept_cb (GSocket *listener, GIOCondition cond, gpointer data)
{
  FakeAgent *self = data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GSocket) sock = g_socket_accept (listener, NULL, &error);
  FakeAgentConn *conn;

  g_assert_no_error (error);
  conn = g_new0 (FakeAgentConn, 1);
  conn->agent = self;
  conn->sock = vmce_line_socket_new (sock, 1 << 20, fake_agent_line_cb, fake_agent_closed_cb, conn);
  g_ptr_array_add (self->conns, conn);
  return G_SOURCE_CONTINUE;
}

FakeAgent *
fake_agent_new (const gchar *path, FakeAgentMode mode, guint delay_ms)
{
  FakeAgent *self = g_new0 (FakeAgent, 1);
  g_autoptr(GError) error = NULL;
  g_autoptr(GSocketAddress) addr = g_unix_socket_address_new (path);

  self->path = g_strdup (path);
  self->mode = mode;
  self->delay_ms = delay_ms;
  self->conns = g_ptr_array_new_with_free_func ((GDestroyNotify) fake_agent_conn_free);
  self->requests = g_ptr_array_new_with_free_func (g_free);
  g_ptr_array_add (self->requests, NULL);
  self->listener = g_socket_new (G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_DEFAULT, &error);
  g_assert_no_error (error);
  g_assert_true (g_socket_bind (self->listener, addr, TRUE, &error));
  g_assert_true (g_socket_listen (self->listener, &error));
  self->accept_source = g_socket_create_source (self->listener, G_IO_IN, NULL);
  g_source_set_callback (self->accept_source, G_SOURCE_FUNC (fake_agent_accept_cb), self, NULL);
  g_source_attach (self->accept_source, NULL);
  return self;
}

void
fake_agent_free (FakeAgent *self)
{
  g_source_destroy (self->accept_source);
  g_source_unref (self->accept_source);
  g_object_unref (self->listener);
  g_ptr_array_unref (self->conns);
  g_ptr_array_unref (self->requests);
  (void) g_unlink (self->path);
  g_free (self->path);
  g_free (self);
}

void
fake_agent_set_mode (FakeAgent *self, FakeAgentMode mode)
{
  self->mode = mode;
}

guint
fake_agent_get_n_connections (FakeAgent *self)
{
  return self->conns->len;
}

guint
fake_agent_get_max_waiting (FakeAgent *self)
{
  return self->max_waiting;
}

const gchar *const *
fake_agent_get_requests (FakeAgent *self)
{
  return (const gchar *const *) self->requests->pdata;
}
