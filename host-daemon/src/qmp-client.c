/*
 * A QMP client on the GLib main loop.
 *
 * The socket is non-blocking and read from a GSource, so a monitor that
 * stops answering never blocks vmced: its commands time out one by one and
 * the rest of the daemon goes on. A peer that sends something that is not
 * QMP is cut off at once with an error naming it, because nothing it says
 * afterwards can be trusted to match our requests.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-qmp"

#include <string.h>

#include "json-util.h"
#include "line-socket.h"
#include "qmp-client.h"

#define VMCE_QMP_DEFAULT_TIMEOUT_MS 10000
/* QMP lines are short; a peer sending megabytes without a newline is broken */
#define VMCE_QMP_MAX_LINE (16 * 1024 * 1024)

G_DEFINE_QUARK (vmce-qmp-error-quark, vmce_qmp_error)

typedef struct {
  gint64 id; /* 0 for the greeting */
  gchar *command;
  guint timeout_source;
  gint64 reply_time_us;
} VmceQmpCall;

struct _VmceQmpClient {
  GObject parent_instance;
  gchar *name;
  VmceLineSocket *sock;
  GQueue *calls; /* of GTask, in the order they were sent */
  GTask *greeting_task;
  guint greeting_timeout;
  JsonObject *greeting;
  gint64 next_id;
  guint timeout_ms;
  gboolean closed;
};

enum { SIGNAL_EVENT, SIGNAL_CLOSED, SIGNAL_LAST };
static guint signals[SIGNAL_LAST];

G_DEFINE_TYPE (VmceQmpClient, vmce_qmp_client, G_TYPE_OBJECT)

static void
vmce_qmp_call_free (VmceQmpCall *call)
{
  g_clear_handle_id (&call->timeout_source, g_source_remove);
  g_free (call->command);
  g_free (call);
}

static void
vmce_qmp_client_fail_task (GTask *task, const GError *error)
{
  VmceQmpCall *call = g_task_get_task_data (task);

  g_clear_handle_id (&call->timeout_source, g_source_remove);
  g_task_return_error (task, g_error_copy (error));
}

void
vmce_qmp_client_close (VmceQmpClient *self, const GError *reason)
{
  g_autoptr(GError) closed = NULL;
  g_autoptr(VmceQmpClient) keep = NULL;
  GTask *task;

  if (self->closed)
    return;
  keep = g_object_ref (self);
  self->closed = TRUE;
  if (reason == NULL) {
    closed = g_error_new (VMCE_QMP_ERROR, VMCE_QMP_ERROR_CLOSED,
                          "monitor %s: connection closed", self->name);
    reason = closed;
  }
  vmce_line_socket_close (self->sock);

  g_clear_handle_id (&self->greeting_timeout, g_source_remove);
  if (self->greeting_task != NULL) {
    GTask *greeting = g_steal_pointer (&self->greeting_task);
    g_task_return_error (greeting, g_error_copy (reason));
    g_object_unref (greeting);
  }
  while ((task = g_queue_pop_head (self->calls)) != NULL) {
    vmce_qmp_client_fail_task (task, reason);
    g_object_unref (task);
  }
  g_signal_emit (self, signals[SIGNAL_CLOSED], 0, reason);
}

static void
vmce_qmp_client_protocol_error (VmceQmpClient *self, GError *error)
{
  g_autoptr(GError) err = error;

  if (err->domain != VMCE_QMP_ERROR) {
    g_autoptr(GError) tmp = g_steal_pointer (&err);
    err = g_error_new (VMCE_QMP_ERROR, VMCE_QMP_ERROR_PROTOCOL, "%s", tmp->message);
  }
  g_prefix_error (&err, "monitor %s: ", self->name);
  vmce_qmp_client_close (self, err);
}

static GTask *
vmce_qmp_client_take_call (VmceQmpClient *self, JsonObject *msg)
{
  JsonNode *id = json_object_get_member (msg, "id");

  /* QMP answers in order; the id is a check, not a lookup key */
  if (id == NULL)
    return g_queue_pop_head (self->calls);
  for (GList *l = self->calls->head; l != NULL; l = l->next) {
    VmceQmpCall *call = g_task_get_task_data (l->data);
    if (JSON_NODE_HOLDS_VALUE (id) && json_node_get_value_type (id) == G_TYPE_INT64 &&
        json_node_get_int (id) == call->id) {
      GTask *task = l->data;
      g_queue_delete_link (self->calls, l);
      return task;
    }
  }
  return NULL;
}

static void
vmce_qmp_client_handle_reply (VmceQmpClient *self, JsonObject *msg, gint64 now)
{
  g_autoptr(GTask) task = vmce_qmp_client_take_call (self, msg);
  VmceQmpCall *call;

  if (task == NULL) {
    /* the answer to a command that already timed out */
    g_debug ("monitor %s: dropping an answer nobody waits for", self->name);
    return;
  }
  call = g_task_get_task_data (task);
  g_clear_handle_id (&call->timeout_source, g_source_remove);
  call->reply_time_us = now;

  if (json_object_has_member (msg, "error")) {
    JsonNode *err = json_object_get_member (msg, "error");
    const gchar *klass = "GenericError";
    const gchar *desc = "(no description)";
    if (JSON_NODE_HOLDS_OBJECT (err)) {
      JsonObject *eobj = json_node_get_object (err);
      klass = vmce_json_object_get_string_opt (eobj, "class") ?: klass;
      desc = vmce_json_object_get_string_opt (eobj, "desc") ?: desc;
    }
    g_task_return_new_error (task, VMCE_QMP_ERROR, VMCE_QMP_ERROR_COMMAND,
                             "monitor %s: %s: %s (%s)", self->name, call->command,
                             desc, klass);
    return;
  }
  g_task_return_pointer (task, json_node_copy (json_object_get_member (msg, "return")),
                         (GDestroyNotify) json_node_unref);
}

static void
vmce_qmp_client_handle_event (VmceQmpClient *self, JsonObject *msg)
{
  const gchar *name = vmce_json_object_get_string_opt (msg, "event");
  JsonNode *data = json_object_get_member (msg, "data");
  JsonNode *ts = json_object_get_member (msg, "timestamp");
  gint64 time_us = 0;

  if (ts != NULL && JSON_NODE_HOLDS_OBJECT (ts)) {
    JsonObject *tso = json_node_get_object (ts);
    time_us = json_object_get_int_member_with_default (tso, "seconds", 0) * G_USEC_PER_SEC +
              json_object_get_int_member_with_default (tso, "microseconds", 0);
  }
  g_signal_emit (self, signals[SIGNAL_EVENT], 0, name,
                 data != NULL && JSON_NODE_HOLDS_OBJECT (data) ? json_node_get_object (data) : NULL,
                 time_us);
}

static void
vmce_qmp_client_line_cb (VmceLineSocket *sock,
                         const gchar *line,
                         gsize len,
                         gint64 now,
                         gpointer user_data)
{
  VmceQmpClient *self = user_data;
  g_autoptr(VmceQmpClient) keep = g_object_ref (self);
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) root = NULL;
  JsonObject *msg;

  root = vmce_json_parse_object (line, len, "peer", &error);
  if (root == NULL) {
    vmce_qmp_client_protocol_error (self, g_steal_pointer (&error));
    return;
  }
  msg = json_node_get_object (root);

  if (self->greeting == NULL) {
    JsonNode *qmp = json_object_get_member (msg, "QMP");
    if (qmp == NULL || !JSON_NODE_HOLDS_OBJECT (qmp)) {
      vmce_qmp_client_protocol_error (
          self, g_error_new (VMCE_QMP_ERROR, VMCE_QMP_ERROR_PROTOCOL,
                             "expected a QMP greeting, got something else"));
      return;
    }
    self->greeting = json_object_ref (json_node_get_object (qmp));
    if (self->greeting_task != NULL) {
      g_autoptr(GTask) task = g_steal_pointer (&self->greeting_task);
      g_clear_handle_id (&self->greeting_timeout, g_source_remove);
      g_task_return_boolean (task, TRUE);
    }
    return;
  }
  if (json_object_has_member (msg, "event")) {
    vmce_qmp_client_handle_event (self, msg);
    return;
  }
  if (json_object_has_member (msg, "return") || json_object_has_member (msg, "error")) {
    vmce_qmp_client_handle_reply (self, msg, now);
    return;
  }
  vmce_qmp_client_protocol_error (
      self, g_error_new (VMCE_QMP_ERROR, VMCE_QMP_ERROR_PROTOCOL,
                         "message is neither an answer nor an event"));
}

static void
vmce_qmp_client_closed_cb (VmceLineSocket *sock, const GError *error, gpointer user_data)
{
  VmceQmpClient *self = user_data;
  g_autoptr(GError) reason = NULL;

  if (error != NULL)
    reason = g_error_new (VMCE_QMP_ERROR, VMCE_QMP_ERROR_CLOSED, "monitor %s: %s", self->name,
                          error->message);
  vmce_qmp_client_close (self, reason);
}

static gboolean
vmce_qmp_client_timeout_cb (gpointer user_data)
{
  GTask *task = user_data;
  VmceQmpClient *self = g_task_get_source_object (task);
  VmceQmpCall *call = g_task_get_task_data (task);

  call->timeout_source = 0;
  g_queue_remove (self->calls, task);
  g_task_return_new_error (task, VMCE_QMP_ERROR, VMCE_QMP_ERROR_TIMEOUT,
                           "monitor %s: no answer to %s within %u ms", self->name,
                           call->command, self->timeout_ms);
  g_object_unref (task);
  return G_SOURCE_REMOVE;
}

void
vmce_qmp_client_execute_async (VmceQmpClient *self,
                               const gchar *command,
                               JsonNode *arguments,
                               GCancellable *cancellable,
                               GAsyncReadyCallback callback,
                               gpointer user_data)
{
  g_autoptr(GTask) task = g_task_new (self, cancellable, callback, user_data);
  g_autoptr(JsonBuilder) builder = json_builder_new ();
  g_autoptr(JsonNode) msg = NULL;
  g_autofree gchar *line = NULL;
  VmceQmpCall *call = g_new0 (VmceQmpCall, 1);

  g_task_set_source_tag (task, vmce_qmp_client_execute_async);
  call->id = ++self->next_id;
  call->command = g_strdup (command);
  g_task_set_task_data (task, call, (GDestroyNotify) vmce_qmp_call_free);

  if (self->closed) {
    g_task_return_new_error (task, VMCE_QMP_ERROR, VMCE_QMP_ERROR_CLOSED,
                             "monitor %s: connection closed", self->name);
    return;
  }

  json_builder_begin_object (builder);
  json_builder_set_member_name (builder, "execute");
  json_builder_add_string_value (builder, command);
  if (arguments != NULL) {
    json_builder_set_member_name (builder, "arguments");
    json_builder_add_value (builder, json_node_copy (arguments));
  }
  json_builder_set_member_name (builder, "id");
  json_builder_add_int_value (builder, call->id);
  json_builder_end_object (builder);
  msg = json_builder_get_root (builder);
  line = vmce_json_to_line (msg);

  call->timeout_source = g_timeout_add (self->timeout_ms, vmce_qmp_client_timeout_cb, task);
  g_queue_push_tail (self->calls, g_object_ref (task));
  vmce_line_socket_send (self->sock, line);
}

JsonNode *
vmce_qmp_client_execute_finish (VmceQmpClient *self,
                                GAsyncResult *res,
                                gint64 *reply_time_us,
                                GError **error)
{
  GTask *task = G_TASK (res);
  VmceQmpCall *call = g_task_get_task_data (task);

  if (reply_time_us != NULL)
    *reply_time_us = call->reply_time_us;
  return g_task_propagate_pointer (task, error);
}

static void
vmce_qmp_client_hmp_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) ret = NULL;
  gint64 *reply_time_us = g_task_get_task_data (task);

  ret = vmce_qmp_client_execute_finish (VMCE_QMP_CLIENT (source), res, reply_time_us, &error);
  if (ret == NULL) {
    g_task_return_error (task, g_steal_pointer (&error));
    return;
  }
  if (!JSON_NODE_HOLDS_VALUE (ret) || json_node_get_value_type (ret) != G_TYPE_STRING) {
    g_task_return_new_error (task, VMCE_QMP_ERROR, VMCE_QMP_ERROR_PROTOCOL,
                             "monitor %s: human-monitor-command did not return text",
                             VMCE_QMP_CLIENT (source)->name);
    return;
  }
  g_task_return_pointer (task, g_strdup (json_node_get_string (ret)), g_free);
}

void
vmce_qmp_client_hmp_async (VmceQmpClient *self,
                           const gchar *command_line,
                           GCancellable *cancellable,
                           GAsyncReadyCallback callback,
                           gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  g_autoptr(JsonNode) args = json_node_new (JSON_NODE_OBJECT);
  g_autoptr(JsonObject) obj = json_object_new ();

  g_task_set_task_data (task, g_new0 (gint64, 1), g_free);
  json_object_set_string_member (obj, "command-line", command_line);
  json_node_set_object (args, obj);
  vmce_qmp_client_execute_async (self, "human-monitor-command", args, cancellable,
                                 vmce_qmp_client_hmp_cb, task);
}

gchar *
vmce_qmp_client_hmp_finish (VmceQmpClient *self,
                            GAsyncResult *res,
                            gint64 *reply_time_us,
                            GError **error)
{
  GTask *task = G_TASK (res);

  if (reply_time_us != NULL)
    *reply_time_us = *(gint64 *) g_task_get_task_data (task);
  return g_task_propagate_pointer (task, error);
}

static void
vmce_qmp_client_capabilities_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) ret = NULL;

  ret = vmce_qmp_client_execute_finish (VMCE_QMP_CLIENT (source), res, NULL, &error);
  if (ret == NULL) {
    g_task_return_error (task, g_steal_pointer (&error));
    return;
  }
  g_task_return_boolean (task, TRUE);
}

static void
vmce_qmp_client_greeting_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  g_autoptr(GError) error = NULL;
  VmceQmpClient *self = VMCE_QMP_CLIENT (source);

  GCancellable *cancellable = g_task_get_cancellable (task);

  if (!g_task_propagate_boolean (G_TASK (res), &error)) {
    g_task_return_error (task, g_steal_pointer (&error));
    return;
  }
  vmce_qmp_client_execute_async (self, "qmp_capabilities", NULL, cancellable,
                                 vmce_qmp_client_capabilities_cb, g_steal_pointer (&task));
}

static gboolean
vmce_qmp_client_greeting_timeout_cb (gpointer user_data)
{
  VmceQmpClient *self = user_data;
  g_autoptr(GError) error = NULL;

  self->greeting_timeout = 0;
  error = g_error_new (VMCE_QMP_ERROR, VMCE_QMP_ERROR_TIMEOUT,
                       "monitor %s: no QMP greeting within %u ms (is another client "
                       "connected to this monitor?)",
                       self->name, self->timeout_ms);
  vmce_qmp_client_close (self, error);
  return G_SOURCE_REMOVE;
}

void
vmce_qmp_client_handshake_async (VmceQmpClient *self,
                                 GCancellable *cancellable,
                                 GAsyncReadyCallback callback,
                                 gpointer user_data)
{
  GTask *task = g_task_new (self, cancellable, callback, user_data);
  GTask *greeting = g_task_new (self, cancellable, vmce_qmp_client_greeting_cb, task);

  g_task_set_source_tag (task, vmce_qmp_client_handshake_async);
  if (self->closed) {
    g_task_return_new_error (greeting, VMCE_QMP_ERROR, VMCE_QMP_ERROR_CLOSED,
                             "monitor %s: connection closed", self->name);
    g_object_unref (greeting);
    return;
  }
  if (self->greeting != NULL) {
    g_task_return_boolean (greeting, TRUE);
    g_object_unref (greeting);
    return;
  }
  self->greeting_task = greeting;
  self->greeting_timeout = g_timeout_add (self->timeout_ms, vmce_qmp_client_greeting_timeout_cb,
                                          self);
}

gboolean
vmce_qmp_client_handshake_finish (VmceQmpClient *self, GAsyncResult *res, GError **error)
{
  return g_task_propagate_boolean (G_TASK (res), error);
}

void
vmce_qmp_client_set_timeout (VmceQmpClient *self, guint timeout_ms)
{
  self->timeout_ms = timeout_ms;
}

gboolean
vmce_qmp_client_has_input (VmceQmpClient *self)
{
  GSocket *socket = self->sock != NULL ? vmce_line_socket_get_socket (self->sock) : NULL;

  return socket != NULL && !self->closed &&
         (g_socket_condition_check (socket, G_IO_IN) & G_IO_IN) != 0;
}

gboolean
vmce_qmp_client_is_open (VmceQmpClient *self)
{
  return !self->closed;
}

JsonObject *
vmce_qmp_client_get_greeting (VmceQmpClient *self)
{
  return self->greeting;
}

VmceQmpClient *
vmce_qmp_client_new (GSocket *socket, const gchar *name)
{
  VmceQmpClient *self = g_object_new (VMCE_TYPE_QMP_CLIENT, NULL);

  self->name = g_strdup (name);
  self->sock = vmce_line_socket_new (socket, VMCE_QMP_MAX_LINE, vmce_qmp_client_line_cb,
                                     vmce_qmp_client_closed_cb, self);
  return self;
}

VmceQmpClient *
vmce_qmp_client_connect (const gchar *path, GError **error)
{
  g_autoptr(GSocket) socket = NULL;
  g_autoptr(GSocketAddress) addr = g_unix_socket_address_new (path);

  socket = g_socket_new (G_SOCKET_FAMILY_UNIX, G_SOCKET_TYPE_STREAM,
                         G_SOCKET_PROTOCOL_DEFAULT, error);
  if (socket == NULL)
    return NULL;
  /* connecting to a local socket does not wait for the peer's main loop */
  if (!g_socket_connect (socket, addr, NULL, error)) {
    g_prefix_error (error, "cannot connect to monitor %s: ", path);
    return NULL;
  }
  return vmce_qmp_client_new (socket, path);
}

static void
vmce_qmp_client_dispose (GObject *object)
{
  VmceQmpClient *self = VMCE_QMP_CLIENT (object);

  if (!self->closed && self->sock != NULL) {
    /* nobody may be listening any more: fail quietly */
    g_signal_handlers_destroy (self);
    vmce_qmp_client_close (self, NULL);
  }
  G_OBJECT_CLASS (vmce_qmp_client_parent_class)->dispose (object);
}

static void
vmce_qmp_client_finalize (GObject *object)
{
  VmceQmpClient *self = VMCE_QMP_CLIENT (object);

  g_clear_pointer (&self->sock, vmce_line_socket_free);
  g_queue_free (self->calls);
  g_clear_pointer (&self->greeting, json_object_unref);
  g_free (self->name);
  G_OBJECT_CLASS (vmce_qmp_client_parent_class)->finalize (object);
}

static void
vmce_qmp_client_init (VmceQmpClient *self)
{
  self->calls = g_queue_new ();
  self->timeout_ms = VMCE_QMP_DEFAULT_TIMEOUT_MS;
}

static void
vmce_qmp_client_class_init (VmceQmpClientClass *klass)
{
  GObjectClass *object_class = G_OBJECT_CLASS (klass);

  object_class->dispose = vmce_qmp_client_dispose;
  object_class->finalize = vmce_qmp_client_finalize;

  /* (name, data or NULL, QEMU's timestamp in microseconds) */
  signals[SIGNAL_EVENT] = g_signal_new ("event", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                        0, NULL, NULL, NULL, G_TYPE_NONE, 3, G_TYPE_STRING,
                                        JSON_TYPE_OBJECT, G_TYPE_INT64);
  /* (GError reason) */
  signals[SIGNAL_CLOSED] = g_signal_new ("closed", G_TYPE_FROM_CLASS (klass), G_SIGNAL_RUN_LAST,
                                         0, NULL, NULL, NULL, G_TYPE_NONE, 1, G_TYPE_ERROR);
}
