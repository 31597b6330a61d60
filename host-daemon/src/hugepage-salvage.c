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

/* How long a range whose loss a signal showed waits for vmced's record of
 * it: the AO is forwarded first (an HMP round trip; a TCG L1 is slow) */
#define VMCE_SALVAGE_PENDING_MS 5000

static guint64 vmce_salvage_reserve = G_GUINT64_CONSTANT (256) << 20;

/* A signal-stop handed back to the daemon once the salvage is done */
typedef struct {
  pid_t tid;
  siginfo_t info;
  gint64 stop_us;
  VmceSalvageRedo redo;
  gpointer redo_data;
} VmceDeferredStop;

/* One lost range, from the first stop that showed it until its record is
 * in the journal */
typedef struct {
  VmceVm *vm;
  guint64 base, size;
  GArray *pages;    /* of VmceGuestPage: the guest pages in the range */
  GArray *held;     /* pid_t: threads that faulted in the range before it was done */
  gint64 stop_us;   /* monotonic, the first stop that showed the loss */
  gboolean simulated;
  /* the salvage, once it ran */
  gboolean ran;
  gchar *failure;   /* why it could not be done, or NULL */
  GArray *raw;      /* guint64 HVAs of the pages lost */
  guint64 bytes;
  gchar *backing;
  gchar *how;
  const gchar *mark;
  gint64 us;        /* from the first stop to the threads let go */
  /* while it runs: the fresh memory in QEMU, the file read into it */
  guint64 to;
  int fd;
  guint64 file_off;
  GHashTable *sim_raw; /* vmced's own error: the pages it named (guint64 set) */
  GArray *deferred;    /* of VmceDeferredStop: the host's AOs, told once it is done */
  gboolean letting_go; /* what it held goes on: an AO forwarded may journal its event */
  GError *copy_error;
  /* the loss's journaled event, once in (hugepage-loss.c) */
  gboolean have_event;
  guint lsb;
  guint64 about_seq;
  guint64 hit_gpa;
  gboolean hit_told;
  guint wait_source; /* for the event, once the salvage ran */
} VmceSalvage;

typedef struct {
  guint64 base, size;
  guint lost;
  gchar *backing;
} VmceSalvaged;

typedef struct {
  GHashTable *active; /* base HVA (guint64) -> VmceSalvage, not owned */
  GArray *done;       /* of VmceSalvaged */
  GHashTable *passed; /* base HVAs of ranges not salvaged (refused, or no loss came) */
} VmceSalvager;

static gboolean vmce_salvage_done_at (VmceSalvager *sv, guint64 hva);

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
  g_hash_table_unref (s->passed);
  g_free (s);
}

static VmceSalvager *
vmce_salvager_new (void)
{
  VmceSalvager *s = g_new0 (VmceSalvager, 1);

  s->active = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, NULL);
  s->done = g_array_new (FALSE, FALSE, sizeof (VmceSalvaged));
  s->passed = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, NULL);
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

/* The refusal for @vma as the host is now (uname, MemAvailable) */
static gchar *
vmce_salvage_refusal_now (const VmceVma *vma, guint64 size, gboolean simulated)
{
  struct utsname u;

  if (uname (&u) < 0)
    memset (&u, 0, sizeof u);
  return vmce_hugepage_salvage_refusal (vma, size, simulated, u.release, vmce_mem_available (),
                                        vmce_salvage_reserve);
}

gchar *
vmce_hugepage_salvage_check (VmceVm *vm, guint64 base, guint64 size, gboolean simulated)
{
  g_autoptr(VmceVmaTable) vmas = NULL;
  g_autoptr(GError) error = NULL;

  vmas = vmce_vma_table_read (vmce_vm_get_pid (vm), &error);
  if (vmas == NULL)
    return g_strdup_printf ("cannot read QEMU's mappings: %s", error->message);
  return vmce_salvage_refusal_now (vmce_vma_table_lookup (vmas, base), size, simulated);
}

/* --- the salvage ----------------------------------------------------------------- */

static void
vmce_salvage_close (VmceSalvage *s)
{
  if (s->fd >= 0)
    close (s->fd);
  s->fd = -1;
}

static void
vmce_salvage_free (VmceSalvage *s)
{
  g_clear_handle_id (&s->wait_source, g_source_remove);
  vmce_salvage_close (s);
  g_clear_pointer (&s->sim_raw, g_hash_table_unref);
  g_array_unref (s->deferred);
  g_clear_error (&s->copy_error);
  g_array_unref (s->pages);
  g_array_unref (s->held);
  g_clear_pointer (&s->raw, g_array_unref);
  g_free (s->failure);
  g_free (s->backing);
  g_free (s->how);
  vmce_vm_unref (s->vm);
  g_free (s);
}

/* Every thread held meanwhile tries its access again; the AOs held go
 * their way (@redo: they are forwarded now) or, when vmced lets go of the
 * VM, to QEMU as they came */
static void
vmce_salvage_let_go (VmceSalvage *s, gboolean redo)
{
  VmcePtraceWatch *watch = vmce_vm_get_watch (s->vm);
  g_autoptr(GArray) deferred = s->deferred;

  for (guint i = 0; i < s->held->len && watch != NULL; i++)
    vmce_ptrace_watch_resume (watch, g_array_index (s->held, pid_t, i), 0);
  g_array_set_size (s->held, 0);
  s->deferred = g_array_new (FALSE, FALSE, sizeof (VmceDeferredStop));
  for (guint i = 0; i < deferred->len && watch != NULL; i++) {
    VmceDeferredStop *d = &g_array_index (deferred, VmceDeferredStop, i);
    if (redo)
      d->redo (s->vm, d->tid, &d->info, d->stop_us, d->redo_data);
    else
      vmce_ptrace_watch_resume (watch, d->tid, SIGBUS);
  }
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

static guint64
vmce_salvage_gpa_of (VmceSalvage *s, guint64 hva)
{
  for (guint k = 0; k < s->pages->len; k++)
    if (g_array_index (s->pages, VmceGuestPage, k).hva == hva)
      return g_array_index (s->pages, VmceGuestPage, k).gpa;
  return G_MAXUINT64;
}

static gboolean
vmce_salvage_is_sim_raw (VmceSalvage *s, guint64 hva)
{
  return s->sim_raw != NULL && g_hash_table_contains (s->sim_raw, &hva);
}

/* Reads the range's healthy pieces from @fd (at @file_off) into QEMU's
 * memory at @to; the raw pages (EIO; for vmced's own error, the page it
 * named) go into s->raw. In a worker thread: it touches nothing else of
 * vmced's, and QEMU runs meanwhile (only what reads the range waits). */
static gboolean
vmce_salvage_copy (VmceSalvage *s, int fd, guint64 file_off, guint64 to, GError **error)
{
  pid_t pid = vmce_vm_get_pid (s->vm);
  guint64 chunk = MIN (s->size, VMCE_SALVAGE_CHUNK);
  g_autofree guint8 *buf = g_try_malloc (chunk);

  if (buf == NULL) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_NO_SPACE, "cannot allocate %" G_GUINT64_FORMAT " bytes", chunk);
    return FALSE;
  }
  for (guint64 off = 0; off < s->size; off += chunk) {
    gboolean whole = TRUE;
    ssize_t n;

    for (guint64 p = off; p < off + chunk && s->sim_raw != NULL; p += VMCE_PAGE_SIZE)
      whole = whole && !vmce_salvage_is_sim_raw (s, s->base + p);
    n = whole ? pread (fd, buf, chunk, (off_t) (file_off + off)) : 0;
    if (n == (ssize_t) chunk) {
      if (!vmce_salvage_write (pid, to + off, buf, chunk, error))
        return FALSE;
      s->bytes += chunk;
      continue;
    }
    /* a short read stops before a raw poisoned page: page by page here */
    for (guint64 p = off; p < off + chunk; p += VMCE_PAGE_SIZE) {
      guint64 hva = s->base + p;

      if (vmce_salvage_is_sim_raw (s, hva)) {
        g_array_append_val (s->raw, hva);
        continue;
      }
      n = pread (fd, buf, VMCE_PAGE_SIZE, (off_t) (file_off + p));
      if (n == (ssize_t) VMCE_PAGE_SIZE) {
        if (!vmce_salvage_write (pid, to + p, buf, VMCE_PAGE_SIZE, error))
          return FALSE;
        s->bytes += VMCE_PAGE_SIZE;
      } else if (n < 0 && errno == EIO) {
        g_array_append_val (s->raw, hva);
      } else {
        int errsv = errno;
        g_set_error (error, G_IO_ERROR, G_IO_ERROR_FAILED,
                     "reading the backing file at 0x%" G_GINT64_MODIFIER "x: %s", file_off + p,
                     n < 0 ? g_strerror (errsv) : "short read");
        return FALSE;
      }
    }
  }
  if (s->raw->len * VMCE_PAGE_SIZE >= s->size) {
    g_set_error (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED,
                 "the host kernel gave none of it back (EIO for every page): it cannot read a poisoned "
                 "huge page piece by piece");
    return FALSE;
  }
  return TRUE;
}

/* Marks the raw pages poisoned in the new memory */
static void
vmce_salvage_mark_raw (VmceSalvage *s, pid_t tid)
{
  VmceVm *vm = s->vm;
  gboolean kvm = vmce_vm_is_kvm (vm);

  s->mark = "none";
  for (guint i = 0; i < s->raw->len; i++) {
    guint64 hva = g_array_index (s->raw, guint64, i);
    guint64 gpa = vmce_salvage_gpa_of (s, hva);
    g_autoptr(GError) error = NULL;

    /* vmced's own error under TCG stays vmced's: a touch is a SIGSEGV it
     * rewrites, as before the salvage */
    if (s->simulated && !kvm) {
      if (vmce_remote_mprotect (vmce_vm_get_pid (vm), tid, hva, VMCE_PAGE_SIZE, PROT_NONE, &error)) {
        vmce_sim_adopt_page (vm, hva, gpa);
        s->mark = "PROT_NONE (simulated)";
        continue;
      }
    } else if (vmce_poison_mark_or_protect (vmce_vm_get_pid (vm), tid, hva, VMCE_PAGE_SIZE, !kvm, &s->mark,
                                            &error)) {
      if (g_str_has_prefix (s->mark, "PROT_NONE"))
        vmce_sim_adopt_page (vm, hva, gpa);
      else if (s->simulated)
        vmce_sim_adopt_marked_page (vm, hva, gpa);
      continue;
    }
    /* the guest is told of it: it does not read it; QEMU could */
    g_warning ("vm %s: the raw poisoned page at HVA 0x%" G_GINT64_MODIFIER "x is a zeroed page now: %s",
               vmce_vm_get_name (vm), hva, error->message);
    s->mark = "not marked (a zeroed page)";
  }
}

/* At QEMU's stop: checks the range again, opens its file and makes the
 * fresh memory in QEMU (not yet over the range) */
static gboolean
vmce_salvage_map (VmceSalvage *s, pid_t tid, GError **error)
{
  pid_t pid = vmce_vm_get_pid (s->vm);
  g_autoptr(VmceVmaTable) vmas = NULL;
  g_autofree gchar *refusal = NULL;
  g_autofree gchar *file = NULL;
  const VmceVma *vma;

  vmas = vmce_vma_table_read (pid, error);
  if (vmas == NULL)
    return FALSE;
  vma = vmce_vma_table_lookup (vmas, s->base);
  refusal = vmce_salvage_refusal_now (vma, s->size, s->simulated);
  if (refusal != NULL) {
    g_set_error_literal (error, G_IO_ERROR, G_IO_ERROR_NOT_SUPPORTED, refusal);
    return FALSE;
  }
  s->backing = vmce_vma_describe (vma);
  /* map_files opens what QEMU mapped, a deleted file and a memfd too */
  file = g_strdup_printf ("/proc/%d/map_files/%" G_GINT64_MODIFIER "x-%" G_GINT64_MODIFIER "x", pid, vma->start,
                          vma->end);
  s->fd = open (file, O_RDONLY | O_CLOEXEC);
  if (s->fd < 0) {
    int errsv = errno;
    g_set_error (error, G_IO_ERROR, g_io_error_from_errno (errsv), "cannot open the backing file %s (%s): %s",
                 vma->path, file, g_strerror (errsv));
    return FALSE;
  }
  s->file_off = vma->offset + (s->base - vma->start);
  if (!vmce_remote_map_anon (pid, tid, s->size, vma->shared, &s->to, error))
    return FALSE;
  s->how = g_strdup_printf ("%s anonymous memory in 4 KiB pages, filled from the file and moved over the range "
                            "(mremap)",
                            vma->shared ? "shared" : "private");
  /* vmced's own error: the page it named is the one lost (the file
   * behind it is whole); the worker must not read the simulator's tables */
  if (s->simulated) {
    s->sim_raw = g_hash_table_new_full (g_int64_hash, g_int64_equal, g_free, NULL);
    for (guint64 off = 0; off < s->size; off += VMCE_PAGE_SIZE)
      if (vmce_sim_is_raw (s->vm, s->base + off))
        g_hash_table_add (s->sim_raw, g_memdup2 (&(guint64) { s->base + off }, sizeof (guint64)));
  }
  return TRUE;
}

static JsonNode *
vmce_salvage_record (VmceSalvage *s, guint told)
{
  g_autoptr(JsonBuilder) b = json_builder_new ();

  json_builder_begin_object (b);
  vmce_vm_begin_record (s->vm, b, "huge-page-salvage");
  vmce_json_builder_add_hex (b, "hva", s->base);
  vmce_json_builder_add_int (b, "lsb", s->lsb);
  vmce_json_builder_add_int (b, "size", (gint64) s->size);
  /* 0: no error vmced journaled showed the loss (QEMU's own read, and
   * no AO for it came) */
  vmce_json_builder_add_int (b, "about_seq", (gint64) s->about_seq);
  vmce_json_builder_add_string (b, "source", s->simulated ? "simulated" : "kernel");
  if (s->failure != NULL) {
    vmce_json_builder_add_string (b, "fallback", "all");
    vmce_json_builder_add_string (b, "detail", s->failure);
    /* lost whole after all: a restarted vmced puts them back from here */
    json_builder_set_member_name (b, "ranges");
    vmce_guest_pages_to_json_ranges (s->pages, b);
  } else {
    vmce_json_builder_add_int (b, "salvaged", (gint64) (s->bytes / VMCE_PAGE_SIZE));
    vmce_json_builder_add_int (b, "bytes", (gint64) s->bytes);
    json_builder_set_member_name (b, "lost");
    json_builder_begin_array (b);
    for (guint i = 0; i < s->raw->len; i++) {
      guint64 hva = g_array_index (s->raw, guint64, i);
      json_builder_begin_object (b);
      if (vmce_salvage_gpa_of (s, hva) != G_MAXUINT64)
        vmce_json_builder_add_hex (b, "gpa", vmce_salvage_gpa_of (s, hva));
      vmce_json_builder_add_hex (b, "hva", hva);
      json_builder_end_object (b);
    }
    json_builder_end_array (b);
    vmce_json_builder_add_string (b, "backing", s->backing);
    vmce_json_builder_add_string (b, "how", s->how);
    vmce_json_builder_add_string (b, "mark", s->mark);
  }
  vmce_json_builder_add_int (b, "told", told);
  vmce_json_builder_add_int (b, "us", s->us);
  json_builder_end_object (b);
  return json_builder_get_root (b);
}

/* Journals what became of the range, once the salvage ran and the loss's
 * event is in (or did not come); tells the guest what it must be told */
static void
vmce_salvage_finish (VmceSalvage *s)
{
  VmceVm *vm = s->vm;
  VmceSalvager *sv = vmce_salvager (vm);
  GHashTable *set = vmce_vm_get_poisoned (vm);
  g_autoptr(JsonNode) record = NULL;
  guint64 hit = s->have_event ? s->hit_gpa & VMCE_PAGE_MASK : G_MAXUINT64;
  guint told = 0;

  g_clear_handle_id (&s->wait_source, g_source_remove);
  g_hash_table_remove (sv->active, &s->base);
  if (s->failure != NULL) {
    /* `all`: every page is bad on the host, and told */
    for (guint i = 0; i < s->pages->len; i++) {
      const VmceGuestPage *p = &g_array_index (s->pages, VmceGuestPage, i);
      (void) vmce_poison_set_add_lost (set, p->gpa, p->hva, s->simulated, s->about_seq);
      if (s->hit_told && p->gpa == hit)
        continue;
      vmce_forward_tell (vm, p->gpa, s->about_seq);
      told++;
    }
    vmce_log_record (VMCE_LOG_HUGE_PAGE_LOSS, vmce_vm_get_name (vm), s->have_event ? &s->hit_gpa : NULL,
                     s->about_seq,
                     "vm %s: the %" G_GUINT64_FORMAT " KiB host page at HVA 0x%" G_GINT64_MODIFIER
                     "x cannot be salvaged: %s; handled as hugepage = all: %u more to tell",
                     vmce_vm_get_name (vm), s->size / 1024, s->base, s->failure, told);
    g_hash_table_add (sv->passed, g_memdup2 (&s->base, sizeof s->base));
  } else {
    VmceSalvaged done = { .base = s->base, .size = s->size, .lost = s->raw->len,
                          .backing = g_strdup (s->backing) };

    /* the pages kept are no longer bad on the host; the raw ones (and the
     * one the guest was told of) stay, and a raw one not told is told */
    for (guint i = 0; i < s->pages->len; i++) {
      const VmceGuestPage *p = &g_array_index (s->pages, VmceGuestPage, i);
      gboolean lost = FALSE;
      VmcePoisonedPage *pp;

      for (guint k = 0; k < s->raw->len && !lost; k++)
        lost = g_array_index (s->raw, guint64, k) == p->hva;
      pp = vmce_poison_set_lookup (set, p->gpa);
      if (lost && p->gpa != hit && (pp == NULL || !vmce_poisoned_page_told (pp))) {
        vmce_forward_tell (vm, p->gpa, s->about_seq);
        told++;
      } else if (!lost && p->gpa != hit && pp != NULL && !vmce_poisoned_page_told (pp)) {
        guint64 gpa = p->gpa;
        g_hash_table_remove (set, &gpa);
      }
    }
    vmce_log_record (VMCE_LOG_HUGE_PAGE_LOSS, vmce_vm_get_name (vm), s->have_event ? &s->hit_gpa : NULL,
                     s->about_seq,
                     "vm %s: the %" G_GUINT64_FORMAT " KiB host page at HVA 0x%" G_GINT64_MODIFIER
                     "x salvaged in %" G_GINT64_FORMAT " us: %" G_GUINT64_FORMAT " KiB kept, %u page(s) lost "
                     "(%s), %u more told; the range is in 4 KiB pages now",
                     vmce_vm_get_name (vm), s->size / 1024, s->base, s->us, s->bytes / 1024, s->raw->len,
                     s->mark, told);
    g_array_append_val (sv->done, done);
  }
  record = vmce_salvage_record (s, told);
  vmce_vm_emit_record (vm, "HUGE_PAGE_SALVAGE", record);
  vmce_salvage_free (s);
}

/* The salvage ran and no error vmced journaled showed the loss (QEMU's
 * own thread read it first, and its AO never came) */
static gboolean
vmce_salvage_wait_cb (gpointer user_data)
{
  VmceSalvage *s = user_data;

  s->wait_source = 0;
  vmce_salvage_finish (s);
  return G_SOURCE_REMOVE;
}

/* The salvage is over, either way: what waited goes on, and once the
 * loss's event is in, the record */
static void
vmce_salvage_over (VmceSalvage *s, GError *error)
{
  s->ran = TRUE;
  if (error != NULL)
    s->failure = g_strdup (error->message);
  vmce_salvage_close (s);
  s->us = g_get_monotonic_time () - s->stop_us;
  /* a held AO forwarded now can bring the event at once: finish after */
  s->letting_go = TRUE;
  vmce_salvage_let_go (s, TRUE);
  s->letting_go = FALSE;
  if (s->have_event)
    vmce_salvage_finish (s);
  else
    s->wait_source = g_timeout_add (VMCE_SALVAGE_PENDING_MS, vmce_salvage_wait_cb, s);
}

static void vmce_salvage_op_destroy (gpointer user_data);

/* At QEMU's stop: the filled memory over the range, the raw pages marked */
static void
vmce_salvage_op_move (VmcePtraceWatch *watch, pid_t tid, gpointer user_data)
{
  VmceSalvage *s = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GError) local = NULL;

  if (!vmce_remote_mremap_fixed (vmce_vm_get_pid (s->vm), tid, s->to, s->size, s->base, &error)) {
    if (!vmce_remote_munmap (vmce_vm_get_pid (s->vm), tid, s->to, s->size, &local))
      g_warning ("vm %s: %s", vmce_vm_get_name (s->vm), local->message);
    vmce_salvage_over (s, error);
    return;
  }
  /* what vmced's simulator had taken away went with the old mapping */
  for (guint64 off = 0; off < s->size; off += VMCE_PAGE_SIZE)
    vmce_sim_forget_page (s->vm, s->base + off, "the huge page was salvaged");
  vmce_salvage_mark_raw (s, tid);
  vmce_salvage_over (s, NULL);
}

/* At QEMU's stop, after a failed copy: the fresh memory goes */
static void
vmce_salvage_op_unmap (VmcePtraceWatch *watch, pid_t tid, gpointer user_data)
{
  VmceSalvage *s = user_data;
  g_autoptr(GError) local = NULL;
  g_autoptr(GError) error = g_steal_pointer (&s->copy_error);

  if (!vmce_remote_munmap (vmce_vm_get_pid (s->vm), tid, s->to, s->size, &local))
    g_warning ("vm %s: %s", vmce_vm_get_name (s->vm), local->message);
  vmce_salvage_over (s, error);
}

static void
vmce_salvage_copy_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  VmceSalvage *s = task_data;
  GError *error = NULL;

  if (!vmce_salvage_copy (s, s->fd, s->file_off, s->to, &error))
    g_task_return_error (task, error);
  else
    g_task_return_boolean (task, TRUE);
}

static void
vmce_salvage_copied_cb (GObject *source, GAsyncResult *res, gpointer user_data)
{
  VmceSalvage *s = user_data;
  VmcePtraceWatch *watch = vmce_vm_get_watch (s->vm);

  (void) g_task_propagate_boolean (G_TASK (res), &s->copy_error);
  if (watch == NULL) {
    vmce_salvage_op_destroy (s);
    return;
  }
  vmce_ptrace_watch_call_stopped (watch, vmce_vm_get_pid (s->vm),
                                  s->copy_error == NULL ? vmce_salvage_op_move : vmce_salvage_op_unmap, s,
                                  vmce_salvage_op_destroy);
}

/* At QEMU's stop: the memory made, then the copy in a worker thread, with
 * QEMU's threads running (but for those held at the range) and vmced's
 * main loop serving: a 1 GiB copy takes seconds in a TCG L1 */
static void
vmce_salvage_op (VmcePtraceWatch *watch, pid_t tid, gpointer user_data)
{
  VmceSalvage *s = user_data;
  g_autoptr(GError) error = NULL;
  g_autoptr(GTask) task = NULL;

  if (!vmce_salvage_map (s, tid, &error)) {
    vmce_salvage_over (s, error);
    return;
  }
  task = g_task_new (NULL, NULL, vmce_salvage_copied_cb, s);
  g_task_set_task_data (task, s, NULL);
  g_task_run_in_thread (task, vmce_salvage_copy_thread);
}

static void
vmce_salvage_op_destroy (gpointer user_data)
{
  VmceSalvage *s = user_data;

  /* QEMU's main thread is gone: so is QEMU */
  g_hash_table_remove (vmce_salvager (s->vm)->active, &s->base);
  vmce_salvage_let_go (s, FALSE);
  vmce_salvage_free (s);
}

static gboolean
vmce_salvage_schedule_cb (gpointer user_data)
{
  VmceSalvage *s = user_data;

  if (vmce_vm_get_watch (s->vm) == NULL) {
    vmce_salvage_op_destroy (s);
    return G_SOURCE_REMOVE;
  }
  /* QEMU's main thread makes the system calls: it is there for as long
   * as QEMU is */
  vmce_ptrace_watch_call_stopped (vmce_vm_get_watch (s->vm), vmce_vm_get_pid (s->vm), vmce_salvage_op, s,
                                  vmce_salvage_op_destroy);
  return G_SOURCE_REMOVE;
}

/* A range vmced salvages from now; the salvage runs from the main loop,
 * after the stop being handled has been taken or let go */
static VmceSalvage *
vmce_salvage_new (VmceVm *vm, guint64 base, guint64 size, gboolean simulated, gint64 stop_us)
{
  VmceSalvager *sv = vmce_salvager (vm);
  VmceSalvage *s = g_new0 (VmceSalvage, 1);

  s->vm = vmce_vm_ref (vm);
  s->base = base;
  s->size = size;
  s->lsb = (guint) g_bit_nth_lsf (size, -1);
  s->simulated = simulated;
  s->stop_us = stop_us;
  s->pages = vmce_ram_layout_guest_pages (vmce_vm_get_layout (vm), base, size);
  s->held = g_array_new (FALSE, FALSE, sizeof (pid_t));
  s->raw = g_array_new (FALSE, FALSE, sizeof (guint64));
  s->fd = -1;
  s->deferred = g_array_new (FALSE, FALSE, sizeof (VmceDeferredStop));
  g_hash_table_insert (sv->active, g_memdup2 (&base, sizeof base), s);
  g_idle_add (vmce_salvage_schedule_cb, s);
  return s;
}

gboolean
vmce_hugepage_salvage_knows (VmceVm *vm, guint64 base)
{
  VmceSalvager *sv = vmce_vm_get_layer_data (vm, vmce_salvager_quark ());

  return sv != NULL && (vmce_salvage_done_at (sv, base) || g_hash_table_contains (sv->active, &base));
}

void
vmce_hugepage_salvage_start (VmceVm *vm, const VmceMceEvent *ev, guint64 base, guint64 size)
{
  VmceSalvager *sv = vmce_salvager (vm);
  VmceSalvage *s = g_hash_table_lookup (sv->active, &base);

  if (vmce_vm_get_watch (vm) == NULL)
    return;
  if (s == NULL) {
    /* salvaged already (the event came after the salvage had journaled) */
    if (vmce_hugepage_salvage_knows (vm, base))
      return;
    s = vmce_salvage_new (vm, base, size, g_strcmp0 (ev->source, "simulated") == 0,
                          ev->stop_us != 0 ? ev->stop_us : g_get_monotonic_time ());
  }
  if (s->have_event)
    return;
  s->have_event = TRUE;
  s->lsb = ev->lsb;
  s->about_seq = ev->seq;
  s->hit_gpa = ev->gpa;
  s->hit_told = ev->result == VMCE_RESULT_INJECTED;
  if (s->ran && !s->letting_go)
    vmce_salvage_finish (s);
}

/* The hugetlbfs range of QEMU's guest RAM that holds @page (its huge
 * page's start and size), if it is one, and why it cannot be salvaged
 * (@refusal, NULL if it can): one read of QEMU's mappings, at a stop */
static gboolean
vmce_salvage_huge_range (VmceVm *vm, guint64 page, gboolean simulated, guint64 *base, guint64 *size,
                         gchar **refusal)
{
  g_autoptr(VmceVmaTable) vmas = NULL;
  const VmceVma *vma;
  guint64 gpa;

  if (vmce_vm_get_layout (vm) == NULL || !vmce_ram_layout_hva_to_gpa (vmce_vm_get_layout (vm), page, &gpa, NULL))
    return FALSE;
  vmas = vmce_vma_table_read (vmce_vm_get_pid (vm), NULL);
  vma = vmas != NULL ? vmce_vma_table_lookup (vmas, page) : NULL;
  if (vma == NULL || !vma->hugetlb || vma->page_size <= VMCE_PAGE_SIZE)
    return FALSE;
  *size = vma->page_size;
  *base = page & ~(*size - 1);
  *refusal = vmce_salvage_refusal_now (vmce_vma_table_lookup (vmas, *base), *size, simulated);
  return TRUE;
}

static gboolean
vmce_salvage_done_at (VmceSalvager *sv, guint64 hva)
{
  for (guint i = 0; i < sv->done->len; i++) {
    const VmceSalvaged *d = &g_array_index (sv->done, VmceSalvaged, i);
    if (hva >= d->base && hva < d->base + d->size)
      return TRUE;
  }
  return FALSE;
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

/* Holds the host's AO @info until @s is done */
static void
vmce_salvage_defer (VmceSalvage *s, pid_t tid, const siginfo_t *info, gint64 stop_us, VmceSalvageRedo redo,
                    gpointer redo_data)
{
  VmceDeferredStop d = { .tid = tid, .info = *info, .stop_us = stop_us, .redo = redo, .redo_data = redo_data };

  g_debug ("vm %s: the AO for HVA 0x%" G_GINT64_MODIFIER "x waits for its huge page's salvage",
           vmce_vm_get_name (s->vm), (guint64) (guintptr) info->si_addr);
  g_array_append_val (s->deferred, d);
}

gboolean
vmce_hugepage_salvage_fault (VmceVm *vm,
                             pid_t tid,
                             const siginfo_t *info,
                             gboolean salvage,
                             gint64 stop_us,
                             VmceSalvageRedo redo,
                             gpointer redo_data)
{
  VmceSalvager *sv = vmce_vm_get_layer_data (vm, vmce_salvager_quark ());
  guint64 page = (guint64) (guintptr) info->si_addr & VMCE_PAGE_MASK;
  gboolean fault = info->si_signo == SIGSEGV ||
                   (info->si_signo == SIGBUS && (info->si_code == BUS_MCEERR_AR || info->si_code == BUS_ADRERR));
  gboolean kernel_ao = info->si_signo == SIGBUS && info->si_code == BUS_MCEERR_AO;
  g_autofree gchar *refusal = NULL;
  guint64 base, size;
  VmceSalvage *s;

  /* vmced's own stand-in signals (SI_TKILL) name no address */
  if ((!fault && !kernel_ao) || (sv == NULL && !salvage))
    return FALSE;
  sv = vmce_salvager (vm);
  s = vmce_salvage_find (sv, page);
  if (s != NULL && !s->ran) {
    if (!fault) {
      vmce_salvage_defer (s, tid, info, stop_us, redo, redo_data);
      return TRUE;
    }
    g_debug ("vm %s: thread %d touched HVA 0x%" G_GINT64_MODIFIER "x of a huge page being salvaged: held",
             vmce_vm_get_name (vm), tid, page);
    g_array_append_val (s->held, tid);
    return TRUE;
  }
  /* a fault on a page salvaged since it faulted: it reads fine now */
  if (fault && (s != NULL || vmce_salvage_done_at (sv, page)) &&
      vmce_page_is_readable (vmce_vm_get_pid (vm), page)) {
    vmce_ptrace_watch_resume (vmce_vm_get_watch (vm), tid, 0);
    return TRUE;
  }
  /* The first stop a lost huge page brings: the range is salvaged from
   * now, before its error is even forwarded. Under KVM a vCPU reads
   * another page of the loss a few milliseconds after the AO (seen in the
   * host lab: 15 ms, while vmced injected the AO), and QEMU's own main
   * thread reads a lost 1 GiB page before its AO is delivered (seen: an AR
   * first); those reads wait for the salvage and then read the data kept,
   * instead of reaching the guest as an AR it panics of, or killing QEMU. */
  /* a page vmced's simulator took away alone is a 4 KiB error of its own */
  if (s != NULL || !salvage || (info->si_signo == SIGSEGV && vmce_sim_lost_lsb (vm, page) == 0) ||
      !vmce_salvage_huge_range (vm, page, info->si_signo == SIGSEGV, &base, &size, &refusal) ||
      g_hash_table_contains (sv->passed, &base) || vmce_hugepage_salvage_knows (vm, base))
    return FALSE;
  if (refusal != NULL) {
    g_hash_table_add (sv->passed, g_memdup2 (&base, sizeof base));
    return FALSE; /* hugepage-loss.c says why, with the loss */
  }
  s = vmce_salvage_new (vm, base, size, info->si_signo == SIGSEGV, stop_us);
  if (!fault)
    vmce_salvage_defer (s, tid, info, stop_us, redo, redo_data);
  else
    g_array_append_val (s->held, tid);
  return TRUE;
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
    vmce_salvage_let_go (value, FALSE);
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
