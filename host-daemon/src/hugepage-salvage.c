/*
 * hugepage = salvage: a lost huge page costs the guest its raw poisoned
 * 4 KiB page(s), not 2 MiB or 1 GiB.
 *
 * Why this works without the kernel's help: since Linux 6.4 ("hugetlbfs:
 * improve read HWPOISON hugepage", adjust_range_hwpoison()) read() of a
 * hwpoisoned hugetlbfs page returns its healthy 4 KiB pieces and EIO only
 * at the raw poisoned ones, and the page stays in the file's page cache
 * (me_huge_page() keeps it). What the kernel does not do is map those
 * pieces again: a hugetlbfs mapping is all or nothing per huge page (the
 * high-granularity mapping series was never merged), and vmced's 4 KiB
 * mmap() inside one fails (ENOMEM on 6.1, EINVAL on 6.12). So vmced maps
 * fresh 4 KiB memory over the whole huge range instead:
 *  - the new memory is made elsewhere in QEMU and filled first, then moved
 *    over the range with one mremap(MREMAP_FIXED): no thread ever sees the
 *    range empty or half-filled, and the fill needs no thread held;
 *  - shared where QEMU's mapping was (shmem, as a MAP_SHARED file is), so
 *    what QEMU assumes of share=on still holds in this process;
 *  - a thread that touches the range meanwhile faults (the kernel's
 *    hwpoison entry, or the simulator's PROT_NONE) and is held at that
 *    stop until the new memory is in, then tries again: QEMU never reads
 *    the loss, and no vCPU gets a machine check for a page that is kept;
 *  - under KVM the memory slot keeps its host address; mremap() runs the
 *    MMU notifiers, and KVM faults the new pages in from that address;
 *  - the raw page(s) stay poisoned: the kernel's poison marker
 *    (UFFDIO_POISON, poison-mark.c) or, for vmced's own simulated errors
 *    under TCG and kernels without it, PROT_NONE.
 * Where it cannot work (not a hugetlbfs file, a host kernel before 6.4,
 * not enough memory for the copy, the file cannot be opened) the loss is
 * handled as `all`, and the journal says why.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define G_LOG_DOMAIN "vmce-hugepage"

#include <errno.h>
#include <fcntl.h>
#include <gio/gio.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "forward.h"
#include "hugepage-salvage.h"
#include "json-util.h"
#include "log-writer.h"
#include "page-replace.h"
#include "page.h"
#include "poison-mark.h"
#include "poison-set.h"
#include "remote-syscall.h"
#include "sim-poison.h"

/* read() and process_vm_writev() in pieces of this size: the copy's own
 * memory stays small whatever the huge page's size */
#define VMCE_SALVAGE_CHUNK (G_GUINT64_CONSTANT (2) << 20)

static guint64 vmce_salvage_reserve = G_GUINT64_CONSTANT (256) << 20;

typedef struct {
  VmceVm *vm;
  guint64 base, size;
  guint lsb;
  guint64 about_seq;
  guint64 hit_gpa;
  gboolean hit_told;
  gboolean simulated;
  gint64 stop_us;  /* monotonic, the signal-stop that showed the loss */
  GArray *pages;   /* of VmceGuestPage: the loss */
  GArray *more;    /* guint64 HVAs of further errors in the range, meanwhile */
  GArray *held;    /* pid_t: threads that faulted in the range, meanwhile */
} VmceSalvage;

typedef struct {
  guint64 base, size;
  guint lost;
  gchar *backing;
} VmceSalvaged;

typedef struct {
  GHashTable *active; /* base HVA (guint64) -> VmceSalvage, not owned */
  GArray *done;       /* of VmceSalvaged */
} VmceSalvager;

GQuark vmce_salvager_quark (void);
G_DEFINE_QUARK (vmce-salvager, vmce_salvager)

static void
vmce_salvaged_clear (gpointer data)
{
  g_free (((VmceSalvaged *) data)->backing);
}

static void
vmce_salvager_free (VmceSalvager *s)
{
  g_hash_table_unref (s->active);
  g_array_unref (s->done);
  g_free (s);
}

static VmceSalvager *
vmce_salvager_new (void)
{
  VmceSalvager *s = g_new0 (VmceSalvager, 1);

  s->active = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, NULL);
  s->done = g_array_new (FALSE, FALSE, sizeof (VmceSalvaged));
  g_array_set_clear_func (s->done, vmce_salvaged_clear);
  return s;
}

static VmceSalvager *
vmce_salvager (VmceVm *vm)
{
  return vmce_vm_ensure_layer_data (vm, vmce_salvager_quark (), (VmceLayerNewFunc) vmce_salvager_new,
                                    (GDestroyNotify) vmce_salvager_free);
}

void
vmce_hugepage_salvage_set_reserve (guint64 reserve_bytes)
{
  vmce_salvage_reserve = reserve_bytes;
}

/* --- pure ------------------------------------------------------------------------ */

gboolean
vmce_kernel_release_at_least (const gchar *release, guint major, guint minor)
{
  guint ma = 0, mi = 0;

  if (release == NULL || sscanf (release, "%u.%u", &ma, &mi) != 2)
    return FALSE;
  return ma > major || (ma == major && mi >= minor);
}

gchar *
vmce_hugepage_salvage_refusal (const VmceVma *vma,
                               guint64 size,
                               gboolean simulated,
                               const gchar *kernel_release,
                               guint64 mem_available,
                               guint64 reserve)
{
  if (vma == NULL)
    return g_strdup ("the range is not mapped in QEMU");
  if (!vma->hugetlb)
    return g_strdup_printf ("not hugetlbfs memory (%s): the other pieces of a lost transparent huge page "
                            "are gone with it",
                            vma->path != NULL ? vma->path : "anonymous memory");
  /* MAP_HUGETLB without a file: nothing to read the healthy pieces from */
  if (vma->path == NULL || g_str_has_prefix (vma->path, "/anon_hugepage"))
    return g_strdup ("anonymous hugetlb memory, no file to read the healthy pieces from");
  if (!simulated && !vmce_kernel_release_at_least (kernel_release, 6, 4))
    return g_strdup_printf ("the host kernel (%s) cannot read a poisoned huge page back piece by piece "
                            "(Linux 6.4)",
                            kernel_release != NULL ? kernel_release : "unknown");
  if (mem_available < size + reserve)
    return g_strdup_printf ("not enough free memory for the copy: %" G_GUINT64_FORMAT " MiB and %"
                            G_GUINT64_FORMAT " MiB kept free, %" G_GUINT64_FORMAT " MiB available",
                            size >> 20, reserve >> 20, mem_available >> 20);
  return NULL;
}

/* --- the host as it is ------------------------------------------------------------ */

static guint64
vmce_mem_available (void)
{
  g_autofree gchar *text = NULL;
  const gchar *line;
  guint64 kb = 0;

  if (!g_file_get_contents ("/proc/meminfo", &text, NULL, NULL))
    return 0;
  line = strstr (text, "MemAvailable:");
  if (line == NULL || sscanf (line, "MemAvailable: %" G_GUINT64_FORMAT, &kb) != 1)
    return 0;
  return kb << 10;
}

gchar *
vmce_hugepage_salvage_check (VmceVm *vm, guint64 base, guint64 size, gboolean simulated)
{
  g_autoptr(VmceVmaTable) vmas = NULL;
  g_autoptr(GError) error = NULL;
  struct utsname u;

  vmas = vmce_vma_table_read (vmce_vm_get_pid (vm), &error);
  if (vmas == NULL)
    return g_strdup_printf ("cannot read QEMU's mappings: %s", error->message);
  if (uname (&u) < 0)
    memset (&u, 0, sizeof u);
  return vmce_hugepage_salvage_refusal (vmce_vma_table_lookup (vmas, base), size, simulated, u.release,
                                        vmce_mem_available (), vmce_salvage_reserve);
}

/* --- the salvage ----------------------------------------------------------------- */

static void
vmce_salvage_free (VmceSalvage *s)
{
  g_array_unref (s->pages);
  g_array_unref (s->more);
  g_array_unref (s->held);
  vmce_vm_unref (s->vm);
  g_free (s);
}

/* Every thread held meanwhile tries its access again */
static void
vmce_salvage_let_go (VmceSalvage *s)
{
  VmcePtraceWatch *watch = vmce_vm_get_watch (s->vm);

  for (guint i = 0; i < s->held->len && watch != NULL; i++)
    vmce_ptrace_watch_resume (watch, g_array_index (s->held, pid_t, i), 0);
  g_array_set_size (s->held, 0);
}

static gboolean
vmce_salvage_write (pid_t pid, guint64 at, const guint8 *buf, gsize len, GError **error)
{
  struct iovec local = { .iov_base = (void *) buf, .iov_len = len };
  struct iovec remote = { .iov_base = GSIZE_TO_POINTER (at), .iov_len = len };
  ssize_t n = process_vm_writev (pid, &local, 1, &remote, 1, 0);

  if (n != (ssize_t) len) {
    int errsv = errno;
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv),
                 "cannot write the salvaged data into QEMU at 0x%" G_GINT64_MODIFIER "x: %s", at,
                 n < 0 ? g_strerror (errsv) : "short write");
    return FALSE;
  }
  return TRUE;
}

/* Whether the loss's raw page (simulated: the page the error named) */
static gboolean
vmce_salvage_is_raw_sim (VmceSalvage *s, guint64 hva, guint64 hit_hva)
{
  if (hva == hit_hva)
    return TRUE;
  for (guint i = 0; i < s->more->len; i++)
    if (g_array_index (s->more, guint64, i) == hva)
      return TRUE;
  return FALSE;
}

/* Reads the range's healthy pieces from @fd (at @file_off) into QEMU's
 * memory at @to; the raw pages (EIO, or simulated) go into @raw */
static gboolean
vmce_salvage_copy (VmceSalvage *s, int fd, guint64 file_off, guint64 to, guint64 hit_hva, GArray *raw,
                   guint64 *bytes, GError **error)
{
  pid_t pid = vmce_vm_get_pid (s->vm);
  guint64 chunk = MIN (s->size, VMCE_SALVAGE_CHUNK);
  g_autofree guint8 *buf = g_try_malloc (chunk);

  if (buf == NULL) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_NO_SPACE, "cannot allocate %" G_GUINT64_FORMAT " bytes", chunk);
    return FALSE;
  }
  *bytes = 0;
  for (guint64 off = 0; off < s->size; off += chunk) {
    gboolean whole = TRUE;
    ssize_t n;

    for (guint64 p = off; p < off + chunk && s->simulated; p += VMCE_PAGE_SIZE)
      whole = whole && !vmce_salvage_is_raw_sim (s, s->base + p, hit_hva);
    n = whole ? pread (fd, buf, chunk, (off_t) (file_off + off)) : 0;
    if (n == (ssize_t) chunk) {
      if (!vmce_salvage_write (pid, to + off, buf, chunk, error))
        return FALSE;
      *bytes += chunk;
      continue;
    }
    /* a short read stops before a raw poisoned page: page by page here */
    for (guint64 p = off; p < off + chunk; p += VMCE_PAGE_SIZE) {
      guint64 hva = s->base + p;

      if (s->simulated && vmce_salvage_is_raw_sim (s, hva, hit_hva)) {
        g_array_append_val (raw, hva);
        continue;
      }
      n = pread (fd, buf, VMCE_PAGE_SIZE, (off_t) (file_off + p));
      if (n == (ssize_t) VMCE_PAGE_SIZE) {
        if (!vmce_salvage_write (pid, to + p, buf, VMCE_PAGE_SIZE, error))
          return FALSE;
        *bytes += VMCE_PAGE_SIZE;
      } else if (n < 0 && errno == EIO) {
        g_array_append_val (raw, hva);
      } else {
        int errsv = errno;
        g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED,
                     "reading the backing file at 0x%" G_GINT64_MODIFIER "x: %s", file_off + p,
                     n < 0 ? g_strerror (errsv) : "short read");
        return FALSE;
      }
    }
  }
  if (raw->len * VMCE_PAGE_SIZE >= s->size) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                 "the host kernel gave none of it back (EIO for every page): it cannot read a poisoned "
                 "huge page piece by piece");
    return FALSE;
  }
  return TRUE;
}

/* Marks the raw pages poisoned in the new memory; @how says how */
static void
vmce_salvage_mark_raw (VmceSalvage *s, pid_t tid, GArray *raw, const gchar **how)
{
  VmceVm *vm = s->vm;
  gboolean kvm = vmce_vm_is_kvm (vm);

  *how = "none";
  for (guint i = 0; i < raw->len; i++) {
    guint64 hva = g_array_index (raw, guint64, i);
    guint64 gpa = 0;
    g_autoptr(GError) error = NULL;

    for (guint k = 0; k < s->pages->len; k++)
      if (g_array_index (s->pages, VmceGuestPage, k).hva == hva)
        gpa = g_array_index (s->pages, VmceGuestPage, k).gpa;
    /* vmced's own error under TCG stays vmced's: a touch is a SIGSEGV it
     * rewrites, as before the salvage */
    if (s->simulated && !kvm) {
      if (vmce_remote_mprotect (vmce_vm_get_pid (vm), tid, hva, VMCE_PAGE_SIZE, PROT_NONE, &error)) {
        vmce_sim_adopt_page (vm, hva, gpa);
        *how = "PROT_NONE (simulated)";
        continue;
      }
    } else if (vmce_poison_mark_or_protect (vmce_vm_get_pid (vm), tid, hva, VMCE_PAGE_SIZE, !kvm, how, &error)) {
      if (g_str_has_prefix (*how, "PROT_NONE"))
        vmce_sim_adopt_page (vm, hva, gpa);
      else if (s->simulated)
        vmce_sim_adopt_marked_page (vm, hva, gpa);
      continue;
    }
    /* the guest was told of it: it does not read it; QEMU could */
    g_warning ("vm %s: the raw poisoned page at HVA 0x%" G_GINT64_MODIFIER "x is a zeroed page now: %s",
               vmce_vm_get_name (vm), hva, error->message);
    *how = "not marked (a zeroed page)";
  }
}

static JsonNode *
vmce_salvage_record (VmceSalvage *s, GArray *raw, guint64 bytes, guint told, gint64 us, const gchar *backing,
                     const gchar *how, const gchar *mark, const gchar *fallback_why)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();

  json_builder_begin_object (b);
  vmce_vm_begin_record (s->vm, b, "huge-page-salvage");
  vmce_json_builder_add_hex (b, "hva", s->base);
  vmce_json_builder_add_int (b, "lsb", s->lsb);
  vmce_json_builder_add_int (b, "size", (gint64) s->size);
  vmce_json_builder_add_int (b, "about_seq", (gint64) s->about_seq);
  vmce_json_builder_add_string (b, "source", s->simulated ? "simulated" : "kernel");
  if (fallback_why != NULL) {
    vmce_json_builder_add_string (b, "fallback", "all");
    vmce_json_builder_add_string (b, "detail", fallback_why);
  } else {
    vmce_json_builder_add_int (b, "salvaged", (gint64) (bytes / VMCE_PAGE_SIZE));
    vmce_json_builder_add_int (b, "bytes", (gint64) bytes);
    json_builder_set_member_name (b, "lost");
    json_builder_begin_array (b);
    for (guint i = 0; i < raw->len; i++) {
      guint64 hva = g_array_index (raw, guint64, i);
      for (guint k = 0; k < s->pages->len; k++) {
        const VmceGuestPage *p = &g_array_index (s->pages, VmceGuestPage, k);
        if (p->hva != hva)
          continue;
        json_builder_begin_object (b);
        vmce_json_builder_add_hex (b, "gpa", p->gpa);
        vmce_json_builder_add_hex (b, "hva", p->hva);
        json_builder_end_object (b);
      }
    }
    json_builder_end_array (b);
    vmce_json_builder_add_int (b, "told", told);
    vmce_json_builder_add_string (b, "backing", backing);
    vmce_json_builder_add_string (b, "how", how);
    vmce_json_builder_add_string (b, "mark", mark);
  }
  /* from the signal to the threads let go */
  vmce_json_builder_add_int (b, "us", us);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

/* Falls back to `all`: every page of the loss but those told, told */
static void
vmce_salvage_fall_back (VmceSalvage *s, const gchar *why)
{
  g_autoptr(JsonNode) record = NULL;
  guint told = 0;

  for (guint i = 0; i < s->pages->len; i++) {
    guint64 gpa = g_array_index (s->pages, VmceGuestPage, i).gpa;
    if (s->hit_told && gpa == (s->hit_gpa & VMCE_PAGE_MASK))
      continue;
    vmce_forward_tell (s->vm, gpa, s->about_seq);
    told++;
  }
  vmce_log_record (VMCE_LOG_HUGE_PAGE_LOSS, vmce_vm_get_name (s->vm), &s->hit_gpa, s->about_seq,
                   "vm %s: the %" G_GUINT64_FORMAT " KiB host page at HVA 0x%" G_GINT64_MODIFIER
                   "x cannot be salvaged: %s; handled as hugepage = all: %u more to tell",
                   vmce_vm_get_name (s->vm), s->size / 1024, s->base, why, told);
  record = vmce_salvage_record (s, NULL, 0, told, g_get_monotonic_time () - s->stop_us, NULL, NULL, NULL, why);
  vmce_vm_emit_record (s->vm, "HUGE_PAGE_SALVAGE", record);
}

static gboolean
vmce_salvage_run (VmceSalvage *s, pid_t tid, GArray *raw, guint64 *bytes, gchar **backing, gchar **how,
                  GError **error)
{
  pid_t pid = vmce_vm_get_pid (s->vm);
  g_autoptr(VmceVmaTable) vmas = NULL;
  g_autofree gchar *refusal = NULL;
  g_autofree gchar *file = NULL;
  g_autoptr(GError) local = NULL;
  const VmceVma *vma;
  guint64 hit_hva = 0, to = 0, file_off;
  struct utsname u;
  int fd;
  gboolean ok;

  vmas = vmce_vma_table_read (pid, error);
  if (vmas == NULL)
    return FALSE;
  vma = vmce_vma_table_lookup (vmas, s->base);
  if (uname (&u) < 0)
    memset (&u, 0, sizeof u);
  refusal = vmce_hugepage_salvage_refusal (vma, s->size, s->simulated, u.release, vmce_mem_available (),
                                           vmce_salvage_reserve);
  if (refusal != NULL) {
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED, refusal);
    return FALSE;
  }
  for (guint k = 0; k < s->pages->len; k++)
    if (g_array_index (s->pages, VmceGuestPage, k).gpa == (s->hit_gpa & VMCE_PAGE_MASK))
      hit_hva = g_array_index (s->pages, VmceGuestPage, k).hva;
  *backing = vmce_vma_describe (vma);
  /* map_files opens what QEMU mapped, a deleted file and a memfd too */
  file = g_strdup_printf ("/proc/%d/map_files/%" G_GINT64_MODIFIER "x-%" G_GINT64_MODIFIER "x", pid, vma->start,
                          vma->end);
  fd = open (file, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int errsv = errno;
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv), "cannot open the backing file %s (%s): %s",
                 vma->path, file, g_strerror (errsv));
    return FALSE;
  }
  file_off = vma->offset + (s->base - vma->start);
  if (!vmce_remote_map_anon (pid, tid, s->size, vma->shared, &to, error)) {
    close (fd);
    return FALSE;
  }
  ok = vmce_salvage_copy (s, fd, file_off, to, hit_hva, raw, bytes, error);
  close (fd);
  if (ok)
    ok = vmce_remote_mremap_fixed (pid, tid, to, s->size, s->base, error);
  if (!ok) {
    if (!vmce_remote_munmap (pid, tid, to, s->size, &local))
      g_warning ("vm %s: %s", vmce_vm_get_name (s->vm), local->message);
    return FALSE;
  }
  *how = g_strdup_printf ("%s anonymous memory in 4 KiB pages, filled from the file and moved over the range "
                          "(mremap)",
                          vma->shared ? "shared" : "private");
  return TRUE;
}

static void
vmce_salvage_op (VmcePtraceWatch *watch, pid_t tid, gpointer user_data)
{
  VmceSalvage *s = user_data;
  VmceVm *vm = s->vm;
  VmceSalvager *sv = vmce_salvager (vm);
  g_autoptr(GArray) raw = g_array_new (FALSE, FALSE, sizeof (guint64));
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) record = NULL;
  g_autofree gchar *backing = NULL;
  g_autofree gchar *how = NULL;
  const gchar *mark = NULL;
  GHashTable *set = vmce_vm_get_poisoned (vm);
  guint64 bytes = 0;
  guint told = 0;
  gint64 us;
  VmceSalvaged done = { 0 };

  if (!vmce_salvage_run (s, tid, raw, &bytes, &backing, &how, &error)) {
    vmce_salvage_fall_back (s, error->message);
    g_hash_table_remove (sv->active, &s->base);
    vmce_salvage_let_go (s);
    vmce_salvage_free (s);
    return;
  }
  /* what vmced's simulator had taken away is gone with the old mapping */
  for (guint64 off = 0; off < s->size; off += VMCE_PAGE_SIZE)
    vmce_sim_forget_page (vm, s->base + off, "the huge page was salvaged");
  vmce_salvage_mark_raw (s, tid, raw, &mark);

  /* the pages kept are no longer bad on the host; the raw ones (and the
   * one the guest was told of) stay */
  for (guint i = 0; i < s->pages->len; i++) {
    const VmceGuestPage *p = &g_array_index (s->pages, VmceGuestPage, i);
    gboolean lost = FALSE;

    for (guint k = 0; k < raw->len && !lost; k++)
      lost = g_array_index (raw, guint64, k) == p->hva;
    if (lost) {
      VmcePoisonedPage *pp = vmce_poison_set_lookup (set, p->gpa);
      if (p->gpa != (s->hit_gpa & VMCE_PAGE_MASK) && (pp == NULL || !vmce_poisoned_page_told (pp))) {
        vmce_forward_tell (vm, p->gpa, s->about_seq);
        told++;
      }
    } else if (p->gpa != (s->hit_gpa & VMCE_PAGE_MASK)) {
      guint64 gpa = p->gpa;
      g_hash_table_remove (set, &gpa);
    }
  }
  us = g_get_monotonic_time () - s->stop_us;
  vmce_log_record (VMCE_LOG_HUGE_PAGE_LOSS, vmce_vm_get_name (vm), &s->hit_gpa, s->about_seq,
                   "vm %s: the %" G_GUINT64_FORMAT " KiB host page at HVA 0x%" G_GINT64_MODIFIER
                   "x salvaged in %" G_GINT64_FORMAT " us: %" G_GUINT64_FORMAT " KiB kept, %u page(s) lost "
                   "(%s), %u more told; the range is in 4 KiB pages now",
                   vmce_vm_get_name (vm), s->size / 1024, s->base, us, bytes / 1024, raw->len, mark, told);
  record = vmce_salvage_record (s, raw, bytes, told, us, backing, how, mark, NULL);
  vmce_vm_emit_record (vm, "HUGE_PAGE_SALVAGE", record);
  done.base = s->base;
  done.size = s->size;
  done.lost = raw->len;
  done.backing = g_steal_pointer (&backing);
  g_array_append_val (sv->done, done);
  g_hash_table_remove (sv->active, &s->base);
  vmce_salvage_let_go (s);
  vmce_salvage_free (s);
}

static void
vmce_salvage_op_destroy (gpointer user_data)
{
  VmceSalvage *s = user_data;

  /* QEMU's main thread is gone: so is QEMU */
  g_hash_table_remove (vmce_salvager (s->vm)->active, &s->base);
  vmce_salvage_let_go (s);
  vmce_salvage_free (s);
}

void
vmce_hugepage_salvage_start (VmceVm *vm, const VmceMceEvent *ev, guint64 base, guint64 size, GArray *pages)
{
  VmceSalvager *sv = vmce_salvager (vm);
  VmceSalvage *s;

  if (g_hash_table_contains (sv->active, &base) || vmce_vm_get_watch (vm) == NULL)
    return;
  s = g_new0 (VmceSalvage, 1);
  s->vm = vmce_vm_ref (vm);
  s->base = base;
  s->size = size;
  s->lsb = ev->lsb;
  s->about_seq = ev->seq;
  s->hit_gpa = ev->gpa;
  s->hit_told = ev->result == VMCE_RESULT_INJECTED;
  s->simulated = g_strcmp0 (ev->source, "simulated") == 0;
  s->stop_us = ev->stop_us != 0 ? ev->stop_us : g_get_monotonic_time ();
  s->pages = g_array_ref (pages);
  s->more = g_array_new (FALSE, FALSE, sizeof (guint64));
  s->held = g_array_new (FALSE, FALSE, sizeof (pid_t));
  g_hash_table_insert (sv->active, g_memdup2 (&base, sizeof base), s);
  vmce_ptrace_watch_call_stopped (vmce_vm_get_watch (vm), vmce_vm_get_pid (vm), vmce_salvage_op, s,
                                  vmce_salvage_op_destroy);
}

static VmceSalvage *
vmce_salvage_find (VmceSalvager *sv, guint64 hva)
{
  GHashTableIter iter;
  gpointer value;

  g_hash_table_iter_init (&iter, sv->active);
  while (g_hash_table_iter_next (&iter, NULL, &value)) {
    VmceSalvage *s = value;
    if (hva >= s->base && hva < s->base + s->size)
      return s;
  }
  return NULL;
}

gboolean
vmce_hugepage_salvage_fault (VmceVm *vm, pid_t tid, const siginfo_t *info)
{
  VmceSalvager *sv = vmce_vm_get_layer_data (vm, vmce_salvager_quark ());
  guint64 page = (guint64) (guintptr) info->si_addr & VMCE_PAGE_MASK;
  VmceSalvage *s;

  /* a fault has an address; an AO (or vmced's stand-in for it) is no fault */
  if (sv == NULL || !(info->si_signo == SIGSEGV ||
                      (info->si_signo == SIGBUS && (info->si_code == BUS_MCEERR_AR || info->si_code == BUS_ADRERR))))
    return FALSE;
  s = vmce_salvage_find (sv, page);
  if (s != NULL) {
    g_debug ("vm %s: thread %d touched HVA 0x%" G_GINT64_MODIFIER "x of a huge page being salvaged: held",
             vmce_vm_get_name (vm), tid, page);
    g_array_append_val (s->held, tid);
    return TRUE;
  }
  for (guint i = 0; i < sv->done->len; i++) {
    const VmceSalvaged *d = &g_array_index (sv->done, VmceSalvaged, i);
    if (page >= d->base && page < d->base + d->size && vmce_page_is_readable (vmce_vm_get_pid (vm), page)) {
      vmce_ptrace_watch_resume (vmce_vm_get_watch (vm), tid, 0);
      return TRUE;
    }
  }
  return FALSE;
}

void
vmce_hugepage_salvage_on_event (VmceVm *vm, const VmceMceEvent *ev)
{
  VmceSalvager *sv = vmce_vm_get_layer_data (vm, vmce_salvager_quark ());
  VmceSalvage *s = sv != NULL ? vmce_salvage_find (sv, ev->hva & VMCE_PAGE_MASK) : NULL;
  guint64 page = ev->hva & VMCE_PAGE_MASK;

  if (s == NULL || ev->seq == s->about_seq || g_strcmp0 (ev->source, "huge-page") == 0)
    return;
  g_array_append_val (s->more, page);
}

void
vmce_hugepage_salvage_cancel_all (VmceVm *vm)
{
  VmceSalvager *sv = vmce_vm_get_layer_data (vm, vmce_salvager_quark ());
  GHashTableIter iter;
  gpointer value;

  if (sv == NULL)
    return;
  g_hash_table_iter_init (&iter, sv->active);
  while (g_hash_table_iter_next (&iter, NULL, &value))
    vmce_salvage_let_go (value);
}

void
vmce_hugepage_salvage_to_json (VmceVm *vm, JsonBuilder *b)
{
  VmceSalvager *sv = vmce_vm_get_layer_data (vm, vmce_salvager_quark ());

  json_builder_set_member_name (b, "salvaged");
  json_builder_begin_array (b);
  for (guint i = 0; sv != NULL && i < sv->done->len; i++) {
    const VmceSalvaged *d = &g_array_index (sv->done, VmceSalvaged, i);
    json_builder_begin_object (b);
    vmce_json_builder_add_hex (b, "hva", d->base);
    vmce_json_builder_add_int (b, "size", (gint64) d->size);
    vmce_json_builder_add_int (b, "lost_pages", d->lost);
    vmce_json_builder_add_string (b, "was", d->backing);
    /* what it costs: the range takes 4 KiB TLB entries now */
    vmce_json_builder_add_string (b, "now", "4 KiB pages (no longer huge-page backed)");
    json_builder_end_object (b);
  }
  json_builder_end_array (b);
}
