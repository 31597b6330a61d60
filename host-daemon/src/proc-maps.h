/*
 * The mappings of a process, from /proc/PID/maps: what backs a host page
 * decides how a poisoned one is replaced.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <glib.h>
#include <sys/types.h>

typedef struct {
  guint64 start;
  guint64 end;
  guint64 offset; /* of @start in the file */
  gboolean readable;
  gboolean writable;
  gboolean shared;
  gchar *path; /* NULL: anonymous memory */
  /* filled in by vmce_vma_table_lookup() for a table read from a process */
  gboolean hugetlb;
  guint64 page_size; /* 4096, or the huge page size */
} VmceVma;

typedef struct _VmceVmaTable VmceVmaTable;

/* The text of /proc/PID/maps; @pid (0 for none) is where hugetlbfs
 * mappings are looked up later */
VmceVmaTable *vmce_vma_table_parse (const gchar *text, pid_t pid, GError **error);
VmceVmaTable *vmce_vma_table_read (pid_t pid, GError **error);
void vmce_vma_table_free (VmceVmaTable *self);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (VmceVmaTable, vmce_vma_table_free)

/* The mapping holding @addr, or NULL */
const VmceVma *vmce_vma_table_lookup (VmceVmaTable *self, guint64 addr);
guint vmce_vma_table_get_n_vmas (VmceVmaTable *self);

/* "anonymous", "shared file /dev/shm/x", "hugetlb 2048 kB file ..." */
gchar *vmce_vma_describe (const VmceVma *vma);
