/*
 * A libvirt domain's poisoned pages in its metadata (see libvirt-carry.h).
 *
 * libvirt sends a domain's live definition, its <metadata> with it, to the
 * destination host when a migration begins, before QEMU moves any RAM; a
 * list written then would be late. So vmced keeps the metadata current:
 * every VMCE_CARRY_POLL_MS it writes the list of each domain whose host
 * pages changed (one write per domain at a time, the latest list; a storm
 * of errors is a few writes, not one per error), and tells the migration
 * guard how many pages the domain holds, which lets a migration to another
 * host go only when they are all there (migration-guard.c). On the other
 * host, vmced reads the list when the domain arrives and hands it to the
 * destination's guard (migration-incoming.c), which holds the pages
 * poisoned before the guest runs.
 *
 * libvirt's calls wait on libvirtd: each runs in a worker thread, never in
 * the main loop that serves ptrace stops.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmced-libvirt"

#include <gio/gio.h>
#include <libvirt/virterror.h>

#include "libvirt-carry.h"
#include "migration-guard.h"
#include "migration-incoming.h"
#include "poison-xml.h"

#define VMCE_CARRY_POLL_MS 250

struct _VmceLibvirtCarry {
  VmceDaemon *daemon;
  virConnectPtr conn;
  GHashTable *written; /* vm name -> pages its domain holds + 1 */
  GHashTable *writing; /* vm names with a write in flight */
  guint poll_source;
  GCancellable *cancellable;
  gchar *by; /* this vmced run, in each list it writes */
};

typedef struct {
  VmceLibvirtCarry *carry;
  virConnectPtr conn;
  gchar *name;
  gchar *uuid;
  gchar *xml; /* to write; or what was read */
  guint n_pages;
} VmceCarryOp;

static void
vmce_carry_op_free (VmceCarryOp *op)
{
  virConnectClose (op->conn);
  g_free (op->name);
  g_free (op->uuid);
  g_free (op->xml);
  g_free (op);
}

static VmceCarryOp *
vmce_carry_op_new (VmceLibvirtCarry *self, VmceVm *vm)
{
  VmceCarryOp *op = g_new0 (VmceCarryOp, 1);

  op->carry = self;
  virConnectRef (self->conn);
  op->conn = self->conn;
  op->name = g_strdup (vmce_vm_get_name (vm));
  op->uuid = g_strdup (vmce_vm_get_uuid (vm));
  return op;
}

/* In a worker thread: the op's domain, or NULL with the task returned */
static virDomainPtr
vmce_carry_domain (GTask *task, VmceCarryOp *op)
{
  virDomainPtr dom = virDomainLookupByUUIDString (op->conn, op->uuid);

  if (dom == NULL)
    g_task_return_new_error (task, G_IO_ERROR, G_IO_ERROR_NOT_FOUND, "%s", virGetLastErrorMessage ());
  return dom;
}

static void
vmce_carry_write_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  VmceCarryOp *op = data;
  virDomainPtr dom = vmce_carry_domain (task, op);
  int ret;

  if (dom == NULL)
    return;
  ret = virDomainSetMetadata (dom, VIR_DOMAIN_METADATA_ELEMENT, op->xml, VMCE_POISON_XML_KEY,
                              VMCE_POISON_XML_NS, VIR_DOMAIN_AFFECT_LIVE);
  virDomainFree (dom);
  if (ret < 0) {
    g_task_return_new_error (task, G_IO_ERROR, G_IO_ERROR_FAILED, "%s", virGetLastErrorMessage ());
    return;
  }
  g_task_return_boolean (task, TRUE);
}

static void
vmce_carry_written_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  VmceCarryOp *op = g_task_get_task_data (G_TASK (res));
  VmceLibvirtCarry *self = op->carry;
  g_autoptr(GError) error = NULL;
  VmceVm *vm;

  if (!g_task_propagate_boolean (G_TASK (res), &error)) {
    if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
      return;
    g_warning ("domain %s: cannot write its poisoned pages into its metadata (a migration of it to another "
               "host is refused until they are): %s",
               op->name, error->message);
  } else {
    g_hash_table_insert (self->written, g_strdup (op->name), GUINT_TO_POINTER (op->n_pages + 1));
    vm = vmce_daemon_lookup_vm (self->daemon, op->name, NULL);
    if (vm != NULL)
      vmce_migration_guard_set_domain_holds (vm, op->n_pages);
  }
  g_hash_table_remove (self->writing, op->name);
}

static void
vmce_carry_write (VmceLibvirtCarry *self, VmceVm *vm, GPtrArray *pages)
{
  g_autoptr(GTask) task = g_task_new (NULL, self->cancellable, vmce_carry_written_cb, NULL);
  VmceCarryOp *op = vmce_carry_op_new (self, vm);

  op->n_pages = pages->len;
  op->xml = vmce_poison_xml_build (vmce_vm_get_name (vm), self->by, pages);
  g_hash_table_add (self->writing, g_strdup (op->name));
  g_task_set_task_data (task, op, (GDestroyNotify) vmce_carry_op_free);
  g_task_run_in_thread (task, vmce_carry_write_thread);
}

static gboolean
vmce_carry_poll_cb (gpointer user_data)
{
  VmceLibvirtCarry *self = user_data;
  GPtrArray *vms = vmce_daemon_get_vms (self->daemon);

  for (guint i = 0; self->conn != NULL && i < vms->len; i++) {
    VmceVm *vm = g_ptr_array_index (vms, i);
    g_autoptr(GPtrArray) pages = NULL;
    guint written;

    if (vmce_vm_get_uuid (vm) == NULL || vmce_vm_get_state (vm) != VMCE_VM_READY ||
        g_hash_table_contains (self->writing, vmce_vm_get_name (vm)) ||
        vmce_migration_incoming_is_receiving (vm))
      continue;
    pages = vmce_poison_set_host_pages (vmce_vm_get_poisoned (vm));
    written = GPOINTER_TO_UINT (g_hash_table_lookup (self->written, vmce_vm_get_name (vm)));
    /* (nothing to say for a domain that never had a page) */
    if (written == pages->len + 1 || (written == 0 && pages->len == 0))
      continue;
    vmce_carry_write (self, vm, pages);
  }
  return G_SOURCE_CONTINUE;
}

static void
vmce_carry_read_thread (GTask *task, gpointer source, gpointer data, GCancellable *cancellable)
{
  VmceCarryOp *op = data;
  virDomainPtr dom = vmce_carry_domain (task, op);

  if (dom == NULL)
    return;
  op->xml = virDomainGetMetadata (dom, VIR_DOMAIN_METADATA_ELEMENT, VMCE_POISON_XML_NS, VIR_DOMAIN_AFFECT_LIVE);
  if (op->xml == NULL && virGetLastErrorCode () != VIR_ERR_NO_DOMAIN_METADATA) {
    g_task_return_new_error (task, G_IO_ERROR, G_IO_ERROR_FAILED, "%s", virGetLastErrorMessage ());
    virDomainFree (dom);
    return;
  }
  virDomainFree (dom);
  g_task_return_boolean (task, TRUE);
}

/* The pages the domain brought that this vmced does not know yet (a vmced
 * restarted has them from its journal and QEMU's page table) */
static void
vmce_carry_read_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  VmceCarryOp *op = g_task_get_task_data (G_TASK (res));
  VmceLibvirtCarry *self = op->carry;
  g_autoptr(GError) error = NULL;
  g_autoptr(GPtrArray) pages = NULL;
  g_autoptr(GPtrArray) news = g_ptr_array_new ();
  g_autofree gchar *from = NULL;
  g_autofree gchar *who = NULL;
  VmceVm *vm;

  if (!g_task_propagate_boolean (G_TASK (res), &error)) {
    if (g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CANCELLED))
      return;
    g_warning ("domain %s: cannot read its metadata: %s", op->name, error->message);
  }
  g_hash_table_remove (self->writing, op->name);
  if (error != NULL)
    return;
  vm = vmce_daemon_lookup_vm (self->daemon, op->name, NULL);
  if (op->xml == NULL || vm == NULL || vmce_vm_get_state (vm) != VMCE_VM_READY)
    return;
  pages = vmce_poison_xml_parse (op->xml, &from, &error);
  if (pages == NULL) {
    g_warning ("domain %s: %s", op->name, error->message);
    return;
  }
  vmce_migration_guard_set_domain_holds (vm, pages->len);
  for (guint i = 0; i < pages->len; i++) {
    VmcePoisonedPage *p = g_ptr_array_index (pages, i);
    if (vmce_vm_find_poisoned (vm, p->gpa) == NULL)
      g_ptr_array_add (news, p);
  }
  /* pages to poison here: once they are, the list is written again, as
   * this vmced's (a drain waits for that before it lets the guest run) */
  if (news->len == 0) {
    g_hash_table_insert (self->written, g_strdup (op->name), GUINT_TO_POINTER (pages->len + 1));
    return;
  }
  who = g_strdup_printf ("domain %s as it came (its vmce metadata, from %s)", op->name, from);
  vmce_migration_incoming_receive (vm, who, news);
}

void
vmce_libvirt_carry_attached (VmceLibvirtCarry *self, VmceVm *vm, virDomainPtr dom)
{
  g_autoptr(GTask) task = NULL;
  VmceCarryOp *op;

  if (self->conn == NULL || vmce_vm_get_uuid (vm) == NULL)
    return;
  /* a new QEMU of the domain (one that came back, say) holds nothing yet,
   * and its metadata is not written over before it is read */
  g_hash_table_remove (self->written, vmce_vm_get_name (vm));
  g_hash_table_add (self->writing, g_strdup (vmce_vm_get_name (vm)));
  task = g_task_new (NULL, self->cancellable, vmce_carry_read_cb, NULL);
  op = vmce_carry_op_new (self, vm);
  g_task_set_task_data (task, op, (GDestroyNotify) vmce_carry_op_free);
  g_task_run_in_thread (task, vmce_carry_read_thread);
}

VmceLibvirtCarry *
vmce_libvirt_carry_new (VmceDaemon *daemon)
{
  VmceLibvirtCarry *self = g_new0 (VmceLibvirtCarry, 1);

  self->daemon = daemon;
  self->written = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->writing = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);
  self->cancellable = g_cancellable_new ();
  self->by = g_uuid_string_random ();
  self->poll_source = g_timeout_add (VMCE_CARRY_POLL_MS, vmce_carry_poll_cb, self);
  return self;
}

void
vmce_libvirt_carry_set_connection (VmceLibvirtCarry *self, virConnectPtr conn)
{
  self->conn = conn;
  /* a libvirtd restarted keeps the live metadata; a domain taken again
   * reads it back (attached) */
}

void
vmce_libvirt_carry_free (VmceLibvirtCarry *self)
{
  if (self == NULL)
    return;
  g_cancellable_cancel (self->cancellable);
  g_clear_handle_id (&self->poll_source, g_source_remove);
  g_hash_table_unref (self->written);
  g_hash_table_unref (self->writing);
  g_object_unref (self->cancellable);
  g_free (self->by);
  g_free (self);
}
