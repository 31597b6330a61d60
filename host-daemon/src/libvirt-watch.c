/*
 * vmced's libvirt mode (see libvirt-watch.h).
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmced-libvirt"

#include <json-glib/json-glib.h>
#include <libvirt-glib/libvirt-glib.h>
#include <libvirt/libvirt-qemu.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>
#include <libxml/parser.h>
#include <libxml/xpath.h>

#include "error.h"
#include "libvirt-carry.h"
#include "libvirt-monitor.h"
#include "libvirt-watch.h"
#include "log-writer.h"
#include "proc-info.h"

#define VMCE_AGENT_PORT "org.vmce.agent.1"
#define VMCE_RECONNECT_SECONDS 1
/* a host without libvirt (yet): rarely enough to cost nothing idle, often
 * enough that a libvirtd installed later is followed within seconds */
#define VMCE_WAIT_SECONDS 10
/* a domain libvirt cannot yet answer for (its reconnect to QEMU after a
 * libvirtd restart holds the domain's job; a loaded host, where a domain
 * starting beside others keeps its job for long) is asked again after 1,
 * 2, 4, 8 and 16 s, past libvirt's own 30 s job wait; then every 30 s for
 * as long as it runs, said once: a running domain is never given up */
#define VMCE_PROBE_TRIES 6
#define VMCE_PROBE_EVERY_SECONDS 30

struct _VmceLibvirtWatch {
  VmceDaemon *daemon;
  gchar *uri;
  gchar **domains; /* NULL: all */
  VmcePolicy policy;
  const VmceConfig *config; /* per-domain policies, or NULL */
  virConnectPtr conn;
  gint lifecycle_callback;
  gint device_added_callback;
  gint device_removed_callback;
  guint reconnect_source;
  gboolean ever_connected; /* FALSE: waiting for a libvirt never reached */
  GHashTable *attaching; /* names being attached */
  /* cancelled when the watch goes: attaches still in flight then let
   * their domain be and touch nothing of it */
  GCancellable *cancellable;
  gboolean closing;
  VmceLibvirtCarry *carry; /* the domains' poisoned pages in their metadata */
};

static gboolean vmce_libvirt_watch_connect (VmceLibvirtWatch *self, GError **error);

static void
vmce_domain_info_free (VmceDomainInfo *info)
{
  g_free (info->name);
  g_free (info->uuid);
  g_free (info->agent_path);
  g_free (info);
}
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VmceDomainInfo, vmce_domain_info_free)

static gboolean
vmce_libvirt_watch_wants (VmceLibvirtWatch *self, const gchar *name)
{
  return self->domains == NULL || g_strv_contains ((const gchar *const *) self->domains, name);
}

/* QEMU's pid: libvirt has no API for it, but every vCPU thread's Tgid is it */
static pid_t
vmce_domain_qemu_pid (virDomainPtr dom, GError **error)
{
  g_autofree gchar *result = NULL;
  g_autoptr(JsonParser) parser = json_parser_new ();
  JsonNode *ret;
  JsonArray *cpus;
  gint64 tid;
  gint64 tgid = 0;

  if (virDomainQemuMonitorCommand (dom, "{\"execute\":\"query-cpus-fast\"}", &result, 0) < 0) {
    /* not QEMU (libvirt's test driver, say), or a domain no longer
     * running: asking again cannot help */
    int code = virGetLastErrorCode ();
    g_autofree gchar *why = g_strdup (virGetLastErrorMessage ());
    gboolean never = code == VIR_ERR_NO_SUPPORT || code == VIR_ERR_ARGUMENT_UNSUPPORTED ||
                     code == VIR_ERR_NO_DOMAIN || virDomainIsActive (dom) == 0;
    g_set_error (error, G_IO_ERROR, never ? G_IO_ERROR_NOT_SUPPORTED : G_IO_ERROR_FAILED,
                 "query-cpus-fast through libvirt: %s", why);
    return 0;
  }
  if (!json_parser_load_from_data (parser, result, -1, error))
    return 0;
  ret = json_object_get_member (json_node_get_object (json_parser_get_root (parser)), "return");
  if (ret == NULL || !JSON_NODE_HOLDS_ARRAY (ret) ||
      json_array_get_length (cpus = json_node_get_array (ret)) == 0) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "query-cpus-fast gave no vCPU");
    return 0;
  }
  tid = json_object_get_int_member_with_default (json_array_get_object_element (cpus, 0),
                                                 "thread-id", 0);
  if (tid <= 0 || !vmce_proc_status_number ((pid_t) tid, "Tgid", &tgid, error)) {
    if (tid <= 0)
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "query-cpus-fast gave no thread-id");
    g_prefix_error (error, "finding QEMU from its vCPU thread: ");
    return 0;
  }
  return (pid_t) tgid;
}

/* The host end of the guest's vmce agent port, if the domain has one */
static gchar *
vmce_domain_agent_path (virDomainPtr dom)
{
  g_autofree gchar *xml = virDomainGetXMLDesc (dom, 0);
  xmlDocPtr doc;
  xmlXPathContextPtr ctx;
  xmlXPathObjectPtr obj;
  gchar *path = NULL;

  if (xml == NULL)
    return NULL;
  doc = xmlReadMemory (xml, (int) strlen (xml), "domain.xml", NULL, XML_PARSE_NONET);
  if (doc == NULL)
    return NULL;
  ctx = xmlXPathNewContext (doc);
  obj = xmlXPathEvalExpression (
    (const xmlChar *) "string(/domain/devices/channel[target/@name='" VMCE_AGENT_PORT
                      "']/source/@path)",
    ctx);
  if (obj != NULL && obj->stringval != NULL && obj->stringval[0] != '\0')
    path = g_strdup ((const gchar *) obj->stringval);
  xmlXPathFreeObject (obj);
  xmlXPathFreeContext (ctx);
  xmlFreeDoc (doc);
  return path;
}

/* In a worker thread: the monitor round trip must not hold the main loop,
 * where ptrace stops of other VMs are served. */
static void
vmce_domain_probe_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  virDomainPtr dom = data;
  g_autoptr(VmceDomainInfo) info = g_new0 (VmceDomainInfo, 1);
  g_autoptr(GError) error = NULL;
  gchar uuid[VIR_UUID_STRING_BUFLEN];

  info->name = g_strdup (virDomainGetName (dom));
  if (virDomainGetUUIDString (dom, uuid) == 0)
    info->uuid = g_strdup (uuid);
  info->pid = vmce_domain_qemu_pid (dom, &error);
  if (info->pid <= 0) {
    g_task_return_error (task, g_steal_pointer (&error));
    return;
  }
  info->agent_path = vmce_domain_agent_path (dom);
  g_task_return_pointer (task, g_steal_pointer (&info), (GDestroyNotify) vmce_domain_info_free);
}

static void
vmce_domain_unref (gpointer dom)
{
  virDomainFree (dom);
}

typedef struct {
  VmceLibvirtWatch *watch; /* only while cancellable is not cancelled */
  VmceDaemon *daemon;
  GHashTable *attaching;
  GCancellable *cancellable;
  virDomainPtr dom;
  gchar *name;
  guint tries;
  guint retry_source;
} VmceDomainAttach;

static void vmce_domain_probed_cb (GObject *source, GAsyncResult *res, gpointer user_data);

static void
vmce_domain_attach_free (VmceDomainAttach *att)
{
  if (att->retry_source != 0)
    g_source_remove (att->retry_source);
  g_hash_table_remove (att->attaching, att->name);
  g_hash_table_unref (att->attaching);
  g_object_unref (att->cancellable);
  virDomainFree (att->dom);
  g_free (att->name);
  g_free (att);
}

static void
vmce_domain_attached_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  VmceDomainAttach *att = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(VmceVm) vm = vmce_daemon_attach_finish (att->daemon, res, &error);

  /* a failed attach is the daemon's to log (attach-failed); only a domain
   * watched already is not one */
  if (vm == NULL && g_error_matches (error, VMCE_ERROR, VMCE_ERROR_BUSY))
    g_warning ("domain %s: %s", att->name, error->message);
  else if (vm != NULL)
    g_message ("domain %s (%s): attached through libvirt", att->name,
               vmce_vm_get_uuid (vm) != NULL ? vmce_vm_get_uuid (vm) : "?");
  /* a migration's destination: the pages the domain brought */
  if (vm != NULL && !g_cancellable_is_cancelled (att->cancellable))
    vmce_libvirt_carry_attached (att->watch->carry, vm, att->dom);
  vmce_domain_attach_free (att);
}

static void
vmce_domain_probe (VmceDomainAttach *att)
{
  g_autoptr(GTask) task = g_task_new (NULL, NULL, vmce_domain_probed_cb, att);

  att->tries++;
  virDomainRef (att->dom);
  g_task_set_task_data (task, att->dom, vmce_domain_unref);
  g_task_run_in_thread (task, vmce_domain_probe_thread);
}

static gboolean
vmce_domain_probe_again_cb (gpointer user_data)
{
  VmceDomainAttach *att = user_data;

  att->retry_source = 0;
  /* a domain of a connection since lost is taken again by the rescan of
   * the next one */
  if (g_cancellable_is_cancelled (att->cancellable) || att->watch->conn != virDomainGetConnect (att->dom)) {
    vmce_domain_attach_free (att);
    return G_SOURCE_REMOVE;
  }
  vmce_domain_probe (att);
  return G_SOURCE_REMOVE;
}

/* Whether to ask libvirt again: it may be busy with the domain (its
 * reconnect after a restart holds the domain's job, and a loaded host makes
 * that slow); vmced must not give up on the domain, nor get in the way */
static gboolean
vmce_domain_probe_retry (VmceDomainAttach *att, const GError *error)
{
  guint wait_s;

  if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED) ||
      att->watch->conn != virDomainGetConnect (att->dom))
    return FALSE;
  if (att->tries < VMCE_PROBE_TRIES) {
    wait_s = 1u << (att->tries - 1);
    g_message ("domain %s: libvirt cannot answer for it yet (%s): asking again in %u s", att->name,
               error->message, wait_s);
  } else {
    wait_s = VMCE_PROBE_EVERY_SECONDS;
    if (att->tries == VMCE_PROBE_TRIES)
      g_warning ("domain %s: libvirt still cannot answer for it (%s): not watched yet, asking every %u s "
                 "while it runs", att->name, error->message, wait_s);
  }
  att->retry_source = g_timeout_add_seconds (wait_s, vmce_domain_probe_again_cb, att);
  return TRUE;
}

static void
vmce_domain_probed_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  VmceDomainAttach *att = user_data;
  VmceLibvirtWatch *self = att->watch;
  g_autoptr(GError) error = NULL;
  g_autoptr(VmceDomainInfo) info = g_task_propagate_pointer (G_TASK (res), &error);
  g_autoptr(GSocket) sock = NULL;
  VmceLibvirtMonitor *monitor;

  if (g_cancellable_is_cancelled (att->cancellable)) {
    vmce_domain_attach_free (att);
    return;
  }
  if (info == NULL && self->conn != NULL && vmce_domain_probe_retry (att, error))
    return;
  if (info == NULL || self->conn == NULL) {
    if (info == NULL)
      vmce_log_record (VMCE_LOG_ATTACH_FAILED, att->name, NULL, 0, "domain %s: cannot attach: %s", att->name,
                       error->message);
    vmce_domain_attach_free (att);
    return;
  }
  monitor = vmce_libvirt_monitor_new (self->conn, att->dom, &sock, &error);
  if (monitor == NULL) {
    vmce_log_record (VMCE_LOG_ATTACH_FAILED, att->name, NULL, 0, "domain %s: cannot attach: %s", att->name,
                     error->message);
    vmce_domain_attach_free (att);
    return;
  }
  vmce_daemon_attach_domain_async (self->daemon, info, sock, monitor,
                                   (GDestroyNotify) vmce_libvirt_monitor_free,
                                   vmce_config_policy_for (self->config, info->name, self->policy),
                                   vmce_domain_attached_cb, att);
}

static void
vmce_libvirt_watch_attach (VmceLibvirtWatch *self, virDomainPtr dom)
{
  const gchar *name = virDomainGetName (dom);
  VmceDomainAttach *att;

  if (!vmce_libvirt_watch_wants (self, name) || g_hash_table_contains (self->attaching, name))
    return;
  if (vmce_daemon_lookup_vm (self->daemon, name, NULL) != NULL)
    return;
  att = g_new0 (VmceDomainAttach, 1);
  att->watch = self;
  att->daemon = self->daemon;
  att->attaching = g_hash_table_ref (self->attaching);
  att->cancellable = g_object_ref (self->cancellable);
  att->name = g_strdup (name);
  virDomainRef (dom);
  att->dom = dom;
  g_hash_table_add (self->attaching, g_strdup (name));
  vmce_domain_probe (att);
}

static void
vmce_libvirt_watch_detach_domain (VmceLibvirtWatch *self, const gchar *name, const gchar *why)
{
  VmceVm *vm = vmce_daemon_lookup_vm (self->daemon, name, NULL);

  if (vm != NULL && vmce_vm_get_uuid (vm) != NULL && vmce_vm_get_state (vm) != VMCE_VM_GONE &&
      vmce_vm_get_state (vm) != VMCE_VM_DETACHING)
    vmce_vm_detach (vm, why);
}

static const gchar *
vmce_stopped_why (int detail)
{
  switch (detail) {
  case VIR_DOMAIN_EVENT_STOPPED_SHUTDOWN: return "domain shut down";
  case VIR_DOMAIN_EVENT_STOPPED_DESTROYED: return "domain destroyed";
  case VIR_DOMAIN_EVENT_STOPPED_CRASHED: return "domain crashed";
  case VIR_DOMAIN_EVENT_STOPPED_MIGRATED: return "domain migrated away";
  case VIR_DOMAIN_EVENT_STOPPED_SAVED: return "domain saved";
  case VIR_DOMAIN_EVENT_STOPPED_FAILED: return "domain failed";
  default: return "domain stopped";
  }
}

static int
vmce_lifecycle_cb (virConnectPtr conn, virDomainPtr dom, int event, int detail, void *opaque)
{
  VmceLibvirtWatch *self = opaque;
  const gchar *name = virDomainGetName (dom);

  switch (event) {
  case VIR_DOMAIN_EVENT_STARTED:
    vmce_libvirt_watch_attach (self, dom);
    break;
  case VIR_DOMAIN_EVENT_STOPPED:
    vmce_libvirt_watch_detach_domain (self, name, vmce_stopped_why (detail));
    break;
  case VIR_DOMAIN_EVENT_SUSPENDED:
    /* a domain leaving for another host (SUSPENDED_MIGRATED) stays watched
     * until its migration has completed or failed: a page read then, an
     * error then, and a failed migration are still vmced's to answer for
     * (migration-guard.c); libvirt stops it when it has gone */
    break;
  default:
    break;
  }
  return 0;
}

/* A device hot-plugged or removed through libvirt (virsh attach-device):
 * for memory, QEMU 7.2 itself says nothing vmced can rely on until the
 * guest takes it (ACPI _OST), and an error may come before that */
static void
vmce_device_cb (virConnectPtr conn, virDomainPtr dom, const char *alias, void *opaque)
{
  VmceLibvirtWatch *self = opaque;
  VmceVm *vm = vmce_daemon_lookup_vm (self->daemon, virDomainGetName (dom), NULL);

  if (vm == NULL || vmce_vm_get_uuid (vm) == NULL || vmce_vm_get_state (vm) != VMCE_VM_READY)
    return;
  g_debug ("domain %s: device %s added or removed: reading the RAM layout again",
           vmce_vm_get_name (vm), alias);
  vmce_vm_refresh_layout (vm);
}

static void
vmce_libvirt_watch_scan (VmceLibvirtWatch *self)
{
  virDomainPtr *doms = NULL;
  int n = virConnectListAllDomains (self->conn, &doms, VIR_CONNECT_LIST_DOMAINS_ACTIVE);

  for (int i = 0; i < n; i++) {
    vmce_libvirt_watch_attach (self, doms[i]);
    virDomainFree (doms[i]);
  }
  free (doms);
  for (guint i = 0; self->domains != NULL && self->domains[i] != NULL; i++) {
    virDomainPtr dom = virDomainLookupByName (self->conn, self->domains[i]);
    if (dom == NULL)
      g_warning ("domain %s: %s has no such domain; watching for one to start",
                 self->domains[i], self->uri);
    else
      virDomainFree (dom);
  }
}

static gboolean
vmce_libvirt_watch_reconnect_cb (gpointer user_data)
{
  VmceLibvirtWatch *self = user_data;
  g_autoptr(GError) error = NULL;

  if (!vmce_libvirt_watch_connect (self, &error)) {
    g_debug ("reconnecting to %s: %s", self->uri, error->message);
    return G_SOURCE_CONTINUE;
  }
  self->reconnect_source = 0;
  if (self->ever_connected)
    g_message ("reconnected to %s", self->uri);
  else
    g_message ("connected to %s: watching %s", self->uri,
               self->domains != NULL ? "named domains" : "all domains");
  self->ever_connected = TRUE;
  vmce_libvirt_watch_scan (self);
  return G_SOURCE_REMOVE;
}

static gboolean
vmce_libvirt_watch_drop_cb (gpointer user_data)
{
  virConnectClose (user_data);
  return G_SOURCE_REMOVE;
}

/* The connection is gone (libvirtd restarted, say): the domains' monitors
 * went with it, so let their QEMUs go now, cleanly, and take them again
 * once connected; events in between reach QEMU itself. */
static void
vmce_close_cb (virConnectPtr conn, int reason, void *opaque)
{
  VmceLibvirtWatch *self = opaque;
  GPtrArray *vms = vmce_daemon_get_vms (self->daemon);

  if (self->closing || conn != self->conn)
    return;
  g_warning ("lost the connection to %s: letting its domains go until it is back", self->uri);
  for (guint i = 0; i < vms->len; i++) {
    VmceVm *vm = g_ptr_array_index (vms, i);
    if (vmce_vm_get_uuid (vm) != NULL && vmce_vm_get_state (vm) != VMCE_VM_GONE && vmce_vm_get_state (vm) != VMCE_VM_DETACHING)
      vmce_vm_detach (vm, "libvirt connection lost");
  }
  self->conn = NULL;
  vmce_libvirt_carry_set_connection (self->carry, NULL);
  self->lifecycle_callback = -1;
  self->device_added_callback = -1;
  self->device_removed_callback = -1;
  /* not from inside libvirt's own callback */
  g_idle_add (vmce_libvirt_watch_drop_cb, conn);
  if (self->reconnect_source == 0)
    self->reconnect_source =
      g_timeout_add_seconds (VMCE_RECONNECT_SECONDS, vmce_libvirt_watch_reconnect_cb, self);
}

static gboolean
vmce_libvirt_watch_connect (VmceLibvirtWatch *self, GError **error)
{
  virConnectPtr conn = virConnectOpen (self->uri);

  if (conn == NULL) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_CONNECTION_REFUSED, "cannot connect to %s: %s",
                 self->uri, virGetLastErrorMessage ());
    return FALSE;
  }
  /* a libvirtd that goes away is noticed within seconds, not at the next call */
  (void) virConnectSetKeepAlive (conn, 2, 3);
  self->conn = conn;
  vmce_libvirt_carry_set_connection (self->carry, conn);
  virConnectRegisterCloseCallback (conn, vmce_close_cb, self, NULL);
  self->lifecycle_callback =
    virConnectDomainEventRegisterAny (conn, NULL, VIR_DOMAIN_EVENT_ID_LIFECYCLE,
                                      VIR_DOMAIN_EVENT_CALLBACK (vmce_lifecycle_cb), self, NULL);
  if (self->lifecycle_callback < 0) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED, "%s: cannot follow its domains: %s",
                 self->uri, virGetLastErrorMessage ());
    virConnectUnregisterCloseCallback (conn, vmce_close_cb);
    virConnectClose (conn);
    self->conn = NULL;
    vmce_libvirt_carry_set_connection (self->carry, NULL);
    return FALSE;
  }
  /* without them vmced still learns of new memory from QEMU, later */
  self->device_added_callback =
    virConnectDomainEventRegisterAny (conn, NULL, VIR_DOMAIN_EVENT_ID_DEVICE_ADDED,
                                      VIR_DOMAIN_EVENT_CALLBACK (vmce_device_cb), self, NULL);
  self->device_removed_callback =
    virConnectDomainEventRegisterAny (conn, NULL, VIR_DOMAIN_EVENT_ID_DEVICE_REMOVED,
                                      VIR_DOMAIN_EVENT_CALLBACK (vmce_device_cb), self, NULL);
  if (self->device_added_callback < 0 || self->device_removed_callback < 0)
    g_warning ("%s: cannot follow device hot-plug: %s", self->uri, virGetLastErrorMessage ());
  return TRUE;
}

static void
vmce_libvirt_error_cb (void *user_data, virErrorPtr error)
{
  /* errors are taken with virGetLastErrorMessage() where they matter */
}

VmceLibvirtWatch *
vmce_libvirt_watch_new (VmceDaemon *daemon,
                        const gchar *uri,
                        const gchar *const *domains,
                        VmcePolicy policy,
                        gboolean wait,
                        GError **error)
{
  static gsize once = 0;
  g_autoptr(GError) local = NULL;
  g_autoptr(VmceLibvirtWatch) self = g_new0 (VmceLibvirtWatch, 1);

  if (g_once_init_enter (&once)) {
    /* libvirt's events on the GLib main loop, in the main thread */
    gvir_event_register ();
    virSetErrorFunc (NULL, vmce_libvirt_error_cb);
    g_once_init_leave (&once, 1);
  }
  self->daemon = daemon;
  self->uri = g_strdup (uri);
  self->domains = domains != NULL ? g_strdupv ((gchar **) domains) : NULL;
  self->policy = policy;
  self->lifecycle_callback = -1;
  self->device_added_callback = -1;
  self->device_removed_callback = -1;
  self->attaching = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->cancellable = g_cancellable_new ();
  self->carry = vmce_libvirt_carry_new (daemon);
  if (!vmce_libvirt_watch_connect (self, &local)) {
    if (!wait) {
      g_propagate_error (error, g_steal_pointer (&local));
      return NULL;
    }
    /* once, not at every try: a host without libvirt is a normal host */
    g_warning ("%s; running in attach mode (vmcectl attach), trying again every %d s",
               local->message, VMCE_WAIT_SECONDS);
    self->reconnect_source =
      g_timeout_add_seconds (VMCE_WAIT_SECONDS, vmce_libvirt_watch_reconnect_cb, self);
    return g_steal_pointer (&self);
  }
  self->ever_connected = TRUE;
  g_message ("watching %s at %s", self->domains != NULL ? "named domains" : "all domains", uri);
  vmce_libvirt_watch_scan (self);
  return g_steal_pointer (&self);
}

void
vmce_libvirt_watch_set_config (VmceLibvirtWatch *self, const VmceConfig *config)
{
  self->config = config;
}

void
vmce_libvirt_watch_free (VmceLibvirtWatch *self)
{
  if (self == NULL)
    return;
  self->closing = TRUE;
  g_cancellable_cancel (self->cancellable);
  g_clear_pointer (&self->carry, vmce_libvirt_carry_free);
  if (self->reconnect_source != 0)
    g_source_remove (self->reconnect_source);
  if (self->conn != NULL) {
    if (self->lifecycle_callback >= 0)
      virConnectDomainEventDeregisterAny (self->conn, self->lifecycle_callback);
    if (self->device_added_callback >= 0)
      virConnectDomainEventDeregisterAny (self->conn, self->device_added_callback);
    if (self->device_removed_callback >= 0)
      virConnectDomainEventDeregisterAny (self->conn, self->device_removed_callback);
    virConnectUnregisterCloseCallback (self->conn, vmce_close_cb);
    virConnectClose (self->conn);
  }
  g_hash_table_unref (self->attaching);
  g_object_unref (self->cancellable);
  g_strfreev (self->domains);
  g_free (self->uri);
  g_free (self);
}
