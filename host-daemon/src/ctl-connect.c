/*
 * How vmcectl reaches a vmced (see ctl-connect.h).
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmcectl-connect"

#include <gio/gunixinputstream.h>
#include <gio/gunixoutputstream.h>
#include <gio/gunixsocketaddress.h>
#include <string.h>
#include <unistd.h>

#include "ctl-connect.h"
#include "json-util.h"

/* what the remote vmcectl's own error lines start with */
#define VMCE_CTL_ERROR_PREFIX "vmcectl: error: "

struct _VmceCtlConn {
  GIOStream *stream;
  GDataInputStream *in;
  GOutputStream *out;
  GSubprocess *ssh; /* NULL for a local socket */
  gchar *label;
  JsonObject *vmced;
  GQueue events; /* of JsonNode: events read while waiting for a reply */
  gint64 next_id;
};

static const gchar *const vmce_ctl_ssh_params[] = { "socket", "keyfile", "no_verify", "vmcectl", NULL };

static GUri *
vmce_ctl_parse_ssh (const gchar *target, GHashTable **params, GError **error)
{
  g_autoptr(GUri) uri = g_uri_parse (target, G_URI_FLAGS_NONE, error);
  g_autoptr(GHashTable) p = NULL;
  const gchar *path;
  GHashTableIter iter;
  gpointer key;

  if (uri == NULL) {
    g_prefix_error (error, "%s: ", target);
    return NULL;
  }
  if (g_strcmp0 (g_uri_get_scheme (uri), "ssh") != 0) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                 "%s: not a vmced to reach (a socket path, or ssh://[user@]host[:port][?socket=PATH])",
                 target);
    return NULL;
  }
  if (g_uri_get_host (uri) == NULL || g_uri_get_host (uri)[0] == '\0') {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT, "%s: names no host", target);
    return NULL;
  }
  path = g_uri_get_path (uri);
  if (path[0] != '\0' && g_strcmp0 (path, "/") != 0) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                 "%s: a path means nothing here (the socket is ?socket=PATH)", target);
    return NULL;
  }
  if (g_uri_get_query (uri) != NULL) {
    p = g_uri_parse_params (g_uri_get_query (uri), -1, "&", G_URI_PARAMS_NONE, error);
    if (p == NULL) {
      g_prefix_error (error, "%s: ", target);
      return NULL;
    }
    g_hash_table_iter_init (&iter, p);
    while (g_hash_table_iter_next (&iter, &key, NULL)) {
      if (!g_strv_contains (vmce_ctl_ssh_params, key)) {
        g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_ARGUMENT,
                     "%s: unknown parameter %s (known: socket, keyfile, no_verify, vmcectl)", target,
                     (const gchar *) key);
        return NULL;
      }
    }
  } else {
    p = g_hash_table_new (g_str_hash, g_str_equal);
  }
  *params = g_steal_pointer (&p);
  return g_steal_pointer (&uri);
}

gchar **
vmce_ctl_ssh_argv (const gchar *target, const gchar *ssh, GError **error)
{
  g_autoptr(GHashTable) params = NULL;
  g_autoptr(GUri) uri = vmce_ctl_parse_ssh (target, &params, error);
  g_autoptr(GStrvBuilder) b = g_strv_builder_new ();
  g_auto(GStrv) ssh_argv = NULL;
  g_autofree gchar *port = NULL;
  g_autoptr(GString) remote = NULL;
  const gchar *socket, *keyfile, *no_verify, *vmcectl;

  if (uri == NULL)
    return NULL;
  if (!g_shell_parse_argv (ssh != NULL && ssh[0] != '\0' ? ssh : "ssh", NULL, &ssh_argv, error)) {
    g_prefix_error (error, "$VMCE_SSH: ");
    return NULL;
  }
  g_strv_builder_addv (b, (const gchar **) ssh_argv);
  /* no password prompt to hang on, no tty, and an unreachable host fails
   * in seconds rather than at TCP's timeout */
  g_strv_builder_add_many (b, "-T", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", NULL);
  if (g_uri_get_port (uri) > 0) {
    port = g_strdup_printf ("%d", g_uri_get_port (uri));
    g_strv_builder_add_many (b, "-p", port, NULL);
  }
  if (g_uri_get_user (uri) != NULL)
    g_strv_builder_add_many (b, "-l", g_uri_get_user (uri), NULL);
  keyfile = g_hash_table_lookup (params, "keyfile");
  if (keyfile != NULL)
    g_strv_builder_add_many (b, "-i", keyfile, "-o", "IdentitiesOnly=yes", NULL);
  no_verify = g_hash_table_lookup (params, "no_verify");
  if (no_verify != NULL && g_strcmp0 (no_verify, "0") != 0)
    g_strv_builder_add_many (b, "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                             "-o", "LogLevel=ERROR", NULL);
  g_strv_builder_add_many (b, "--", g_uri_get_host (uri), NULL);
  /* ssh hands the remote side one command line, for its shell to split */
  vmcectl = g_hash_table_lookup (params, "vmcectl");
  remote = g_string_new (NULL);
  {
    g_autofree gchar *q = g_shell_quote (vmcectl != NULL ? vmcectl : "vmcectl");
    g_string_append_printf (remote, "%s --stdio-bridge", q);
  }
  socket = g_hash_table_lookup (params, "socket");
  if (socket != NULL) {
    g_autofree gchar *q = g_shell_quote (socket);
    g_string_append_printf (remote, " --socket %s", q);
  }
  g_strv_builder_add (b, remote->str);
  return g_strv_builder_end (b);
}

gchar *
vmce_ctl_target_label (const gchar *target)
{
  g_autoptr(GUri) uri = NULL;

  if (!g_str_has_prefix (target, "ssh:"))
    return g_strdup ("local");
  uri = g_uri_parse (target, G_URI_FLAGS_NONE, NULL);
  if (uri == NULL || g_uri_get_host (uri) == NULL)
    return g_strdup (target);
  if (g_uri_get_port (uri) > 0)
    return g_strdup_printf ("%s:%d", g_uri_get_host (uri), g_uri_get_port (uri));
  return g_strdup (g_uri_get_host (uri));
}

static JsonNode *
vmce_ctl_conn_read_message (VmceCtlConn *self, GError **error)
{
  g_autofree gchar *line = NULL;
  gsize len = 0;

  line = g_data_input_stream_read_line (self->in, &len, NULL, error);
  if (line == NULL) {
    if (error != NULL && *error == NULL)
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_CLOSED, "vmced closed the connection");
    return NULL;
  }
  return vmce_json_parse_object (line, (gssize) len, "vmced", error);
}

/* ssh, or the vmcectl at the other end, said why in its last line */
static gchar *
vmce_ctl_ssh_why (GSubprocess *ssh)
{
  GInputStream *err = g_subprocess_get_stderr_pipe (ssh);
  g_autoptr(GString) text = g_string_new (NULL);
  g_auto(GStrv) lines = NULL;
  gchar buf[4096];
  gssize n;
  const gchar *last = NULL;

  /* its stdout has ended: it is exiting, and will not keep stderr open */
  while (text->len < 65536 && (n = g_input_stream_read (err, buf, sizeof buf, NULL, NULL)) > 0)
    g_string_append_len (text, buf, n);
  (void) g_subprocess_wait (ssh, NULL, NULL);
  lines = g_strsplit (text->str, "\n", -1);
  for (guint i = 0; lines[i] != NULL; i++) {
    g_strstrip (lines[i]);
    if (lines[i][0] != '\0')
      last = lines[i];
  }
  if (last == NULL) {
    if (g_subprocess_get_if_exited (ssh))
      return g_strdup_printf ("ssh exited with %d and said nothing", g_subprocess_get_exit_status (ssh));
    return g_strdup ("ssh was killed");
  }
  if (g_str_has_prefix (last, VMCE_CTL_ERROR_PREFIX))
    last += strlen (VMCE_CTL_ERROR_PREFIX);
  return g_strdup (last);
}

VmceCtlConn *
vmce_ctl_conn_new_for_stream (GIOStream *stream, const gchar *label, GSubprocess *ssh, GError **error)
{
  g_autoptr(VmceCtlConn) self = g_new0 (VmceCtlConn, 1);
  g_autoptr(GError) local_error = NULL;
  g_autoptr(JsonNode) greeting = NULL;
  JsonNode *vmced;
  const gchar *version;

  self->stream = g_object_ref (stream);
  self->in = g_data_input_stream_new (g_io_stream_get_input_stream (stream));
  self->out = g_io_stream_get_output_stream (stream);
  self->ssh = ssh != NULL ? g_object_ref (ssh) : NULL;
  self->label = g_strdup (label);
  g_queue_init (&self->events);

  greeting = vmce_ctl_conn_read_message (self, &local_error);
  if (greeting == NULL && ssh != NULL) {
    g_autofree gchar *why = vmce_ctl_ssh_why (ssh);
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_CONNECTION_REFUSED, "%s: cannot reach vmced over ssh: %s",
                 label, why);
    return NULL;
  }
  if (greeting == NULL) {
    g_propagate_prefixed_error (error, g_steal_pointer (&local_error), "%s: ", label);
    return NULL;
  }
  vmced = json_object_get_member (json_node_get_object (greeting), "vmced");
  if (vmced == NULL || !JSON_NODE_HOLDS_OBJECT (vmced)) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "%s: what answers is not vmced", label);
    return NULL;
  }
  self->vmced = json_object_ref (json_node_get_object (vmced));
  /* the control protocol is versioned with vmce: a command of this
   * vmcectl may mean something else to another vmced, or nothing */
  version = vmce_json_object_get_string_opt (self->vmced, "version");
  if (g_strcmp0 (version, PACKAGE_VERSION) != 0) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                 "%s: vmced there is version %s, this vmcectl is %s: install the same vmce on both",
                 label, version != NULL ? version : "(none given)", PACKAGE_VERSION);
    return NULL;
  }
  return g_steal_pointer (&self);
}

static VmceCtlConn *
vmce_ctl_conn_open_socket (const gchar *path, GError **error)
{
  g_autoptr(GSocketClient) client = g_socket_client_new ();
  g_autoptr(GSocketAddress) addr = g_unix_socket_address_new (path);
  g_autoptr(GSocketConnection) conn = g_socket_client_connect (client, G_SOCKET_CONNECTABLE (addr), NULL, error);
  g_autoptr(GError) local_error = NULL;
  VmceCtlConn *self;

  if (conn == NULL) {
    g_prefix_error (error, "cannot reach vmced at %s (is it running?): ", path);
    return NULL;
  }
  self = vmce_ctl_conn_new_for_stream (G_IO_STREAM (conn), "local", NULL, &local_error);
  if (self == NULL) {
    if (g_error_matches (local_error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA))
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "%s is not vmced's socket", path);
    else
      g_propagate_error (error, g_steal_pointer (&local_error));
  }
  return self;
}

static VmceCtlConn *
vmce_ctl_conn_open_ssh (const gchar *target, GError **error)
{
  g_autofree gchar *label = vmce_ctl_target_label (target);
  g_auto(GStrv) argv = vmce_ctl_ssh_argv (target, g_getenv ("VMCE_SSH"), error);
  g_autoptr(GSubprocess) ssh = NULL;
  g_autoptr(GIOStream) stream = NULL;

  if (argv == NULL)
    return NULL;
  ssh = g_subprocess_newv ((const gchar *const *) argv,
                           G_SUBPROCESS_FLAGS_STDIN_PIPE | G_SUBPROCESS_FLAGS_STDOUT_PIPE |
                             G_SUBPROCESS_FLAGS_STDERR_PIPE,
                           error);
  if (ssh == NULL) {
    g_prefix_error (error, "%s: cannot run ssh: ", label);
    return NULL;
  }
  stream = g_simple_io_stream_new (g_subprocess_get_stdout_pipe (ssh), g_subprocess_get_stdin_pipe (ssh));
  return vmce_ctl_conn_new_for_stream (stream, label, ssh, error);
}

VmceCtlConn *
vmce_ctl_conn_open (const gchar *target, GError **error)
{
  if (target == NULL)
    target = VMCE_CTL_DEFAULT_SOCKET;
  if (strstr (target, "://") != NULL)
    return vmce_ctl_conn_open_ssh (target, error);
  return vmce_ctl_conn_open_socket (g_str_has_prefix (target, "unix:") ? target + strlen ("unix:") : target,
                                    error);
}

void
vmce_ctl_conn_free (VmceCtlConn *self)
{
  if (self == NULL)
    return;
  g_queue_clear_full (&self->events, (GDestroyNotify) json_node_unref);
  /* closing our end ends the bridge, and with it ssh */
  if (self->stream != NULL)
    (void) g_io_stream_close (self->stream, NULL, NULL);
  if (self->ssh != NULL)
    (void) g_subprocess_wait (self->ssh, NULL, NULL);
  g_clear_object (&self->in);
  g_clear_object (&self->stream);
  g_clear_object (&self->ssh);
  g_clear_pointer (&self->vmced, json_object_unref);
  g_free (self->label);
  g_free (self);
}

const gchar *
vmce_ctl_conn_get_label (VmceCtlConn *self)
{
  return self->label;
}

gboolean
vmce_ctl_conn_is_remote (VmceCtlConn *self)
{
  return self->ssh != NULL;
}

JsonObject *
vmce_ctl_conn_get_vmced (VmceCtlConn *self)
{
  return self->vmced;
}

/* The "data" of an event message, or NULL for anything else */
static JsonNode *
vmce_ctl_event_data (JsonNode *msg)
{
  JsonObject *obj = json_node_get_object (msg);
  JsonNode *data;

  if (!json_object_has_member (obj, "event"))
    return NULL;
  data = json_object_get_member (obj, "data");
  return data != NULL && JSON_NODE_HOLDS_OBJECT (data) ? json_node_ref (data) : NULL;
}

/* A connection that ends over ssh says why: the host went, or vmced did */
static void
vmce_ctl_conn_name_error (VmceCtlConn *self, GError **error)
{
  if (error == NULL || *error == NULL)
    return;
  g_prefix_error (error, "%s: ", self->label);
}

JsonNode *
vmce_ctl_conn_call (VmceCtlConn *self, const gchar *command, JsonObject *args, GError **error)
{
  g_autoptr(JsonObject) msg = json_object_new ();
  g_autoptr(JsonNode) node = json_node_new (JSON_NODE_OBJECT);
  g_autofree gchar *json = NULL;
  g_autofree gchar *line = NULL;

  json_object_set_string_member (msg, "execute", command);
  if (args != NULL)
    json_object_set_object_member (msg, "arguments", json_object_ref (args));
  json_object_set_int_member (msg, "id", ++self->next_id);
  json_node_set_object (node, msg);
  json = vmce_json_to_line (node);
  line = g_strconcat (json, "\n", NULL);
  if (!g_output_stream_write_all (self->out, line, strlen (line), NULL, NULL, error) ||
      !g_output_stream_flush (self->out, NULL, error)) {
    vmce_ctl_conn_name_error (self, error);
    return NULL;
  }
  for (;;) {
    g_autoptr(JsonNode) reply = vmce_ctl_conn_read_message (self, error);
    JsonObject *obj;
    JsonNode *err, *data;

    if (reply == NULL) {
      vmce_ctl_conn_name_error (self, error);
      return NULL;
    }
    data = vmce_ctl_event_data (reply);
    if (data != NULL) {
      g_queue_push_tail (&self->events, data);
      continue;
    }
    obj = json_node_get_object (reply);
    err = json_object_get_member (obj, "error");
    if (err != NULL && JSON_NODE_HOLDS_OBJECT (err)) {
      const gchar *desc = vmce_json_object_get_string_opt (json_node_get_object (err), "desc");
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "%s%s%s%s", self->ssh != NULL ? "on " : "",
                   self->ssh != NULL ? self->label : "", self->ssh != NULL ? ": " : "",
                   desc != NULL ? desc : "failed");
      return NULL;
    }
    if (json_object_has_member (obj, "return"))
      return json_node_copy (json_object_get_member (obj, "return"));
  }
}

JsonNode *
vmce_ctl_conn_read_event (VmceCtlConn *self, GError **error)
{
  if (!g_queue_is_empty (&self->events))
    return g_queue_pop_head (&self->events);
  for (;;) {
    g_autoptr(JsonNode) msg = vmce_ctl_conn_read_message (self, error);
    JsonNode *data;

    if (msg == NULL) {
      vmce_ctl_conn_name_error (self, error);
      return NULL;
    }
    data = vmce_ctl_event_data (msg);
    if (data != NULL)
      return data;
  }
}

static void vmce_ctl_conn_read_line_cb (GObject *source, GAsyncResult *res, gpointer user_data);

static void
vmce_ctl_conn_read_next (GTask *task)
{
  VmceCtlConn *self = g_task_get_task_data (task);

  g_data_input_stream_read_line_async (self->in, G_PRIORITY_DEFAULT, g_task_get_cancellable (task),
                                       vmce_ctl_conn_read_line_cb, task);
}

static void
vmce_ctl_conn_read_line_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autoptr(GTask) task = user_data;
  VmceCtlConn *self = g_task_get_task_data (task);
  g_autoptr(GError) error = NULL;
  g_autofree gchar *line = NULL;
  g_autoptr(JsonNode) msg = NULL;
  JsonNode *data;
  gsize len = 0;

  line = g_data_input_stream_read_line_finish (G_DATA_INPUT_STREAM (source), res, &len, &error);
  if (line == NULL) {
    if (error == NULL)
      g_set_error (&error, G_IO_ERROR, G_IO_ERROR_CLOSED, "vmced closed the connection");
    vmce_ctl_conn_name_error (self, &error);
    g_task_return_error (task, g_steal_pointer (&error));
    return;
  }
  msg = vmce_json_parse_object (line, (gssize) len, "vmced", &error);
  if (msg == NULL) {
    vmce_ctl_conn_name_error (self, &error);
    g_task_return_error (task, g_steal_pointer (&error));
    return;
  }
  data = vmce_ctl_event_data (msg);
  if (data == NULL) {
    vmce_ctl_conn_read_next (g_steal_pointer (&task));
    return;
  }
  g_task_return_pointer (task, data, (GDestroyNotify) json_node_unref);
}

void
vmce_ctl_conn_read_event_async (VmceCtlConn *self,
                                GCancellable *cancellable,
                                GAsyncReadyCallback callback,
                                gpointer user_data)
{
  GTask *task = g_task_new (NULL, cancellable, callback, user_data);

  g_task_set_task_data (task, self, NULL);
  if (!g_queue_is_empty (&self->events)) {
    g_task_return_pointer (task, g_queue_pop_head (&self->events), (GDestroyNotify) json_node_unref);
    g_object_unref (task);
    return;
  }
  vmce_ctl_conn_read_next (task);
}

JsonNode *
vmce_ctl_conn_read_event_finish (VmceCtlConn *self, GAsyncResult *res, GError **error)
{
  return g_task_propagate_pointer (G_TASK (res), error);
}

/* --- the remote end -------------------------------------------------------- */

typedef struct {
  GCancellable *cancellable;
  guint done;
  GError *error;
} VmceBridge;

static void
vmce_ctl_bridge_done_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  VmceBridge *bridge = user_data;
  g_autoptr(GError) error = NULL;

  if (g_output_stream_splice_finish (G_OUTPUT_STREAM (source), res, &error) < 0 && bridge->error == NULL &&
      !g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
    bridge->error = g_steal_pointer (&error);
  /* either side closing ends the session */
  bridge->done++;
  g_cancellable_cancel (bridge->cancellable);
}

gboolean
vmce_ctl_bridge_stdio (const gchar *socket_path, GError **error)
{
  g_autoptr(GSocketClient) client = g_socket_client_new ();
  g_autoptr(GSocketAddress) addr = NULL;
  g_autoptr(GSocketConnection) conn = NULL;
  g_autoptr(GInputStream) in = g_unix_input_stream_new (STDIN_FILENO, FALSE);
  g_autoptr(GOutputStream) out = g_unix_output_stream_new (STDOUT_FILENO, FALSE);
  g_autoptr(GCancellable) cancellable = g_cancellable_new ();
  VmceBridge bridge = { cancellable, 0, NULL };

  if (socket_path == NULL)
    socket_path = VMCE_CTL_DEFAULT_SOCKET;
  addr = g_unix_socket_address_new (socket_path);
  conn = g_socket_client_connect (client, G_SOCKET_CONNECTABLE (addr), NULL, error);
  if (conn == NULL) {
    g_prefix_error (error, "cannot reach vmced at %s (is it running?): ", socket_path);
    return FALSE;
  }
  g_output_stream_splice_async (g_io_stream_get_output_stream (G_IO_STREAM (conn)), in,
                                G_OUTPUT_STREAM_SPLICE_CLOSE_TARGET, G_PRIORITY_DEFAULT, cancellable,
                                vmce_ctl_bridge_done_cb, &bridge);
  g_output_stream_splice_async (out, g_io_stream_get_input_stream (G_IO_STREAM (conn)),
                                G_OUTPUT_STREAM_SPLICE_NONE, G_PRIORITY_DEFAULT, cancellable,
                                vmce_ctl_bridge_done_cb, &bridge);
  /* the other splice ends CANCELLED once one has ended: wait for both
   * before the streams go */
  while (bridge.done < 2)
    g_main_context_iteration (NULL, TRUE);
  if (bridge.error != NULL) {
    g_propagate_prefixed_error (error, bridge.error, "bridging %s: ", socket_path);
    return FALSE;
  }
  return TRUE;
}
