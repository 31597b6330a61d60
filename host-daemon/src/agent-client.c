/*
 * A VM's vmce guest agent, one request at a time (see agent-client.h).
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-agent"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent-client.h"
#include "json-util.h"
#include "line-socket.h"

/* an answer is one line: the agent's longest (a kernel log read) is far
 * below this; a peer that sends more without a newline is not the agent */
#define VMCE_AGENT_MAX_LINE (4 << 20)

struct _VmceAgentClient {
  gint ref_count;
  gchar *path;
  gchar *who;
  GQueue queue;     /* of GTask, waiting their turn */
  GTask *current;   /* the request on the socket, or NULL */
  VmceLineSocket *sock;
  guint timeout_id;
};

typedef struct {
  gchar *request;
  guint timeout_ms;
} VmceAgentRequest;

static void
vmce_agent_request_free (VmceAgentRequest *r)
{
  g_free (r->request);
  g_free (r);
}

static void vmce_agent_client_next (VmceAgentClient *self);

VmceAgentClient *
vmce_agent_client_new (const gchar *path, const gchar *who)
{
  VmceAgentClient *self = g_new0 (VmceAgentClient, 1);

  self->ref_count = 1;
  self->path = g_strdup (path);
  self->who = g_strdup (who);
  g_queue_init (&self->queue);
  return self;
}

VmceAgentClient *
vmce_agent_client_ref (VmceAgentClient *self)
{
  self->ref_count++;
  return self;
}

void
vmce_agent_client_unref (VmceAgentClient *self)
{
  if (self == NULL || --self->ref_count > 0)
    return;
  /* every task holds a ref: none is queued or under way by now */
  g_free (self->path);
  g_free (self->who);
  g_free (self);
}

const gchar *
vmce_agent_client_get_path (VmceAgentClient *self)
{
  return self->path;
}

/* The request under way is over: its socket and timer go, its task is
 * answered (@answer, or @error), and the next one starts */
static void
vmce_agent_client_finish (VmceAgentClient *self, JsonNode *answer, GError *error)
{
  g_autoptr(GTask) task = g_steal_pointer (&self->current);

  g_clear_pointer (&self->sock, vmce_line_socket_free);
  g_clear_handle_id (&self->timeout_id, g_source_remove);
  if (error != NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, answer, (GDestroyNotify) json_node_unref);
  vmce_agent_client_next (self);
  /* the task's ref on the client, last (it may be the last one) */
  g_clear_object (&task);
  vmce_agent_client_unref (self);
}

/* The agent's error classes (images/README.md, "Agent protocol") as
 * GIO's codes, which vmced's error.c maps to the control protocol's */
static gint
vmce_agent_error_code (const gchar *klass)
{
  if (g_strcmp0 (klass, "NotFound") == 0)
    return G_IO_ERROR_NOT_FOUND;
  if (g_strcmp0 (klass, "InvalidParameter") == 0 || g_strcmp0 (klass, "CommandNotFound") == 0)
    return G_IO_ERROR_INVALID_ARGUMENT;
  if (g_strcmp0 (klass, "NotSupported") == 0)
    return G_IO_ERROR_NOT_SUPPORTED;
  return G_IO_ERROR_FAILED;
}

/* {"return": ...} or {"error": {"class", "desc"}}, and nothing else */
static JsonNode *
vmce_agent_client_parse (VmceAgentClient *self, const gchar *line, gsize len, GError **error)
{
  g_autoptr(GError) local_error = NULL;
  g_autoptr(JsonNode) reply = vmce_json_parse_object (line, (gssize) len, "it", &local_error);
  JsonObject *obj;
  JsonNode *ret, *err;

  if (reply == NULL) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA, "%s at %s answered garbage: %s", self->who,
                 self->path, local_error->message);
    return NULL;
  }
  obj = json_node_get_object (reply);
  ret = json_object_get_member (obj, "return");
  if (ret != NULL)
    return json_node_copy (ret);
  err = json_object_get_member (obj, "error");
  if (err != NULL && JSON_NODE_HOLDS_OBJECT (err)) {
    JsonObject *e = json_node_get_object (err);
    const gchar *desc = vmce_json_object_get_string_opt (e, "desc");
    g_set_error (error, G_IO_ERROR, vmce_agent_error_code (vmce_json_object_get_string_opt (e, "class")),
                 "%s: %s", self->who, desc != NULL ? desc : "failed, and said no more");
    return NULL;
  }
  g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
               "%s at %s answered neither \"return\" nor \"error\"", self->who, self->path);
  return NULL;
}

static void
vmce_agent_client_line_cb (VmceLineSocket *sock, const gchar *line, gsize len, gint64 time_us,
                           gpointer user_data)
{
  VmceAgentClient *self = user_data;
  GError *error = NULL;
  JsonNode *answer;

  /* one answer per request: a line after it has no request */
  if (self->current == NULL || self->sock != sock)
    return;
  answer = vmce_agent_client_parse (self, line, len, &error);
  vmce_agent_client_finish (self, answer, error);
}

static void
vmce_agent_client_closed_cb (VmceLineSocket *sock, const GError *error, gpointer user_data)
{
  VmceAgentClient *self = user_data;

  vmce_agent_client_finish (self, NULL,
                            g_error_new (G_IO_ERROR, G_IO_ERROR_CONNECTION_CLOSED,
                                         "%s at %s closed the connection without answering%s%s",
                                         self->who, self->path, error != NULL ? ": " : "",
                                         error != NULL ? error->message : ""));
}

static gboolean
vmce_agent_client_timeout_cb (gpointer user_data)
{
  VmceAgentClient *self = user_data;
  VmceAgentRequest *r = g_task_get_task_data (self->current);

  self->timeout_id = 0;
  vmce_agent_client_finish (self, NULL,
                            g_error_new (G_IO_ERROR, G_IO_ERROR_TIMED_OUT,
                                         "%s at %s did not answer within %u ms (is its guest up, or "
                                         "another client connected to it?)",
                                         self->who, self->path, r->timeout_ms));
  return G_SOURCE_REMOVE;
}

/* A Unix socket connects at once or not at all, never EINPROGRESS: a
 * non-blocking connect() does not wait. EAGAIN is a full backlog: QEMU
 * has a client, and others wait for it already */
static GSocket *
vmce_agent_client_connect (VmceAgentClient *self, GError **error)
{
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  GSocket *sock;
  int fd, errsv;

  if (strlen (self->path) >= sizeof sun.sun_path) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_FILENAME,
                 "cannot reach %s at %s: longer than a socket's path can be", self->who, self->path);
    return NULL;
  }
  strcpy (sun.sun_path, self->path);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0 || connect (fd, (struct sockaddr *) &sun, sizeof sun) < 0) {
    errsv = errno;
    if (fd >= 0)
      close (fd);
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv), "cannot reach %s at %s: %s%s",
                 self->who, self->path, g_strerror (errsv),
                 errsv == EAGAIN ? " (other clients wait for it)" : "");
    return NULL;
  }
  sock = g_socket_new_from_fd (fd, error);
  if (sock == NULL)
    close (fd);
  return sock;
}

static void
vmce_agent_client_next (VmceAgentClient *self)
{
  g_autoptr(GSocket) sock = NULL;
  GError *error = NULL;
  VmceAgentRequest *r;

  if (self->current != NULL || g_queue_is_empty (&self->queue))
    return;
  self->current = g_queue_pop_head (&self->queue);
  r = g_task_get_task_data (self->current);
  g_debug ("%s: %s", self->path, r->request);
  sock = vmce_agent_client_connect (self, &error);
  if (sock == NULL) {
    vmce_agent_client_finish (self, NULL, error);
    return;
  }
  self->sock = vmce_line_socket_new (sock, VMCE_AGENT_MAX_LINE, vmce_agent_client_line_cb,
                                     vmce_agent_client_closed_cb, self);
  self->timeout_id = g_timeout_add (r->timeout_ms, vmce_agent_client_timeout_cb, self);
  vmce_line_socket_send (self->sock, r->request);
}

void
vmce_agent_client_request_async (VmceAgentClient *self,
                                 const gchar *request,
                                 guint timeout_ms,
                                 GAsyncReadyCallback callback,
                                 gpointer user_data)
{
  GTask *task = g_task_new (NULL, NULL, callback, user_data);
  VmceAgentRequest *r = g_new0 (VmceAgentRequest, 1);

  r->request = g_strdup (request);
  r->timeout_ms = MAX (timeout_ms, 1);
  g_task_set_task_data (task, r, (GDestroyNotify) vmce_agent_request_free);
  g_task_set_source_tag (task, vmce_agent_client_request_async);
  /* the client lives until its last request is answered */
  vmce_agent_client_ref (self);
  g_queue_push_tail (&self->queue, task);
  vmce_agent_client_next (self);
}

JsonNode *
vmce_agent_client_request_finish (GAsyncResult *res, GError **error)
{
  g_return_val_if_fail (g_task_is_valid (res, NULL), NULL);
  return g_task_propagate_pointer (G_TASK (res), error);
}
