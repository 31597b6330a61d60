/*
 * page-replace and proc-maps with a real child process: its private page
 * taken away (PROT_NONE, as a simulated error leaves it) comes back fresh,
 * its shared memory page is punched out of the memfd behind it, and a page
 * of a file it may only read cannot be replaced, with an error that says
 * why.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <fcntl.h>
#include <gio/gio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "page-replace.h"
#include "proc-maps.h"
#include "ptrace-watch.h"
#include "remote-syscall.h"
#include "test-child.h"

typedef struct {
  pid_t pid;
  guint64 anon;   /* private anonymous, written */
  guint64 shared; /* a memfd, MAP_SHARED, written */
  guint64 ro;     /* a file opened read-only, MAP_SHARED */
  volatile guint8 *shared_here; /* the same memfd page, as the test sees it */
  /* results, checked after the callback */
  gboolean anon_readable_before;
  gboolean anon_ok, shared_ok, ro_ok;
  guint8 anon_byte, shared_byte;
  VmcePageReplace anon_r, shared_r;
  GError *ro_error;
  GError *error;
} Ctx;

static guint8
read_byte (pid_t pid, guint64 addr)
{
  guint8 byte = 0xff;
  struct iovec local = { .iov_base = &byte, .iov_len = 1 };
  struct iovec remote = { .iov_base = GSIZE_TO_POINTER (addr), .iov_len = 1 };

  g_assert_cmpint (process_vm_readv (pid, &local, 1, &remote, 1, 0), ==, 1);
  return byte;
}

static void
at_stop (VmcePtraceWatch *watch, pid_t tid, gpointer data)
{
  Ctx *ctx = data;
  g_autoptr(VmceVmaTable) vmas = NULL;

  /* what a simulated error does to the page */
  if (!vmce_remote_mprotect (ctx->pid, tid, ctx->anon, 4096, PROT_NONE, &ctx->error) ||
      !vmce_remote_mprotect (ctx->pid, tid, ctx->ro, 4096, PROT_NONE, &ctx->error))
    return;
  ctx->anon_readable_before = vmce_page_is_readable (ctx->pid, ctx->anon);
  vmas = vmce_vma_table_read (ctx->pid, &ctx->error);
  if (vmas == NULL)
    return;
  ctx->anon_ok = vmce_page_replace (ctx->pid, tid, vmas, ctx->anon + 123, &ctx->anon_r, &ctx->error);
  if (!ctx->anon_ok)
    return;
  ctx->anon_byte = read_byte (ctx->pid, ctx->anon);
  ctx->shared_ok = vmce_page_replace (ctx->pid, tid, vmas, ctx->shared, &ctx->shared_r, &ctx->error);
  if (!ctx->shared_ok)
    return;
  ctx->shared_byte = read_byte (ctx->pid, ctx->shared);
  {
    VmcePageReplace r = { 0 };
    ctx->ro_ok = vmce_page_replace (ctx->pid, tid, vmas, ctx->ro, &r, &ctx->ro_error);
    vmce_page_replace_clear (&r);
  }
}

static void
test_page_replace (void)
{
  g_autofree gchar *ro_path = NULL;
  g_autoptr(GError) error = NULL;
  Ctx ctx = { 0 };
  guint8 *anon, *shared, *ro;
  int memfd, rofd, tmp;

  if (!test_ptrace_allowed ()) {
    g_test_skip ("ptrace is not allowed here (not root, or yama ptrace_scope)");
    return;
  }
  anon = mmap (NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  g_assert_true (anon != MAP_FAILED);
  anon[0] = 'a';
  memfd = memfd_create ("vmce-test-ram", MFD_CLOEXEC);
  g_assert_cmpint (memfd, >=, 0);
  g_assert_no_errno (ftruncate (memfd, 8192));
  shared = mmap (NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  g_assert_true (shared != MAP_FAILED);
  shared[0] = 'b';
  tmp = g_file_open_tmp ("vmce-test-ro-XXXXXX", &ro_path, &error);
  g_assert_no_error (error);
  g_assert_cmpint (write (tmp, "c", 1), ==, 1);
  g_assert_no_errno (ftruncate (tmp, 4096));
  close (tmp);
  rofd = open (ro_path, O_RDONLY | O_CLOEXEC);
  g_assert_cmpint (rofd, >=, 0);
  ro = mmap (NULL, 4096, PROT_READ, MAP_SHARED, rofd, 0);
  g_assert_true (ro != MAP_FAILED);

  ctx.anon = (guint64) (guintptr) anon;
  ctx.shared = (guint64) (guintptr) shared;
  ctx.ro = (guint64) (guintptr) ro;
  ctx.shared_here = shared;
  ctx.pid = test_child_fork_idle ();
  /* the child has its own copies now; the memfd page stays shared */
  munmap (anon, 4096);
  munmap (ro, 4096);
  close (rofd);
  test_child_run_stopped (ctx.pid, at_stop, &ctx);

  g_assert_no_error (ctx.error);
  /* a page taken away cannot be read, and a replaced one is fresh */
  g_assert_false (ctx.anon_readable_before);
  g_assert_true (ctx.anon_ok);
  g_assert_cmphex (ctx.anon_r.start, ==, ctx.anon);
  g_assert_cmpuint (ctx.anon_r.len, ==, 4096);
  g_assert_cmpstr (ctx.anon_r.backing, ==, "private anonymous");
  g_assert_nonnull (strstr (ctx.anon_r.how, "mprotect read-write, MADV_DONTNEED"));
  g_assert_cmpuint (ctx.anon_byte, ==, 0);
  /* shared memory: the hole is punched in the memfd, which the test sees
   * through its own mapping of it */
  g_assert_true (ctx.shared_ok);
  g_assert_nonnull (strstr (ctx.shared_r.backing, "shared file /memfd:vmce-test-ram"));
  g_assert_nonnull (strstr (ctx.shared_r.how, "MADV_REMOVE (hole punched at offset 0x0)"));
  g_assert_cmpuint (ctx.shared_byte, ==, 0);
  g_assert_cmpuint (ctx.shared_here[0], ==, 0);
  /* a file the process may only read: no write access to give back */
  g_assert_false (ctx.ro_ok);
  g_assert_error (ctx.ro_error, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED);
  g_assert_nonnull (strstr (ctx.ro_error->message, "mprotect"));

  vmce_page_replace_clear (&ctx.anon_r);
  vmce_page_replace_clear (&ctx.shared_r);
  g_clear_error (&ctx.ro_error);
  munmap (shared, 8192);
  close (memfd);
  unlink (ro_path);
}

/* g_file_set_contents() renames a temporary file over it: not for /proc */
static void
write_proc (const gchar *path, const gchar *text)
{
  int fd = open (path, O_WRONLY | O_CLOEXEC);

  if (fd >= 0) {
    (void) !write (fd, text, strlen (text));
    close (fd);
  }
}

typedef struct {
  pid_t pid;
  guint64 huge;
  gboolean ok;
  VmcePageReplace r;
  GError *error;
} HugeCtx;

static void
at_huge_stop (VmcePtraceWatch *watch, pid_t tid, gpointer data)
{
  HugeCtx *ctx = data;
  g_autoptr(VmceVmaTable) vmas = vmce_vma_table_read (ctx->pid, &ctx->error);

  if (vmas != NULL)
    ctx->ok = vmce_page_replace (ctx->pid, tid, vmas, ctx->huge + 0x5123, &ctx->r, &ctx->error);
}

/* hugetlb: the kernel poisons a huge page whole, so it is replaced whole,
 * punched out of its hugetlbfs file, and the record says how big */
static void
test_page_replace_hugetlb (void)
{
  g_autofree gchar *nr_before = NULL;
  HugeCtx ctx = { 0 };
  const gsize huge = 2 << 20;
  guint8 *mem;
  int fd;

  if (!test_ptrace_allowed ()) {
    g_test_skip ("ptrace is not allowed here (not root, or yama ptrace_scope)");
    return;
  }
  /* one huge page of the system's pool, for the length of the test */
  if (!g_file_get_contents ("/proc/sys/vm/nr_hugepages", &nr_before, NULL, NULL)) {
    g_test_skip ("no hugetlb in this kernel");
    return;
  }
  {
    g_autofree gchar *more = g_strdup_printf ("%ld\n", atol (nr_before) + 1);
    write_proc ("/proc/sys/vm/nr_hugepages", more);
  }
  fd = memfd_create ("vmce-test-huge", MFD_CLOEXEC | MFD_HUGETLB);
  mem = fd >= 0 && ftruncate (fd, huge) == 0
            ? mmap (NULL, huge, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
            : MAP_FAILED;
  if (mem == MAP_FAILED) {
    if (fd >= 0)
      close (fd);
    write_proc ("/proc/sys/vm/nr_hugepages", nr_before);
    g_test_skip ("no free 2 MiB huge page (/proc/sys/vm/nr_hugepages)");
    return;
  }
  memset (mem, 'h', huge);
  ctx.huge = (guint64) (guintptr) mem;
  ctx.pid = test_child_fork_idle ();
  test_child_run_stopped (ctx.pid, at_huge_stop, &ctx);
  g_assert_no_error (ctx.error);
  g_assert_true (ctx.ok);
  g_assert_cmphex (ctx.r.start, ==, ctx.huge);
  g_assert_cmpuint (ctx.r.len, ==, huge);
  g_assert_nonnull (strstr (ctx.r.backing, "shared hugetlb (2048 kB pages)"));
  g_assert_nonnull (strstr (ctx.r.how, "MADV_REMOVE"));
  /* the whole huge page is fresh: the test's own view of the memfd too */
  g_assert_cmpuint (mem[0], ==, 0);
  g_assert_cmpuint (mem[huge - 1], ==, 0);
  vmce_page_replace_clear (&ctx.r);
  munmap (mem, huge);
  close (fd);
  write_proc ("/proc/sys/vm/nr_hugepages", nr_before);
}

/* A recorded /proc/PID/maps of a QEMU: guest RAM in a file, a page of it
 * taken away, paths with spaces, pseudo-files */
static const gchar maps[] =
  "55d4c8e00000-55d4c9100000 r--p 00000000 fe:00 1183                       /usr/bin/qemu-system-x86_64\n"
  "55d4ca000000-55d4ca400000 rw-p 00000000 00:00 0                          [heap]\n"
  "7f0000000000-7f0001000000 rw-s 00000000 00:1a 77                         /dev/shm/l2 ram (deleted)\n"
  "7f0001000000-7f0001001000 ---s 01000000 00:1a 77                         /dev/shm/l2 ram (deleted)\n"
  "7f0001001000-7f0020000000 rw-s 01001000 00:1a 77                         /dev/shm/l2 ram (deleted)\n"
  "7f0020000000-7f0040000000 rw-p 00000000 00:00 0 \n"
  "7f0040000000-7f0040200000 rw-s 00000000 00:10 9                          /anon_hugepage (deleted)\n"
  "7ffd1c7e0000-7ffd1c801000 rw-p 00000000 00:00 0                          [stack]\n";

static void
test_proc_maps (void)
{
  g_autoptr(GError) error = NULL;
  g_autoptr(VmceVmaTable) t = vmce_vma_table_parse (maps, 0, &error);
  g_autofree gchar *desc = NULL;
  const VmceVma *v;

  g_assert_no_error (error);
  g_assert_cmpuint (vmce_vma_table_get_n_vmas (t), ==, 8);
  v = vmce_vma_table_lookup (t, G_GUINT64_CONSTANT (0x7f0001000123));
  g_assert_nonnull (v);
  g_assert_false (v->readable);
  g_assert_true (v->shared);
  g_assert_cmphex (v->offset, ==, 0x1000000);
  g_assert_cmpstr (v->path, ==, "/dev/shm/l2 ram (deleted)");
  desc = vmce_vma_describe (v);
  g_assert_cmpstr (desc, ==, "shared file /dev/shm/l2 ram (deleted)");
  g_clear_pointer (&desc, g_free);
  v = vmce_vma_table_lookup (t, G_GUINT64_CONSTANT (0x7f0030000000));
  g_assert_nonnull (v);
  g_assert_null (v->path);
  desc = vmce_vma_describe (v);
  g_assert_cmpstr (desc, ==, "private anonymous");
  g_clear_pointer (&desc, g_free);
  v = vmce_vma_table_lookup (t, G_GUINT64_CONSTANT (0x7f0040001000));
  g_assert_true (v->hugetlb);
  v = vmce_vma_table_lookup (t, G_GUINT64_CONSTANT (0x55d4ca001000));
  g_assert_null (v->path); /* [heap] is no file */
  g_assert_null (vmce_vma_table_lookup (t, G_GUINT64_CONSTANT (0x7f0040200000)));
  g_assert_null (vmce_vma_table_lookup (t, 0x1000));
}

static void
test_proc_maps_bad (void)
{
  g_autoptr(GError) error = NULL;
  VmceVmaTable *t;

  t = vmce_vma_table_parse ("7f00-7e00 rw-p 0 00:00 0\n", 0, &error);
  g_assert_null (t);
  g_assert_error (error, G_IO_ERROR, G_IO_ERROR_INVALID_DATA);
  g_clear_error (&error);
  t = vmce_vma_table_parse ("7f0000000000-7f0000002000 rw-p 0 00:00 0\n"
                            "7f0000001000-7f0000003000 rw-p 0 00:00 0\n",
                            0, &error);
  g_assert_null (t);
  g_assert_nonnull (strstr (error->message, "line 2"));
}

/* How a page is replaced, by what maps it */
static void
test_page_replace_plan (void)
{
  const struct {
    const gchar *line;
    guint64 page_size;
    gboolean hugetlb;
    VmceReplacePlan want;
  } rows[] = {
    /* QEMU's default RAM */
    { "7f00-7f10 rw-p 0 00:00 0", 4096, FALSE, { 4096, FALSE, FALSE, TRUE, FALSE } },
    /* ... taken away by a simulated error */
    { "7f00-7f10 ---p 0 00:00 0", 4096, FALSE, { 4096, TRUE, FALSE, TRUE, FALSE } },
    /* memory-backend-file share=on, memfd, the host lab's /dev/shm file */
    { "7f00-7f10 rw-s 0 00:1a 7 /dev/shm/ram", 4096, FALSE, { 4096, FALSE, TRUE, FALSE, FALSE } },
    { "7f00-7f10 ---s 0 00:1a 7 /memfd:ram0 (deleted)", 4096, FALSE,
      { 4096, TRUE, TRUE, FALSE, FALSE } },
    /* memory-backend-ram share=on */
    { "7f00-7f10 rw-s 0 00:01 7 /dev/zero (deleted)", 4096, FALSE,
      { 4096, FALSE, TRUE, FALSE, FALSE } },
    /* a file mapped privately: its own page comes back */
    { "7f00-7f10 rw-p 0 08:01 7 /var/lib/ram.img", 4096, FALSE,
      { 4096, FALSE, FALSE, FALSE, TRUE } },
    /* hugetlbfs, shared and private: a huge page whole */
    { "7f00-7f10 rw-s 0 00:10 7 /dev/hugepages/ram", 2 << 20, TRUE,
      { 2 << 20, FALSE, TRUE, FALSE, FALSE } },
    { "7f00-7f10 rw-p 0 00:10 7 /anon_hugepage (deleted)", 2 << 20, TRUE,
      { 2 << 20, FALSE, FALSE, FALSE, FALSE } },
  };

  for (guint i = 0; i < G_N_ELEMENTS (rows); i++) {
    g_autoptr(GError) error = NULL;
    g_autoptr(VmceVmaTable) t = vmce_vma_table_parse (rows[i].line, 0, &error);
    VmceVma vma;
    VmceReplacePlan plan;

    g_assert_no_error (error);
    vma = *vmce_vma_table_lookup (t, 0x7f00);
    /* what statfs on map_files says of a hugetlbfs file */
    vma.page_size = rows[i].page_size;
    vma.hugetlb = rows[i].hugetlb;
    vmce_page_replace_plan (&vma, &plan);
    if (memcmp (&plan, &rows[i].want, sizeof plan) != 0)
      g_error ("row %u (%s): unit %" G_GUINT64_FORMAT " access %d punch %d remap %d file %d",
               i, rows[i].line, plan.unit, plan.restore_access, plan.punch, plan.may_remap,
               plan.file_data);
  }
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  test_block_sigchld ();
  g_test_add_func ("/page-replace/anon-shared-readonly", test_page_replace);
  g_test_add_func ("/page-replace/hugetlb", test_page_replace_hugetlb);
  g_test_add_func ("/page-replace/plan", test_page_replace_plan);
  g_test_add_func ("/proc-maps/parse", test_proc_maps);
  g_test_add_func ("/proc-maps/bad", test_proc_maps_bad);
  return g_test_run ();
}
