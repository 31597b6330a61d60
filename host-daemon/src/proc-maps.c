/*
 * The mappings of a process (see proc-maps.h).
 *
 * /proc/PID/maps, not smaps: smaps walks the page tables of every mapping
 * to count resident pages, which for a guest of many GiB costs far more
 * than the replacement it would inform. What maps does not say (whether a
 * file mapping is hugetlbfs, and its page size) is asked of the one
 * mapping that needs it, through /proc/PID/map_files.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-ptrace"

#include <errno.h>
#include <gio/gio.h>
#include <stdio.h>
#include <string.h>
#include <sys/vfs.h>

#include "page.h"
#include "proc-maps.h"

#ifndef HUGETLBFS_MAGIC
#define HUGETLBFS_MAGIC 0x958458f6
#endif

struct _VmceVmaTable {
  pid_t pid;
  GArray *vmas; /* of VmceVma, sorted by start */
};

static void
vmce_vma_clear (gpointer data)
{
  VmceVma *vma = data;

  g_free (vma->path);
}

/* "55cc68ab9000-55cc68abb000 rw-s 00000000 00:1a 1234   /dev/shm/ram (deleted)" */
static gboolean
vmce_vma_parse_line (const gchar *line, VmceVma *vma)
{
  guint64 start, end, offset;
  char perms[5] = { 0 };
  int n = 0;
  const gchar *path;

  if (sscanf (line, "%" G_GINT64_MODIFIER "x-%" G_GINT64_MODIFIER "x %4s %" G_GINT64_MODIFIER
                    "x %*s %*s%n",
              &start, &end, perms, &offset, &n) != 4 ||
      end <= start || strlen (perms) != 4)
    return FALSE;
  memset (vma, 0, sizeof *vma);
  vma->start = start;
  vma->end = end;
  vma->offset = offset;
  vma->readable = perms[0] == 'r';
  vma->writable = perms[1] == 'w';
  vma->shared = perms[3] == 's';
  vma->page_size = VMCE_PAGE_SIZE;
  path = line + n;
  while (*path == ' ' || *path == '\t')
    path++;
  /* [heap], [stack], [vdso]: not files; the kernel names anonymous
   * hugetlb memory "/anon_hugepage (deleted)" */
  if (*path != '\0' && *path != '[')
    vma->path = g_strdup (path);
  vma->hugetlb = vma->path != NULL && g_str_has_prefix (vma->path, "/anon_hugepage");
  return TRUE;
}

VmceVmaTable *
vmce_vma_table_parse (const gchar *text, pid_t pid, GError **error)
{
  g_autoptr(VmceVmaTable) self = g_new0 (VmceVmaTable, 1);
  g_auto(GStrv) lines = g_strsplit (text, "\n", -1);

  self->pid = pid;
  self->vmas = g_array_new (FALSE, TRUE, sizeof (VmceVma));
  g_array_set_clear_func (self->vmas, vmce_vma_clear);
  for (guint i = 0; lines[i] != NULL; i++) {
    VmceVma vma;

    if (lines[i][0] == '\0')
      continue;
    if (!vmce_vma_parse_line (lines[i], &vma)) {
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                   "line %u of the process's maps is not a mapping: %.80s", i + 1, lines[i]);
      return NULL;
    }
    /* the kernel lists them in address order, without overlap */
    if (self->vmas->len > 0 &&
        g_array_index (self->vmas, VmceVma, self->vmas->len - 1).end > vma.start) {
      vmce_vma_clear (&vma);
      g_set_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA,
                   "line %u of the process's maps overlaps the one before", i + 1);
      return NULL;
    }
    g_array_append_val (self->vmas, vma);
  }
  return g_steal_pointer (&self);
}

VmceVmaTable *
vmce_vma_table_read (pid_t pid, GError **error)
{
  g_autofree gchar *path = g_strdup_printf ("/proc/%d/maps", pid);
  g_autofree gchar *text = NULL;

  if (!g_file_get_contents (path, &text, NULL, error))
    return NULL;
  return vmce_vma_table_parse (text, pid, error);
}

void
vmce_vma_table_free (VmceVmaTable *self)
{
  if (self == NULL)
    return;
  g_array_unref (self->vmas);
  g_free (self);
}

guint
vmce_vma_table_get_n_vmas (VmceVmaTable *self)
{
  return self->vmas->len;
}

/* hugetlbfs (a -mem-path on /dev/hugepages, a hugetlb memfd) has pages of
 * its own size: the statfs block size */
static void
vmce_vma_resolve_hugetlb (VmceVmaTable *self, VmceVma *vma)
{
  g_autofree gchar *link = NULL;
  struct statfs st;

  if (self->pid <= 0 || vma->path == NULL)
    return;
  link = g_strdup_printf ("/proc/%d/map_files/%" G_GINT64_MODIFIER "x-%" G_GINT64_MODIFIER "x",
                          self->pid, vma->start, vma->end);
  if (statfs (link, &st) < 0) {
    g_debug ("statfs %s: %s", link, g_strerror (errno));
    return;
  }
  if ((unsigned long) st.f_type == HUGETLBFS_MAGIC) {
    vma->hugetlb = TRUE;
    vma->page_size = (guint64) st.f_bsize;
  }
}

const VmceVma *
vmce_vma_table_lookup (VmceVmaTable *self, guint64 addr)
{
  guint lo = 0, hi = self->vmas->len;

  while (lo < hi) {
    guint mid = lo + (hi - lo) / 2;
    VmceVma *vma = &g_array_index (self->vmas, VmceVma, mid);

    if (addr < vma->start) {
      hi = mid;
    } else if (addr >= vma->end) {
      lo = mid + 1;
    } else {
      if (vma->path != NULL && vma->page_size == VMCE_PAGE_SIZE)
        vmce_vma_resolve_hugetlb (self, vma);
      return vma;
    }
  }
  return NULL;
}

gchar *
vmce_vma_describe (const VmceVma *vma)
{
  const gchar *how = vma->shared ? "shared" : "private";

  if (vma->hugetlb)
    return g_strdup_printf ("%s hugetlb (%" G_GUINT64_FORMAT " kB pages)%s%s", how,
                            vma->page_size / 1024, vma->path != NULL ? " " : "",
                            vma->path != NULL ? vma->path : "");
  if (vma->path == NULL)
    return g_strdup_printf ("%s anonymous", how);
  /* what shared anonymous memory (memory-backend-ram,share=on) looks like */
  if (g_str_has_prefix (vma->path, "/dev/zero"))
    return g_strdup_printf ("%s anonymous (shmem)", how);
  return g_strdup_printf ("%s file %s", how, vma->path);
}
