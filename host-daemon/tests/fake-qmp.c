/*
 * A scripted QMP peer for unit tests.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <sys/socket.h>

#include <gio/gunixsocketaddress.h>

#include "fake-qmp.h"
#include "json-util.h"
#include "line-socket.h"

typedef struct {
  gchar *command;
  gchar *reply;
} FakeStep;

struct _FakeQmp {
  VmceLineSocket *sock;
  GSocket *listener;
  GSource *accept_source;
  GString *unsent; /* before a client connected */
  GQueue steps;
  guint n_requests;
  gchar *last_arguments;
};

static void
fake_step_free (FakeStep *step)
{
  g_free (step->command);
  g_free (step->reply);
  g_free (step);
}

static void
fake_qmp_answer (FakeQmp *self, const gchar *reply, JsonNode *id)
{
  g_autoptr(JsonObject) obj = json_object_new ();
  g_autoptr(JsonNode) msg = json_node_new (JSON_NODE_OBJECT);
  g_autofree gchar *line = NULL;

  if (g_str_has_prefix (reply, "raw:")) {
    fake_qmp_send (self, reply + 4);
    return;
  }
  if (g_str_has_prefix (reply, "error:")) {
    g_autoptr(JsonObject) err = json_object_new ();
    json_object_set_string_member (err, "class", "GenericError");
    json_object_set_string_member (err, "desc", reply + 6);
    json_object_set_object_member (obj, "error", g_steal_pointer (&err));
  } else {
    g_autoptr(GError) error = NULL;
    JsonNode *value = json_from_string (reply, &error);
    g_assert_no_error (error);
    json_object_set_member (obj, "return", value);
  }
  if (id != NULL)
    json_object_set_member (obj, "id", json_node_copy (id));
  json_node_set_object (msg, obj);
  line = vmce_json_to_line (msg);
  fake_qmp_send (self, line);
}

static void
fake_qmp_line_cb (VmceLineSocket *sock, const gchar *line, gsize len, gint64 t, gpointer data)
{
  FakeQmp *self = data;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) root = vmce_json_parse_object (line, (gssize) len, "client", &error);
  FakeStep *step;
  JsonObject *req;
  JsonNode *args;

  g_assert_no_error (error);
  req = json_node_get_object (root);
  self->n_requests++;
  g_clear_pointer (&self->last_arguments, g_free);
  args = json_object_get_member (req, "arguments");
  if (args != NULL)
    self->last_arguments = json_to_string (args, FALSE);
  step = g_queue_pop_head (&self->steps);
  g_assert_nonnull (step);
  g_assert_cmpstr (vmce_json_object_get_string_opt (req, "execute"), ==, step->command);
  if (step->reply != NULL)
    fake_qmp_answer (self, step->reply, json_object_get_member (req, "id"));
  fake_step_free (step);
}

static gboolean
fake_qmp_accept_cb (GSocket *listener, GIOCondition cond, gpointer data)
{
  FakeQmp *self = data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GSocket) conn = g_socket_accept (listener, NULL, &error);

  g_assert_no_error (error);
  self->sock = vmce_line_socket_new (conn, 1 << 20, fake_qmp_line_cb, NULL, self);
  if (self->unsent->len > 0) {
    /* the buffered lines end in a newline each: send all but the last one's */
    g_string_truncate (self->unsent, self->unsent->len - 1);
    vmce_line_socket_send (self->sock, self->unsent->str);
    g_string_truncate (self->unsent, 0);
  }
  g_clear_pointer (&self->accept_source, g_source_unref);
  return G_SOURCE_REMOVE;
}

FakeQmp *
fake_qmp_new_listening (const gchar *path)
{
  FakeQmp *self = g_new0 (FakeQmp, 1);
  g_autoptr(GError) error = NULL;
  g_autoptr(GSocketAddress) addr = g_unix_socket_address_new (path);

  g_queue_init (&self->steps);
  self->unsent = g_string_new (NULL);
  self->listener = g_socket_new (G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_STREAM,
                                 G_SOCKET_PROTOCOL_DEFAULT, &error);
  g_assert_no_error (error);
  g_assert_true (g_socket_bind (self->listener, addr, TRUE, &error));
  g_assert_true (g_socket_listen (self->listener, &error));
  self->accept_source = g_socket_create_source (self->listener, G_IO_IN, NULL);
  g_source_set_callback (self->accept_source, G_SOURCE_FUNC (fake_qmp_accept_cb), self, NULL);
  g_source_attach (self->accept_source, NULL);
  return self;
}

FakeQmp *
fake_qmp_new (GSocket **client)
{
  FakeQmp *self = g_new0 (FakeQmp, 1);
  g_autoptr(GError) error = NULL;
  g_autoptr(GSocket) mine = NULL;
  int fds[2];

  g_assert_no_errno (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds));
  mine = g_socket_new_from_fd (fds[0], &error);
  g_assert_no_error (error);
  *client = g_socket_new_from_fd (fds[1], &error);
  g_assert_no_error (error);
  g_queue_init (&self->steps);
  self->unsent = g_string_new (NULL);
  self->sock = vmce_line_socket_new (mine, 1 << 20, fake_qmp_line_cb, NULL, self);
  return self;
}

void
fake_qmp_free (FakeQmp *self)
{
  if (self->accept_source != NULL) {
    g_source_destroy (self->accept_source);
    g_source_unref (self->accept_source);
  }
  g_clear_object (&self->listener);
  g_string_free (self->unsent, TRUE);
  g_clear_pointer (&self->sock, vmce_line_socket_free);
  g_queue_clear_full (&self->steps, (GDestroyNotify) fake_step_free);
  g_free (self->last_arguments);
  g_free (self);
}

void
fake_qmp_send (FakeQmp *self, const gchar *line)
{
  if (self->sock == NULL) {
    g_string_append (self->unsent, line);
    g_string_append_c (self->unsent, '\n');
    return;
  }
  vmce_line_socket_send (self->sock, line);
}

void
fake_qmp_send_greeting (FakeQmp *self)
{
  fake_qmp_send (self, "{\"QMP\": {\"version\": {\"qemu\": {\"micro\": 0, \"minor\": 2, "
                       "\"major\": 7}, \"package\": \"Debian\"}, \"capabilities\": [\"oob\"]}}");
}

void
fake_qmp_expect (FakeQmp *self, const gchar *command, const gchar *reply)
{
  FakeStep *step = g_new0 (FakeStep, 1);

  step->command = g_strdup (command);
  step->reply = g_strdup (reply);
  g_queue_push_tail (&self->steps, step);
}

gboolean
fake_qmp_script_done (FakeQmp *self)
{
  return g_queue_is_empty (&self->steps);
}

void
fake_qmp_clear_script (FakeQmp *self)
{
  g_queue_clear_full (&self->steps, (GDestroyNotify) fake_step_free);
}

guint
fake_qmp_get_n_requests (FakeQmp *self)
{
  return self->n_requests;
}

const gchar *
fake_qmp_get_last_arguments (FakeQmp *self)
{
  return self->last_arguments;
}

void
fake_qmp_hang_up (FakeQmp *self)
{
  if (self->sock != NULL)
    vmce_line_socket_close (self->sock);
}
