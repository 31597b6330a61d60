/*
 * The commands of vmced's control socket.
 *
 *   query-status                      daemon, journal, VMs
 *   query-vm      {vm}                one VM with its RAM layout
 *   query-events  {vm?, pfn?, limit?} recent journal records
 *   subscribe                         events from now on
 *   attach        {pid?, qmp, name?, agent?, policy?}
 *   detach        {vm}
 *   set-policy    {vm, policy?, migration?, hugepage?}
 *                                     forward, ignore-ao, pass, stop or force;
 *                                     carry or refuse
 *   poison        {vm, gpa|hva, kind?, trigger?, cpu?, lsb?, timeout-ms?}
 *   inject        {vm, gpa, kind?, cpu?}
 *   translate     {vm, gpa|hva}
 *   guest         {vm, request, timeout-ms?}
 *                                     one request line to the VM's vmce
 *                                     guest agent, relayed: its answer
 *   migration-pages  {vm}             its poisoned pages, as a destination takes them
 *   migration-expect {vm, pages}      a QEMU loading a migration is to hold
 *                                     those poisoned (vmcectl migrate)
 *   migrate       {vm, uri, to, pages}
 *                                     QMP migrate, the pages handed to @to
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-control"

#include <string.h>

#include "agent-client.h"
#include "attach-watch.h"
#include "commands.h"
#include "forward.h"
#include "hugepage-loss.h"
#include "json-util.h"
#include "migration-guard.h"
#include "migration-incoming.h"
#include "page.h"
#include "poison-xml.h"
#include "sim-poison.h"
#include "vm-json.h"

#define VMCE_POISON_DEFAULT_TIMEOUT_MS 30000
/* what vmcectl waited for the agent when it asked it itself */
#define VMCE_GUEST_DEFAULT_TIMEOUT_MS 30000
/* the agent refuses longer request lines */
#define VMCE_GUEST_MAX_REQUEST 4096

static VmceVm *
vmce_commands_get_vm (VmceDaemon *daemon, VmceControlRequest *req, JsonObject *args)
{
  g_autoptr(GError) error = NULL;
  VmceVm *vm = vmce_daemon_lookup_vm (daemon, vmce_json_object_get_string_opt (args, "vm"),
                                      &error);

  if (vm == NULL) {
    vmce_control_request_error_literal (req, error);
    return NULL;
  }
  if (vmce_vm_get_state (vm) != VMCE_VM_READY) {
    vmce_control_request_error (req, VMCE_ERROR_NOT_READY, "vm %s is not attached", vmce_vm_get_name (vm));
    return NULL;
  }
  return vm;
}

/* Set in a request's arguments once it has waited for a fresh layout */
#define VMCE_ARG_LAYOUT_FRESH "x-vmced-layout-fresh"

typedef struct {
  VmceControlHandler handler;
  VmceControlRequest *req;
  JsonObject *args;
  gpointer user_data;
} VmceCommandsRetry;

static void
vmce_commands_retry_cb (VmceVm *vm, gpointer data)
{
  g_autofree VmceCommandsRetry *retry = data;
  g_autoptr(JsonObject) args = retry->args;

  /* it finds the VM again by name: gone by now, it says so */
  retry->handler (retry->req, args, retry->user_data);
}

/* The address in @args (gpa or hva) is not in @vm's layout: it may be in
 * memory hot-plugged since the layout was read (QEMU 7.2 says nothing when
 * a DIMM comes). TRUE: the command runs again, once, on a layout read
 * again; FALSE: it already has, or names no address, and the miss is real */
static gboolean
vmce_commands_again_on_fresh_layout (VmceVm *vm, VmceControlHandler handler,
                                     VmceControlRequest *req, JsonObject *args,
                                     gpointer user_data)
{
  VmceCommandsRetry *retry;
  guint64 gpa = 0, hva = 0, found = 0;
  gboolean have_gpa = FALSE, have_hva = FALSE;

  if (json_object_has_member (args, VMCE_ARG_LAYOUT_FRESH))
    return FALSE;
  if (!vmce_json_object_get_u64_opt (args, "gpa", &gpa, &have_gpa, NULL) ||
      !vmce_json_object_get_u64_opt (args, "hva", &hva, &have_hva, NULL))
    return FALSE;
  if (have_gpa == have_hva)
    return FALSE;
  if (vmce_vm_get_layout (vm) != NULL &&
      (have_gpa ? vmce_ram_layout_gpa_to_hva (vmce_vm_get_layout (vm), gpa, &found, NULL)
                : vmce_ram_layout_hva_to_gpa (vmce_vm_get_layout (vm), hva, &found, NULL)))
    return FALSE;
  json_object_set_boolean_member (args, VMCE_ARG_LAYOUT_FRESH, TRUE);
  retry = g_new0 (VmceCommandsRetry, 1);
  retry->handler = handler;
  retry->req = req;
  retry->args = json_object_ref (args);
  retry->user_data = user_data;
  vmce_vm_when_layout_fresh (vm, vmce_commands_retry_cb, retry);
  return TRUE;
}

static gboolean
vmce_commands_get_kind (VmceControlRequest *req, JsonObject *args, VmceMceKind *kind)
{
  const gchar *str = vmce_json_object_get_string_opt (args, "kind");

  *kind = VMCE_MCE_KIND_AO;
  if (str == NULL || vmce_mce_kind_from_string (str, kind))
    return TRUE;
  vmce_control_request_error (req, VMCE_ERROR_INVALID_PARAMETER, "'kind' must be \"ao\" or \"ar\", not \"%s\"",
                              str);
  return FALSE;
}

/* gpa, or hva translated to a gpa */
static gboolean
vmce_commands_get_gpa (VmceVm *vm, VmceControlRequest *req, JsonObject *args, guint64 *gpa)
{
  g_autoptr(GError) error = NULL;
  gboolean have_gpa = FALSE, have_hva = FALSE;
  guint64 hva = 0;

  if (!vmce_json_object_get_u64_opt (args, "gpa", gpa, &have_gpa, &error) ||
      !vmce_json_object_get_u64_opt (args, "hva", &hva, &have_hva, &error)) {
    vmce_control_request_error (req, VMCE_ERROR_INVALID_PARAMETER, "%s", error->message);
    return FALSE;
  }
  if (have_gpa == have_hva) {
    vmce_control_request_error (req, VMCE_ERROR_INVALID_PARAMETER, "give exactly one of 'gpa' and 'hva'");
    return FALSE;
  }
  if (have_hva && !vmce_ram_layout_hva_to_gpa (vmce_vm_get_layout (vm), hva, gpa, NULL)) {
    vmce_control_request_error (req, VMCE_ERROR_INVALID_PARAMETER,
                                "HVA 0x%" G_GINT64_MODIFIER "x is not guest RAM of vm %s", hva,
                                vmce_vm_get_name (vm));
    return FALSE;
  }
  return TRUE;
}

static void
vmce_cmd_query_status (VmceControlRequest *req, JsonObject *args, gpointer user_data)
{
  g_autoptr(JsonNode) status = vmce_daemon_status_to_json (user_data);

  vmce_control_request_return (req, status);
}

static void
vmce_cmd_query_vm (VmceControlRequest *req, JsonObject *args, gpointer user_data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) json = NULL;
  VmceVm *vm = vmce_daemon_lookup_vm (user_data, vmce_json_object_get_string_opt (args, "vm"),
                                      &error);

  if (vm == NULL) {
    vmce_control_request_error_literal (req, error);
    return;
  }
  json = vmce_vm_to_json (vm, VMCE_VM_JSON_LISTS | VMCE_VM_JSON_PAGES | VMCE_VM_JSON_LAYOUT);
  vmce_control_request_return (req, json);
}

static void
vmce_cmd_query_events (VmceControlRequest *req, JsonObject *args, gpointer user_data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) events = NULL;
  guint64 limit = 100;
  guint64 pfn = 0;
  gboolean by_pfn = FALSE;

  if (!vmce_json_object_get_u64_opt (args, "limit", &limit, NULL, &error) ||
      !vmce_json_object_get_u64_opt (args, "pfn", &pfn, &by_pfn, &error)) {
    vmce_control_request_error (req, VMCE_ERROR_INVALID_PARAMETER, "%s", error->message);
    return;
  }
  /* a pfn has 55 bits at most (pagemap's field) */
  if (by_pfn && pfn >= (G_GUINT64_CONSTANT (1) << 55)) {
    vmce_control_request_error (req, VMCE_ERROR_INVALID_PARAMETER,
                                "pfn 0x%" G_GINT64_MODIFIER "x is no page frame number: it has 55 bits at most", pfn);
    return;
  }
  events = vmce_daemon_get_recent (user_data, vmce_json_object_get_string_opt (args, "vm"),
                                   by_pfn ? (gint64) pfn : -1, (guint) MIN (limit, G_MAXUINT));
  vmce_control_request_return (req, events);
}

static void
vmce_cmd_subscribe (VmceControlRequest *req, JsonObject *args, gpointer user_data)
{
  vmce_control_request_subscribe (req);
  vmce_control_request_return (req, NULL);
}

static void
vmce_cmd_attach_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  VmceControlRequest *req = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(VmceVm) vm = vmce_daemon_attach_finish (NULL, res, &error);
  g_autoptr(JsonNode) json = NULL;

  if (vm == NULL) {
    vmce_control_request_error_literal (req, error);
    return;
  }
  /* as query-status lists it: a QEMU attached again may have thousands of
   * poisoned pages from the journal (query-vm lists them) */
  json = vmce_vm_to_json (vm, VMCE_VM_JSON_SUMMARY);
  vmce_control_request_return (req, json);
}

static gboolean
vmce_commands_get_policy (VmceControlRequest *req, JsonObject *args, VmcePolicy *policy)
{
  const gchar *str = vmce_json_object_get_string_opt (args, "policy");

  if (str == NULL || vmce_policy_from_string (str, policy))
    return TRUE;
  vmce_control_request_error (req, VMCE_ERROR_INVALID_PARAMETER,
                              "'policy' must be %s, not \"%s\"",
                              vmce_policy_choices (), str);
  return FALSE;
}

/* attach with no pid: the socket probed as [attach] probes it (never
 * waiting behind another client), QEMU the process serving it */
typedef struct {
  VmceDaemon *daemon;
  VmceControlRequest *req;
  gchar *qmp;
  gchar *name;
  gchar *agent;
  VmcePolicy policy;
} VmceCmdProbe;

static void
vmce_cmd_probe_free (VmceCmdProbe *p)
{
  g_free (p->qmp);
  g_free (p->name);
  g_free (p->agent);
  g_free (p);
}

static void
vmce_cmd_attach_probed_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  VmceCmdProbe *p = user_data;
  g_autoptr(GError) error = NULL;
  pid_t pid = 0;
  g_autoptr(GSocket) socket = vmce_attach_probe_finish (res, &pid, &error);

  if (socket == NULL) {
    vmce_daemon_attach_failed (p->daemon, pid, "attach (no pid)", error);
    vmce_control_request_error_literal (p->req, error);
  } else {
    vmce_daemon_attach_socket_async (p->daemon, pid, socket, p->qmp, p->name, p->agent, p->policy,
                                     vmce_cmd_attach_cb, p->req);
  }
  vmce_cmd_probe_free (p);
}

static void
vmce_cmd_attach_by_socket (VmceControlRequest *req, JsonObject *args, VmcePolicy policy, gpointer daemon)
{
  VmceCmdProbe *p = g_new0 (VmceCmdProbe, 1);

  p->daemon = daemon;
  p->req = req;
  p->qmp = g_strdup (vmce_json_object_get_string_opt (args, "qmp"));
  p->name = g_strdup (vmce_json_object_get_string_opt (args, "name"));
  p->agent = g_strdup (vmce_json_object_get_string_opt (args, "agent"));
  p->policy = policy;
  vmce_attach_probe_async (p->qmp, VMCE_ATTACH_GREETING_MS, VMCE_ATTACH_STARTUP_MS,
                           vmce_cmd_attach_probed_cb, p);
}

static void
vmce_cmd_attach (VmceControlRequest *req, JsonObject *args, gpointer user_data)
{
  g_autoptr(GError) error = NULL;
  const gchar *qmp = vmce_json_object_get_string_opt (args, "qmp");
  VmcePolicy policy = VMCE_POLICY_FORWARD;
  gboolean by_socket = !json_object_has_member (args, "pid");
  guint64 pid = 0;

  if (!by_socket && (!vmce_json_object_get_u64 (args, "pid", &pid, &error) || pid == 0 || pid > G_MAXINT)) {
    vmce_control_request_error (req, VMCE_ERROR_INVALID_PARAMETER, "'pid': %s",
                                error != NULL ? error->message : "not a process id");
    return;
  }
  if (qmp == NULL) {
    vmce_control_request_error (req, VMCE_ERROR_INVALID_PARAMETER, "'qmp' (the monitor socket) is missing");
    return;
  }
  /* vmced opens them, from its own working directory, not the client's */
  if (!g_path_is_absolute (qmp) ||
      (vmce_json_object_get_string_opt (args, "agent") != NULL &&
       !g_path_is_absolute (vmce_json_object_get_string_opt (args, "agent")))) {
    vmce_control_request_error (req, VMCE_ERROR_INVALID_PARAMETER,
                                "'qmp' and 'agent' must be absolute paths (vmced opens them)");
    return;
  }
  if (!vmce_commands_get_policy (req, args, &policy))
    return;
  if (by_socket) {
    vmce_cmd_attach_by_socket (req, args, policy, user_data);
    return;
  }
  vmce_daemon_attach_async (user_data, (pid_t) pid, qmp,
                            vmce_json_object_get_string_opt (args, "name"),
                            vmce_json_object_get_string_opt (args, "agent"), policy,
                            vmce_cmd_attach_cb, req);
}

static void
vmce_cmd_set_policy (VmceControlRequest *req, JsonObject *args, gpointer user_data)
{
  VmceVm *vm = vmce_commands_get_vm (user_data, req, args);
  VmcePolicy policy = VMCE_POLICY_FORWARD;
  VmceMigrationPolicy migration = VMCE_MIGRATION_CARRY;
  const gchar *migration_str = vmce_json_object_get_string_opt (args, "migration");
  const gchar *hugepage_str = vmce_json_object_get_string_opt (args, "hugepage");
  VmceHugepagePolicy hugepage = VMCE_HUGEPAGE_ONE;

  if (vm == NULL || !vmce_commands_get_policy (req, args, &policy))
    return;
  if (!json_object_has_member (args, "policy") && migration_str == NULL && hugepage_str == NULL) {
    vmce_control_request_error (req, VMCE_ERROR_INVALID_PARAMETER,
                                "'policy', 'migration' or 'hugepage' is missing");
    return;
  }
  if (hugepage_str != NULL && !vmce_hugepage_policy_from_string (hugepage_str, &hugepage)) {
    vmce_control_request_error (req, VMCE_ERROR_INVALID_PARAMETER,
                                "'hugepage' must be " VMCE_HUGEPAGE_NAMES ", not \"%s\"", hugepage_str);
    return;
  }
  if (migration_str != NULL && !vmce_migration_policy_from_string (migration_str, &migration)) {
    vmce_control_request_error (req, VMCE_ERROR_INVALID_PARAMETER,
                                "'migration' must be carry or refuse, not \"%s\"",
                                migration_str);
    return;
  }
  if (json_object_has_member (args, "policy")) {
    g_message ("vm %s: policy %s (was %s)", vmce_vm_get_name (vm), vmce_policy_to_string (policy),
               vmce_policy_to_string (vmce_vm_get_policy (vm)));
    vmce_vm_set_policy (vm, policy);
  }
  if (migration_str != NULL) {
    g_message ("vm %s: migration %s (was %s)", vmce_vm_get_name (vm),
               vmce_migration_policy_to_string (migration),
               vmce_migration_policy_to_string (vmce_migration_guard_get_policy (vm)));
    vmce_migration_guard_set_policy (vm, migration);
  }
  if (hugepage_str != NULL) {
    g_message ("vm %s: hugepage %s (was %s)", vmce_vm_get_name (vm), vmce_hugepage_policy_to_string (hugepage),
               vmce_hugepage_policy_to_string (vmce_hugepage_loss_get_policy (vm)));
    vmce_hugepage_loss_set_policy (vm, hugepage);
  }
  vmce_control_request_return (req, NULL);
}

static void
vmce_cmd_detach (VmceControlRequest *req, JsonObject *args, gpointer user_data)
{
  VmceVm *vm = vmce_commands_get_vm (user_data, req, args);

  if (vm == NULL)
    return;
  vmce_vm_detach (vm, "asked by a client");
  vmce_control_request_return (req, NULL);
}

static void
vmce_cmd_event_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  VmceControlRequest *req = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) event = g_task_propagate_pointer (G_TASK (res), &error);

  if (event == NULL) {
    vmce_control_request_error_literal (req, error);
    return;
  }
  vmce_control_request_return (req, event);
}

static void
vmce_cmd_poison (VmceControlRequest *req, JsonObject *args, gpointer user_data)
{
  g_autoptr(GError) error = NULL;
  VmceVm *vm = vmce_commands_get_vm (user_data, req, args);
  const gchar *trigger_str;
  VmceSimTrigger trigger = VMCE_SIM_TRIGGER_AUTO;
  VmceMceKind kind;
  guint64 gpa = 0, hva = 0, cpu = 0, timeout = VMCE_POISON_DEFAULT_TIMEOUT_MS, lsb = VMCE_PAGE_SHIFT;
  gboolean have_gpa = FALSE, have_hva = FALSE, have_cpu = FALSE;

  if (vm == NULL || !vmce_commands_get_kind (req, args, &kind))
    return;
  if (vmce_commands_again_on_fresh_layout (vm, vmce_cmd_poison, req, args, user_data))
    return;
  if (!vmce_json_object_get_u64_opt (args, "gpa", &gpa, &have_gpa, &error) ||
      !vmce_json_object_get_u64_opt (args, "hva", &hva, &have_hva, &error) ||
      !vmce_json_object_get_u64_opt (args, "cpu", &cpu, &have_cpu, &error) ||
      !vmce_json_object_get_u64_opt (args, "timeout-ms", &timeout, NULL, &error) ||
      !vmce_json_object_get_u64_opt (args, "lsb", &lsb, NULL, &error)) {
    vmce_control_request_error (req, VMCE_ERROR_INVALID_PARAMETER, "%s", error->message);
    return;
  }
  if (have_gpa == have_hva) {
    vmce_control_request_error (req, VMCE_ERROR_INVALID_PARAMETER, "give exactly one of 'gpa' and 'hva'");
    return;
  }
  /* a 4 KiB page, or all of a 2 MiB or 1 GiB one */
  if (lsb != VMCE_PAGE_SHIFT && lsb != 21 && lsb != 30) {
    vmce_control_request_error (req, VMCE_ERROR_INVALID_PARAMETER,
                                "'lsb' must be 12, 21 (a 2 MiB page) or 30 (1 GiB), not %" G_GUINT64_FORMAT, lsb);
    return;
  }
  trigger_str = vmce_json_object_get_string_opt (args, "trigger");
  if (trigger_str != NULL && !vmce_sim_trigger_from_string (trigger_str, &trigger)) {
    vmce_control_request_error (req, VMCE_ERROR_INVALID_PARAMETER,
                                "'trigger' must be auto, access or now, not \"%s\"", trigger_str);
    return;
  }
  vmce_sim_poison_async (vm, have_hva ? hva : gpa, have_hva, kind, trigger,
                         have_cpu ? (gint) MIN (cpu, G_MAXINT) : -1, (guint) lsb,
                         (guint) MIN (timeout, G_MAXUINT), vmce_cmd_event_cb, req);
}

static void
vmce_cmd_inject (VmceControlRequest *req, JsonObject *args, gpointer user_data)
{
  g_autoptr(GError) error = NULL;
  VmceVm *vm = vmce_commands_get_vm (user_data, req, args);
  VmceMceKind kind;
  guint64 gpa = 0, cpu = 0;
  gboolean have_cpu = FALSE;

  if (vm == NULL || !vmce_commands_get_kind (req, args, &kind))
    return;
  if (vmce_commands_again_on_fresh_layout (vm, vmce_cmd_inject, req, args, user_data))
    return;
  if (!vmce_json_object_get_u64 (args, "gpa", &gpa, &error) ||
      !vmce_json_object_get_u64_opt (args, "cpu", &cpu, &have_cpu, &error)) {
    vmce_control_request_error (req, VMCE_ERROR_INVALID_PARAMETER, "%s", error->message);
    return;
  }
  vmce_forward_inject_async (vm, gpa, kind, have_cpu ? (gint) MIN (cpu, G_MAXINT) : -1,
                             vmce_cmd_event_cb, req);
}

static void
vmce_cmd_translate (VmceControlRequest *req, JsonObject *args, gpointer user_data)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonBuilder) b = json_builder_new ();
  g_autoptr(JsonNode) ret = NULL;
  VmceVm *vm = vmce_commands_get_vm (user_data, req, args);
  const VmceRamRange *range = NULL;
  guint64 gpa = 0, hva = 0;

  if (vm == NULL ||
      vmce_commands_again_on_fresh_layout (vm, vmce_cmd_translate, req, args, user_data) ||
      !vmce_commands_get_gpa (vm, req, args, &gpa))
    return;
  if (!vmce_ram_layout_gpa_to_hva (vmce_vm_get_layout (vm), gpa, &hva, &range)) {
    vmce_control_request_error (req, VMCE_ERROR_INVALID_PARAMETER,
                                "GPA 0x%" G_GINT64_MODIFIER "x is not guest RAM of vm %s", gpa,
                                vmce_vm_get_name (vm));
    return;
  }
  json_builder_begin_object (b);
  vmce_json_builder_add_hex (b, "gpa", gpa);
  vmce_json_builder_add_hex (b, "hva", hva);
  json_builder_set_member_name (b, "block");
  json_builder_add_string_value (b, range->block);
  vmce_json_builder_add_hex (b, "offset", range->offset + (gpa - range->gpa));
  json_builder_set_member_name (b, "rom");
  json_builder_add_boolean_value (b, range->rom);
  json_builder_end_object (b);
  ret = json_builder_get_root (b);
  vmce_control_request_return (req, ret);
}

static void
vmce_cmd_migration_pages (VmceControlRequest *req, JsonObject *args, gpointer user_data)
{
  VmceVm *vm = vmce_commands_get_vm (user_data, req, args);
  g_autoptr(GPtrArray) pages = NULL;
  g_autoptr(JsonBuilder) b = NULL;
  g_autoptr(JsonNode) ret = NULL;
  g_autofree gchar *xml = NULL;

  if (vm == NULL)
    return;
  pages = vmce_poison_set_host_pages (vmce_vm_get_poisoned (vm));
  xml = vmce_poison_xml_build (vmce_vm_get_name (vm), NULL, pages);
  b = json_builder_new ();
  json_builder_begin_object (b);
  json_builder_set_member_name (b, "pages");
  json_builder_add_string_value (b, xml);
  vmce_json_builder_add_int (b, "count", pages->len);
  json_builder_end_object (b);
  ret = json_builder_get_root (b);
  vmce_control_request_return (req, ret);
}

static void
vmce_cmd_migration_expect (VmceControlRequest *req, JsonObject *args, gpointer user_data)
{
  VmceVm *vm = vmce_commands_get_vm (user_data, req, args);
  const gchar *xml = vmce_json_object_get_string_opt (args, "pages");
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) pages = NULL;
  g_autoptr(JsonNode) ret = NULL;
  g_autofree gchar *from = NULL;
  g_autofree gchar *who = NULL;

  if (vm == NULL)
    return;
  if (xml == NULL || (pages = vmce_poison_xml_parse (xml, &from, &error)) == NULL) {
    vmce_control_request_error (req, VMCE_ERROR_INVALID_PARAMETER, "%s",
                                error != NULL ? error->message : "'pages' is missing");
    return;
  }
  if (!vmce_vm_is_incoming (vm)) {
    vmce_control_request_error (req, VMCE_ERROR_INVALID_PARAMETER,
                                "vm %s is not loading a migration (its QEMU waits with -incoming until then)",
                                vmce_vm_get_name (vm));
    return;
  }
  if (vmce_migration_incoming_is_receiving (vm)) {
    vmce_control_request_error (req, VMCE_ERROR_BUSY, "vm %s receives another migration's pages already",
                                vmce_vm_get_name (vm));
    return;
  }
  who = g_strdup_printf ("%s (handed over by vmcectl migrate)", from);
  vmce_migration_incoming_receive (vm, who, pages);
  ret = json_node_new (JSON_NODE_OBJECT);
  json_node_take_object (ret, json_object_new ());
  json_object_set_int_member (json_node_get_object (ret), "pages", pages->len);
  vmce_control_request_return (req, ret);
}

typedef struct {
  VmceControlRequest *req;
  VmceVm *vm;
} VmceCmdMigrate;

static void
vmce_cmd_migrate_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  g_autofree VmceCmdMigrate *m = user_data;
  g_autoptr(VmceVm) vm = m->vm;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) ret = vmce_qmp_client_execute_finish (VMCE_QMP_CLIENT (source), res, NULL, &error);

  if (ret == NULL) {
    /* nothing moved: the pages handed over are not the next migration's */
    vmce_migration_guard_expect_external (vm, NULL, 0);
    vmce_control_request_error (m->req, VMCE_ERROR_GENERIC, "QEMU refused the migration: %s", error->message);
    return;
  }
  vmce_control_request_return (m->req, NULL);
}

static void
vmce_cmd_migrate (VmceControlRequest *req, JsonObject *args, gpointer user_data)
{
  VmceVm *vm = vmce_commands_get_vm (user_data, req, args);
  const gchar *uri = vmce_json_object_get_string_opt (args, "uri");
  const gchar *to = vmce_json_object_get_string_opt (args, "to");
  g_autoptr(GPtrArray) pages = NULL;
  g_autoptr(JsonNode) qargs = NULL;
  gint64 handed = json_object_get_int_member_with_default (args, "pages", -1);
  VmceCmdMigrate *m;

  if (vm == NULL)
    return;
  if (uri == NULL || to == NULL) {
    vmce_control_request_error (req, VMCE_ERROR_INVALID_PARAMETER, "'uri' or 'to' is missing");
    return;
  }
  if (vmce_vm_get_uuid (vm) != NULL) {
    vmce_control_request_error (req, VMCE_ERROR_NOT_SUPPORTED, "vm %s is a libvirt domain: migrate it with "
                                "virsh migrate (its pages go in its metadata)", vmce_vm_get_name (vm));
    return;
  }
  pages = vmce_poison_set_host_pages (vmce_vm_get_poisoned (vm));
  if (handed != (gint64) pages->len) {
    vmce_control_request_error (req, VMCE_ERROR_INVALID_PARAMETER,
                                "vm %s has %u poisoned page(s) now, %" G_GINT64_FORMAT " were handed over: "
                                "hand them over again", vmce_vm_get_name (vm), pages->len, handed);
    return;
  }
  vmce_migration_guard_expect_external (vm, to, pages->len);
  qargs = json_node_new (JSON_NODE_OBJECT);
  json_node_take_object (qargs, json_object_new ());
  json_object_set_string_member (json_node_get_object (qargs), "uri", uri);
  m = g_new0 (VmceCmdMigrate, 1);
  m->req = req;
  m->vm = vmce_vm_ref (vm);
  vmce_qmp_client_execute_async (vmce_vm_get_qmp (vm), "migrate", qargs, NULL, vmce_cmd_migrate_cb, m);
}

static void
vmce_cmd_guest_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  VmceControlRequest *req = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) answer = vmce_agent_client_request_finish (res, &error);

  if (answer == NULL) {
    vmce_control_request_error_literal (req, error);
    return;
  }
  vmce_control_request_return (req, answer);
}

/* The agent's socket is on this host: vmcectl asks it through vmced,
 * here or over ssh, and never opens it itself */
static void
vmce_cmd_guest (VmceControlRequest *req, JsonObject *args, gpointer user_data)
{
  g_autoptr(GError) error = NULL;
  VmceVm *vm = vmce_commands_get_vm (user_data, req, args);
  const gchar *request = vmce_json_object_get_string_opt (args, "request");
  guint64 timeout = VMCE_GUEST_DEFAULT_TIMEOUT_MS;

  if (vm == NULL)
    return;
  if (request == NULL || request[0] == '\0' || strpbrk (request, "\r\n") != NULL ||
      strlen (request) > VMCE_GUEST_MAX_REQUEST) {
    vmce_control_request_error (req, VMCE_ERROR_INVALID_PARAMETER,
                                "'request' must be one line of at most %d bytes: COMMAND [KEY=VALUE...]",
                                VMCE_GUEST_MAX_REQUEST);
    return;
  }
  if (!vmce_json_object_get_u64_opt (args, "timeout-ms", &timeout, NULL, &error) || timeout == 0 ||
      timeout > G_MAXUINT) {
    vmce_control_request_error (req, VMCE_ERROR_INVALID_PARAMETER, "'timeout-ms': %s",
                                error != NULL ? error->message : "not a number of milliseconds");
    return;
  }
  if (vmce_vm_get_agent_path (vm) == NULL) {
    vmce_control_request_error (req, VMCE_ERROR_NOT_FOUND,
                                "vm %s has no guest agent socket (attach it with --agent, or give the "
                                "domain the org.vmce.agent.1 channel)",
                                vmce_vm_get_name (vm));
    return;
  }
  vmce_agent_client_request_async (vmce_vm_get_agent (vm), request, (guint) timeout,
                                   vmce_cmd_guest_cb, req);
}

void
vmce_commands_register (VmceControl *control, VmceDaemon *daemon)
{
  vmce_control_add_command (control, "query-status", vmce_cmd_query_status, daemon);
  vmce_control_add_command (control, "query-vm", vmce_cmd_query_vm, daemon);
  vmce_control_add_command (control, "query-events", vmce_cmd_query_events, daemon);
  vmce_control_add_command (control, "subscribe", vmce_cmd_subscribe, daemon);
  vmce_control_add_command (control, "attach", vmce_cmd_attach, daemon);
  vmce_control_add_command (control, "detach", vmce_cmd_detach, daemon);
  vmce_control_add_command (control, "set-policy", vmce_cmd_set_policy, daemon);
  vmce_control_add_command (control, "poison", vmce_cmd_poison, daemon);
  vmce_control_add_command (control, "inject", vmce_cmd_inject, daemon);
  vmce_control_add_command (control, "migration-pages", vmce_cmd_migration_pages, daemon);
  vmce_control_add_command (control, "migration-expect", vmce_cmd_migration_expect, daemon);
  vmce_control_add_command (control, "migrate", vmce_cmd_migrate, daemon);
  vmce_control_add_command (control, "translate", vmce_cmd_translate, daemon);
  vmce_control_add_command (control, "guest", vmce_cmd_guest, daemon);
}
