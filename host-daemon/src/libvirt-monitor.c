/*
 * QMP through libvirt (see libvirt-monitor.h).
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmced-libvirt"

#include <gio/gio.h>
#include <json-glib/json-glib.h>
#include <libvirt/libvirt-qemu.h>
#include <libvirt/virterror.h>
#include <sys/socket.h>
#include <unistd.h>

#include "json-util.h"
#include "libvirt-monitor.h"
#include "line-socket.h"

struct _VmceLibvirtMonitor {
  gint ref_count;
  virConnectPtr conn;
  virDomainPtr dom;
  gchar *name;
  VmceLineSocket *sock; /* our end of the pair */
  /* one at a time, in order: QEMU's monitor serialises them anyway, and
   * VmceQmpClient expects the answers in the order it asked */
  GThreadPool *pool;
  gint event_callback;
  gboolean closed;
};

typedef struct {
  VmceLibvirtMonitor *mon;
  gchar *command; /* {"execute": ..., "arguments": ...} */
  JsonNode *id;
  gchar *reply; /* the line to send back */
} VmceMonitorJob;

static VmceLibvirtMonitor *
vmce_libvirt_monitor_ref (VmceLibvirtMonitor *self)
{
  g_atomic_int_inc (&self->ref_count);
  return self;
}

static void
vmce_libvirt_monitor_unref (VmceLibvirtMonitor *self)
{
  if (!g_atomic_int_dec_and_test (&self->ref_count))
    return;
  g_clear_pointer (&self->sock, vmce_line_socket_free);
  if (self->dom != NULL)
    virDomainFree (self->dom);
  if (self->conn != NULL)
    virConnectClose (self->conn);
  g_free (self->name);
  g_free (self);
}

static void
vmce_monitor_job_free (VmceMonitorJob *job)
{
  vmce_libvirt_monitor_unref (job->mon);
  g_free (job->command);
  if (job->id != NULL)
    json_node_unref (job->id);
  g_free (job->reply);
  g_free (job);
}

/* @member: "return" or "error" from libvirt's answer, or an error of our own */
static gchar *
vmce_monitor_answer (JsonNode *id, const gchar *member, JsonNode *value)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonNode) root = NULL;

  json_builder_begin_object (b);
  json_builder_set_member_name (b, member);
  json_builder_add_value (b, value);
  if (id != NULL) {
    json_builder_set_member_name (b, "id");
    json_builder_add_value (b, json_node_copy (id));
  }
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  return vmce_json_to_line (root);
}

static gchar *
vmce_monitor_error (JsonNode *id, const gchar *desc)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();

  json_builder_begin_object (b);
  json_builder_set_member_name (b, "class");
  json_builder_add_string_value (b, "GenericError");
  json_builder_set_member_name (b, "desc");
  json_builder_add_string_value (b, desc);
  json_builder_end_object (b);
  return vmce_monitor_answer (id, "error", json_builder_get_root (b));
}

static gboolean
vmce_monitor_send_reply_cb (gpointer user_data)
{
  VmceMonitorJob *job = user_data;

  if (!job->mon->closed && job->mon->sock != NULL)
    vmce_line_socket_send (job->mon->sock, job->reply);
  return G_SOURCE_REMOVE;
}

/* In the pool's thread: libvirt's call blocks until QEMU answers. */
static void
vmce_monitor_run_job (gpointer data, gpointer user_data)
{
  VmceMonitorJob *job = data;
  g_autofree gchar *result = NULL;
  g_autoptr(JsonParser) parser = json_parser_new ();
  JsonObject *obj;

  if (virDomainQemuMonitorCommand (job->mon->dom, job->command, &result, 0) < 0) {
    job->reply = vmce_monitor_error (job->id, virGetLastErrorMessage ());
  } else if (!json_parser_load_from_data (parser, result, -1, NULL) ||
             !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser))) {
    job->reply = vmce_monitor_error (job->id, "libvirt passed on an answer that is not JSON");
  } else {
    obj = json_node_get_object (json_parser_get_root (parser));
    if (json_object_has_member (obj, "return"))
      job->reply = vmce_monitor_answer (job->id, "return",
                                        json_node_copy (json_object_get_member (obj, "return")));
    else if (json_object_has_member (obj, "error"))
      job->reply = vmce_monitor_answer (job->id, "error",
                                        json_node_copy (json_object_get_member (obj, "error")));
    else
      job->reply = vmce_monitor_error (job->id, "QEMU's answer has neither return nor error");
  }
  g_main_context_invoke_full (NULL, G_PRIORITY_DEFAULT, vmce_monitor_send_reply_cb, job,
                              (GDestroyNotify) vmce_monitor_job_free);
}

static void
vmce_monitor_line_cb (VmceLineSocket *sock,
                      const gchar *line,
                      gsize len,
                      gint64 time_us,
                      gpointer user_data)
{
  VmceLibvirtMonitor *self = user_data;
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autoptr(JsonObject) command = NULL;
  g_autoptr(JsonNode) root = NULL;
  VmceMonitorJob *job;
  JsonObject *obj;
  JsonNode *id;
  const gchar *execute;

  if (!json_parser_load_from_data (parser, line, (gssize) len, NULL) ||
      !JSON_NODE_HOLDS_OBJECT (json_parser_get_root (parser)))
    return; /* VmceQmpClient sends nothing else */
  obj = json_node_get_object (json_parser_get_root (parser));
  id = json_object_get_member (obj, "id");
  execute = vmce_json_object_get_string_opt (obj, "execute");
  if (execute == NULL) {
    g_autofree gchar *reply = vmce_monitor_error (id, "no command");
    vmce_line_socket_send (sock, reply);
    return;
  }
  /* libvirt negotiated capabilities with QEMU long ago */
  if (g_strcmp0 (execute, "qmp_capabilities") == 0) {
    g_autofree gchar *reply = vmce_monitor_answer (id, "return", json_node_init_object (json_node_alloc (), json_object_new ()));
    vmce_line_socket_send (sock, reply);
    return;
  }
  command = json_object_new ();
  json_object_set_string_member (command, "execute", execute);
  if (json_object_has_member (obj, "arguments"))
    json_object_set_member (command, "arguments",
                            json_node_copy (json_object_get_member (obj, "arguments")));
  root = json_node_init_object (json_node_alloc (), command);
  job = g_new0 (VmceMonitorJob, 1);
  job->mon = vmce_libvirt_monitor_ref (self);
  job->command = vmce_json_to_line (root);
  job->id = id != NULL ? json_node_copy (id) : NULL;
  g_thread_pool_push (self->pool, job, NULL);
}

static void
vmce_monitor_closed_cb (VmceLineSocket *sock, const GError *error, gpointer user_data)
{
  VmceLibvirtMonitor *self = user_data;

  self->closed = TRUE;
}

/* libvirt's event loop runs on the main context: this is the main thread. */
static void
vmce_monitor_event_cb (virConnectPtr conn,
                       virDomainPtr dom,
                       const char *event,
                       long long seconds,
                       unsigned int micros,
                       const char *details,
                       void *opaque)
{
  VmceLibvirtMonitor *self = opaque;
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonNode) root = NULL;
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autofree gchar *line = NULL;

  if (self->closed || self->sock == NULL)
    return;
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "event");
  json_builder_add_string_value (b, event);
  if (details != NULL && json_parser_load_from_data (parser, details, -1, NULL)) {
    json_builder_set_member_name (b, "data");
    json_builder_add_value (b, json_node_copy (json_parser_get_root (parser)));
  }
  json_builder_set_member_name (b, "timestamp");
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "seconds");
  json_builder_add_int_value (b, seconds);
  json_builder_set_member_name (b, "microseconds");
  json_builder_add_int_value (b, micros);
  json_builder_end_object (b);
  json_builder_end_object (b);
  root = json_builder_get_root (b);
  line = vmce_json_to_line (root);
  vmce_line_socket_send (self->sock, line);
}

static void
vmce_monitor_event_free (void *opaque)
{
  vmce_libvirt_monitor_unref (opaque);
}

VmceLibvirtMonitor *
vmce_libvirt_monitor_new (virConnectPtr conn, virDomainPtr dom, GSocket **client, GError **error)
{
  g_autoptr(VmceLibvirtMonitor) self = g_new0 (VmceLibvirtMonitor, 1);
  g_autoptr(GSocket) ours = NULL;
  g_autoptr(GSocket) theirs = NULL;
  int fds[2];
  const gchar *greeting =
    "{\"QMP\": {\"version\": {\"package\": \"through libvirt\"}, \"capabilities\": []}}";

  self->ref_count = 1;
  self->event_callback = -1;
  self->name = g_strdup (virDomainGetName (dom));
  if (socketpair (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0) {
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errno), "socketpair: %s",
                 g_strerror (errno));
    return NULL;
  }
  ours = g_socket_new_from_fd (fds[0], error);
  if (ours == NULL) {
    close (fds[0]);
    close (fds[1]);
    return NULL;
  }
  theirs = g_socket_new_from_fd (fds[1], error);
  if (theirs == NULL) {
    close (fds[1]);
    return NULL;
  }
  virConnectRef (conn);
  self->conn = conn;
  virDomainRef (dom);
  self->dom = dom;
  self->pool = g_thread_pool_new (vmce_monitor_run_job, self, 1, FALSE, error);
  if (self->pool == NULL)
    return NULL;
  self->sock = vmce_line_socket_new (ours, 16 << 20, vmce_monitor_line_cb, vmce_monitor_closed_cb,
                                     self);
  self->event_callback =
    virConnectDomainQemuMonitorEventRegister (conn, dom, NULL, vmce_monitor_event_cb,
                                              vmce_libvirt_monitor_ref (self),
                                              vmce_monitor_event_free, 0);
  if (self->event_callback < 0) {
    vmce_libvirt_monitor_unref (self); /* the reference the callback would have held */
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED,
                 "domain %s: cannot receive its QEMU events through libvirt: %s", self->name,
                 virGetLastErrorMessage ());
    g_thread_pool_free (g_steal_pointer (&self->pool), TRUE, FALSE);
    return NULL;
  }
  vmce_line_socket_send (self->sock, greeting);
  *client = g_steal_pointer (&theirs);
  return g_steal_pointer (&self);
}

void
vmce_libvirt_monitor_free (VmceLibvirtMonitor *self)
{
  if (self == NULL)
    return;
  self->closed = TRUE;
  if (self->event_callback >= 0 && self->conn != NULL)
    virConnectDomainQemuMonitorEventDeregister (self->conn, self->event_callback);
  self->event_callback = -1;
  /* a command still in libvirt finishes in its thread; its answer is dropped */
  if (self->pool != NULL)
    g_thread_pool_free (g_steal_pointer (&self->pool), TRUE, FALSE);
  if (self->sock != NULL)
    vmce_line_socket_close (self->sock);
  vmce_libvirt_monitor_unref (self);
}
