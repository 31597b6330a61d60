/*
 * vmced's control socket.
 *
 * Only root (or vmced's own user) may connect: the socket is created
 * 0600 and each peer's credentials are checked, because a client can make
 * vmced stop threads of any QEMU it watches.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-control"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "control.h"
#include "json-util.h"
#include "line-socket.h"

#define VMCE_CONTROL_MAX_LINE (1024 * 1024)

typedef struct {
  VmceControlHandler handler;
  gpointer user_data;
} VmceControlCommand;

typedef struct {
  gint ref_count;
  VmceControl *control;
  VmceLineSocket *sock;
  gboolean subscribed;
} VmceControlClient;

struct _VmceControlRequest {
  VmceControlClient *client;
  gchar *command;
  JsonNode *id;
};

struct _VmceControl {
  gchar *path;
  GSocketService *service;
  GHashTable *commands; /* name -> VmceControlCommand */
  GPtrArray *clients;
};

static VmceControlClient *
vmce_control_client_ref (VmceControlClient *client)
{
  client->ref_count++;
  return client;
}

static void
vmce_control_client_unref (VmceControlClient *client)
{
  if (--client->ref_count > 0)
    return;
  vmce_line_socket_free (client->sock);
  g_free (client);
}

static void
vmce_control_client_unref_cb (gpointer client)
{
  vmce_control_client_unref (client);
}

static void
vmce_control_client_drop (VmceControlClient *client)
{
  vmce_line_socket_close (client->sock);
  if (client->control != NULL) {
    g_ptr_array_remove (client->control->clients, client);
    client->control = NULL;
    /* we may be inside the socket's own callback: free it later */
    g_idle_add_once (vmce_control_client_unref_cb, client);
  }
}

static void
vmce_control_send (VmceControlClient *client, JsonNode *msg)
{
  g_autofree gchar *line = vmce_json_to_line (msg);

  vmce_line_socket_send (client->sock, line);
}

static void
vmce_control_request_free (VmceControlRequest *req)
{
  vmce_control_client_unref (req->client);
  g_clear_pointer (&req->id, json_node_unref);
  g_free (req->command);
  g_free (req);
}

static void
vmce_control_request_reply (VmceControlRequest *req, const gchar *member, JsonNode *value)
{
  g_autoptr(JsonObject) obj = json_object_new ();
  g_autoptr(JsonNode) msg = json_node_new (JSON_NODE_OBJECT);

  json_object_set_member (obj, member, value);
  if (req->id != NULL)
    json_object_set_member (obj, "id", json_node_copy (req->id));
  json_node_set_object (msg, obj);
  /* a client that went away meanwhile does not get it */
  if (req->client->control != NULL)
    vmce_control_send (req->client, msg);
  vmce_control_request_free (req);
}

void
vmce_control_request_return (VmceControlRequest *req, JsonNode *ret)
{
  JsonNode *value;

  if (ret != NULL) {
    value = json_node_copy (ret);
  } else {
    value = json_node_new (JSON_NODE_OBJECT);
    json_node_take_object (value, json_object_new ());
  }
  vmce_control_request_reply (req, "return", value);
}

static void
vmce_control_request_error_valist (VmceControlRequest *req,
                                   const gchar *klass,
                                   const gchar *desc)
{
  g_autoptr(JsonObject) err = json_object_new ();
  JsonNode *value = json_node_new (JSON_NODE_OBJECT);

  json_object_set_string_member (err, "class", klass);
  json_object_set_string_member (err, "desc", desc);
  json_node_set_object (value, err);
  g_debug ("%s: %s", req->command, desc);
  vmce_control_request_reply (req, "error", value);
}

void
vmce_control_request_error (VmceControlRequest *req, VmceErrorCode code, const gchar *format, ...)
{
  g_autofree gchar *desc = NULL;
  va_list args;

  va_start (args, format);
  desc = g_strdup_vprintf (format, args);
  va_end (args);
  vmce_control_request_error_valist (req, vmce_error_code_to_class (code), desc);
}

void
vmce_control_request_error_literal (VmceControlRequest *req, const GError *error)
{
  vmce_control_request_error_valist (req, vmce_error_class (error), error->message);
}

void
vmce_control_request_subscribe (VmceControlRequest *req)
{
  req->client->subscribed = TRUE;
}

void
vmce_control_broadcast (VmceControl *self, const gchar *event, JsonNode *data)
{
  g_autoptr(JsonObject) obj = json_object_new ();
  g_autoptr(JsonObject) ts = json_object_new ();
  g_autoptr(JsonNode) msg = json_node_new (JSON_NODE_OBJECT);
  gint64 now = g_get_real_time ();

  json_object_set_string_member (obj, "event", event);
  if (data != NULL)
    json_object_set_member (obj, "data", json_node_copy (data));
  json_object_set_int_member (ts, "seconds", now / G_USEC_PER_SEC);
  json_object_set_int_member (ts, "microseconds", now % G_USEC_PER_SEC);
  json_object_set_object_member (obj, "timestamp", g_steal_pointer (&ts));
  json_node_set_object (msg, obj);
  for (guint i = 0; i < self->clients->len; i++) {
    VmceControlClient *client = g_ptr_array_index (self->clients, i);
    if (client->subscribed)
      vmce_control_send (client, msg);
  }
}

static void
vmce_control_line_cb (VmceLineSocket *sock,
                      const gchar *line,
                      gsize len,
                      gint64 time_us,
                      gpointer user_data)
{
  VmceControlClient *client = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) root = NULL;
  VmceControlRequest *req;
  VmceControlCommand *cmd;
  JsonObject *msg;
  JsonNode *args;
  const gchar *name;

  req = g_new0 (VmceControlRequest, 1);
  req->client = vmce_control_client_ref (client);
  root = vmce_json_parse_object (line, len, "client", &error);
  if (root == NULL) {
    req->command = g_strdup ("(invalid)");
    vmce_control_request_error (req, VMCE_ERROR_GENERIC, "%s", error->message);
    return;
  }
  msg = json_node_get_object (root);
  if (json_object_has_member (msg, "id"))
    req->id = json_node_copy (json_object_get_member (msg, "id"));
  name = vmce_json_object_get_string_opt (msg, "execute");
  req->command = g_strdup (name != NULL ? name : "(none)");
  if (name == NULL) {
    vmce_control_request_error (req, VMCE_ERROR_GENERIC, "expected {\"execute\": \"<command>\"}");
    return;
  }
  cmd = g_hash_table_lookup (client->control->commands, name);
  if (cmd == NULL) {
    vmce_control_request_error (req, VMCE_ERROR_COMMAND_NOT_FOUND, "the command %s has not been found",
                                name);
    return;
  }
  args = json_object_get_member (msg, "arguments");
  if (args != NULL && !JSON_NODE_HOLDS_OBJECT (args)) {
    vmce_control_request_error (req, VMCE_ERROR_GENERIC, "'arguments' must be an object");
    return;
  }
  if (args == NULL) {
    g_autoptr(JsonObject) empty = json_object_new ();
    cmd->handler (req, empty, cmd->user_data);
    return;
  }
  cmd->handler (req, json_node_get_object (args), cmd->user_data);
}

static void
vmce_control_closed_cb (VmceLineSocket *sock, const GError *error, gpointer user_data)
{
  VmceControlClient *client = user_data;

  if (error != NULL)
    g_debug ("control client: %s", error->message);
  vmce_control_client_drop (client);
}

static gboolean
vmce_control_peer_allowed (GSocket *socket)
{
  g_autoptr(GCredentials) creds = g_socket_get_credentials (socket, NULL);
  uid_t uid;

  if (creds == NULL)
    return FALSE;
  uid = g_credentials_get_unix_user (creds, NULL);
  return uid == 0 || uid == getuid ();
}

void
vmce_control_add_connection (VmceControl *self, GSocket *socket)
{
  VmceControlClient *client = g_new0 (VmceControlClient, 1);
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonNode) greeting = NULL;

  client->ref_count = 1;
  client->control = self;
  client->sock = vmce_line_socket_new (socket, VMCE_CONTROL_MAX_LINE, vmce_control_line_cb,
                                       vmce_control_closed_cb, client);
  g_ptr_array_add (self->clients, client);

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "vmced");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "version");
  json_builder_add_string_value (b, PACKAGE_VERSION);
  json_builder_set_member_name (b, "pid");
  json_builder_add_int_value (b, getpid ());
  json_builder_end_object (b);
  json_builder_set_member_name (b, "capabilities");
  json_builder_begin_array (b);
  json_builder_add_string_value (b, "events");
  json_builder_end_array (b);
  json_builder_end_object (b);
  greeting = json_builder_get_root (b);
  vmce_control_send (client, greeting);
}

static gboolean
vmce_control_incoming_cb (GSocketService *service,
                          GSocketConnection *connection,
                          GObject *source_object,
                          gpointer user_data)
{
  VmceControl *self = user_data;
  GSocket *socket = g_socket_connection_get_socket (connection);

  if (!vmce_control_peer_allowed (socket)) {
    g_message ("control: refusing a client that is neither root nor vmced's user");
    return TRUE;
  }
  vmce_control_add_connection (self, socket);
  return TRUE;
}

/* A socket file nobody listens on is left by a vmced that died */
static gboolean
vmce_control_socket_is_live (const gchar *path)
{
  g_autoptr(GSocket) probe = g_socket_new (G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_STREAM,
                                           G_SOCKET_PROTOCOL_DEFAULT, NULL);
  g_autoptr(GSocketAddress) addr = g_unix_socket_address_new (path);

  return probe != NULL && g_socket_connect (probe, addr, NULL, NULL);
}

VmceControl *
vmce_control_new_unbound (void)
{
  VmceControl *self = g_new0 (VmceControl, 1);

  self->commands = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  self->clients = g_ptr_array_new ();
  return self;
}

VmceControl *
vmce_control_new (const gchar *path, GError **error)
{
  g_autoptr(VmceControl) self = vmce_control_new_unbound ();
  g_autoptr(GSocket) socket = NULL;
  g_autoptr(GSocketAddress) addr = g_unix_socket_address_new (path);
  g_autofree gchar *dir = g_path_get_dirname (path);
  mode_t old_umask;
  gboolean ok;

  if (g_mkdir_with_parents (dir, 0755) != 0) {
    int errsv = errno;
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv),
                 "cannot create %s: %s", dir, g_strerror (errsv));
    return NULL;
  }
  if (g_file_test (path, G_FILE_TEST_EXISTS)) {
    if (vmce_control_socket_is_live (path)) {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_ADDRESS_IN_USE,
                   "another vmced is listening on %s", path);
      return NULL;
    }
    (void) unlink (path);
  }
  socket = g_socket_new (G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_DEFAULT,
                         error);
  if (socket == NULL)
    return NULL;
  old_umask = umask (0177);
  ok = g_socket_bind (socket, addr, FALSE, error) && g_socket_listen (socket, error);
  umask (old_umask);
  if (!ok) {
    g_prefix_error (error, "cannot listen on %s: ", path);
    return NULL;
  }
  self->path = g_strdup (path);
  self->service = g_socket_service_new ();
  if (!g_socket_listener_add_socket (G_SOCKET_LISTENER (self->service), socket, NULL, error))
    return NULL;
  g_signal_connect (self->service, "incoming", G_CALLBACK (vmce_control_incoming_cb), self);
  g_socket_service_start (self->service);
  return g_steal_pointer (&self);
}

void
vmce_control_add_command (VmceControl *self,
                          const gchar *name,
                          VmceControlHandler handler,
                          gpointer user_data)
{
  VmceControlCommand *cmd = g_new0 (VmceControlCommand, 1);

  cmd->handler = handler;
  cmd->user_data = user_data;
  g_hash_table_replace (self->commands, g_strdup (name), cmd);
}

void
vmce_control_free (VmceControl *self)
{
  if (self == NULL)
    return;
  if (self->service != NULL) {
    g_socket_service_stop (self->service);
    g_socket_listener_close (G_SOCKET_LISTENER (self->service));
    g_object_unref (self->service);
  }
  while (self->clients->len > 0)
    vmce_control_client_drop (g_ptr_array_index (self->clients, 0));
  g_ptr_array_unref (self->clients);
  g_hash_table_unref (self->commands);
  if (self->path != NULL) {
    (void) unlink (self->path);
    g_free (self->path);
  }
  g_free (self);
}
