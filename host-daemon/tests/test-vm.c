/*
 * Attaching to a process through a scripted monitor: a real child process
 * (standing for QEMU, real ptrace) and a fake QMP peer, so that the
 * monitor can misbehave on purpose.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib/gstdio.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "cper-encode.h"
#include "daemon.h"
#include "error.h"
#include "forward.h"
#include "sim-poison.h"
#include "fake-qemu.h"
#include "fake-qmp.h"
#include "test-child.h"

#define SIGBUS_BIT (G_GUINT64_CONSTANT (1) << (SIGBUS - 1))

typedef struct {
  gchar *dir;
  VmceDaemon *daemon;
  TestChild *child;
  FakeQmp *fake;
  gchar *qmp_path;
  gboolean done;
  VmceVm *vm;
  const gchar *mtree; /* the answer to `info mtree -f`, escaped; NULL: fake-qemu.c's */
  GError *error;
  JsonNode *event; /* a vmcectl poison's answer */
  gboolean kvm;    /* script_attach: a KVM guest of an AMD CPU with SUCCOR */
} Fixture;

static void
fixture_setup (Fixture *fx, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *socket_path = NULL;
  g_autofree gchar *journal_path = NULL;
  VmceDaemonOptions options = { 0 };

  fx->dir = g_dir_make_tmp ("vmce-test-vm-XXXXXX", &error);
  g_assert_no_error (error);
  socket_path = g_build_filename (fx->dir, "vmced.sock", NULL);
  journal_path = g_build_filename (fx->dir, "journal.jsonl", NULL);
  options.socket_path = socket_path;
  options.journal_path = journal_path;
  fx->daemon = vmce_daemon_new (&options, &error);
  g_assert_no_error (error);
  fx->child = test_child_spawn ();
  fx->qmp_path = g_build_filename (fx->dir, "qmp.sock", NULL);
  fx->fake = fake_qmp_new_listening (fx->qmp_path);
  fake_qmp_send_greeting (fx->fake);
  fake_qmp_expect (fx->fake, "qmp_capabilities", "{}");
}

static void
fixture_teardown (Fixture *fx, gconstpointer data)
{
  g_clear_pointer (&fx->vm, vmce_vm_unref);
  vmce_daemon_free (fx->daemon);
  fake_qmp_free (fx->fake);
  test_child_free (fx->child);
  g_clear_error (&fx->error);
  g_clear_pointer (&fx->event, json_node_unref);
  g_free (fx->qmp_path);
  (void) g_rmdir (fx->dir); /* the files in it go with the daemon or stay */
  g_free (fx->dir);
}

static void
attach_cb (GObject *source, GAsyncResult *res, gpointer data)
{
  Fixture *fx = data;

  fx->vm = vmce_daemon_attach_finish (fx->daemon, res, &fx->error);
  fx->done = TRUE;
}

static void
attach (Fixture *fx)
{
  vmce_daemon_attach_async (fx->daemon, fx->child->pid, fx->qmp_path, NULL, NULL,
                            VMCE_POLICY_FORWARD, attach_cb, fx);
  test_wait (fx->done);
  g_assert_true (fx->done);
}

static gchar *
journal_text (Fixture *fx, const gchar *until)
{
  g_autofree gchar *path = g_build_filename (fx->dir, "journal.jsonl", NULL);
  gchar *text = NULL;
  gint64 deadline = g_get_monotonic_time () + 5 * G_USEC_PER_SEC;

  /* io_uring writes it from the main loop: wait for @until (a loaded
   * machine may take a while), or look a few times for nothing */
  for (guint i = 0; until != NULL ? g_get_monotonic_time () < deadline : i < 200; i++) {
    test_iterate ();
    g_free (text);
    text = NULL;
    g_file_get_contents (path, &text, NULL, NULL);
    if (until != NULL && text != NULL && strstr (text, until) != NULL)
      break;
  }
  return text != NULL ? text : g_strdup ("");
}

/* @layout_reply: NULL for a QEMU without query-ram-layout (the layout
 * comes from HMP text), else its answer */
static void
script_attach (Fixture *fx, const gchar *layout_reply)
{
  fake_qemu_script_attach (fx->fake, fx->child, layout_reply, fx->mtree, fx->kvm);
}

/* attached to @fx's child as a guest whose RAM is that one page */
static void
attach_one_page (Fixture *fx)
{
  g_autofree gchar *layout = fake_qemu_one_page_layout (fx->child, 0);

  script_attach (fx, layout);
  attach (fx);
  g_assert_no_error (fx->error);
  g_assert_nonnull (fx->vm);
}

static void
script_full_attach (Fixture *fx)
{
  script_attach (fx, NULL);
}

/* query-ram-layout (qemu-patches/ 0003): the layout comes as data, and
 * the journal says so */
static void
test_vm_layout_qmp (Fixture *fx, gconstpointer data)
{
  g_autofree gchar *journal = NULL;
  guint64 hva = 0;

  if (!test_ptrace_allowed ()) {
    g_test_skip ("ptrace is not allowed here (not root, or yama ptrace_scope)");
    return;
  }
  script_attach (fx, "[{\"name\": \"pc.ram\", \"hva\": 139637976727552, \"size\": 536870912, "
                     "\"page-size\": 4096, \"ranges\": [{\"gpa\": 0, \"size\": 655360, \"offset\": 0, "
                     "\"readonly\": false}]}]");
  attach (fx);
  g_assert_no_error (fx->error);
  g_assert_nonnull (fx->vm);
  g_assert_true (vmce_vm_has_inject_mce (fx->vm));
  g_assert_true (vmce_ram_layout_gpa_to_hva (vmce_vm_get_layout (fx->vm), 0x1000, &hva, NULL));
  g_assert_cmphex (hva, ==, G_GUINT64_CONSTANT (0x7f0000001000));
  journal = journal_text (fx, "\"type\":\"attach\"");
  g_assert_nonnull (strstr (journal, "\"layout_via\":\"qmp query-ram-layout\""));
}

/* A newer QEMU's `info mtree -f` with a region type and a view header
 * vmced does not know: both are skipped and said, the RAM is found, and the
 * journal's attach record names the QEMU */
static void
test_vm_mtree_unknown (Fixture *fx, gconstpointer data)
{
  g_autofree gchar *journal = NULL;
  guint64 hva = 0;

  if (!test_ptrace_allowed ()) {
    g_test_skip ("ptrace is not allowed here (not root, or yama ptrace_scope)");
    return;
  }
  fx->mtree = "FlatView #0\\r\\n AS \\\"memory\\\", root: system\\r\\n Dispatch: 3 sections\\r\\n "
              "Root memory region: system\\r\\n  0000000000000000-000000001fffffff (prio 0, "
              "ram): pc.ram\\r\\n  0000000020000000-000000002fffffff (prio 0, container): "
              "bus\\r\\n\\r\\n";
  script_full_attach (fx);
  attach (fx);
  g_assert_no_error (fx->error);
  g_assert_nonnull (fx->vm);
  g_assert_true (vmce_ram_layout_gpa_to_hva (vmce_vm_get_layout (fx->vm), 0x1000, &hva, NULL));
  g_assert_cmphex (hva, ==, G_GUINT64_CONSTANT (0x7f0000001000));
  g_assert_false (vmce_ram_layout_gpa_to_hva (vmce_vm_get_layout (fx->vm), 0x20000000, &hva, NULL));
  journal = journal_text (fx, "\"type\":\"attach\"");
  g_assert_nonnull (strstr (journal, "\"qemu\":{\"version\":\"10.0.2\",\"package\":\"Debian "
                                     "1:10.0.2+ds-2+deb13u1~bpo12+1\"}"));
  g_assert_nonnull (strstr (journal, "region type 'container'"));
  g_assert_nonnull (strstr (journal, "view header lines ' Dispatch"));
}

/* The guest remaps its memory between `info mtree -f` and `gpa2hva` (the
 * firmware's PAM setup, early in a boot: seen attaching to a domain libvirt
 * had just started): vmced reads the layout again and attaches */
static void
test_vm_remapped_while_read (Fixture *fx, gconstpointer data)
{
  guint64 hva = 0;

  if (!test_ptrace_allowed ()) {
    g_test_skip ("ptrace is not allowed here (not root, or yama ptrace_scope)");
    return;
  }
  fake_qemu_script_attach_remapped (fx->fake, fx->child, 2);
  attach (fx);
  g_assert_no_error (fx->error);
  g_assert_nonnull (fx->vm);
  g_assert_true (vmce_ram_layout_gpa_to_hva (vmce_vm_get_layout (fx->vm), 0x1000, &hva, NULL));
  g_assert_cmphex (hva, ==, G_GUINT64_CONSTANT (0x7f0000001000));
}

/* ... on every read: one clear error saying so, the process let go */
static void
test_vm_remapped_every_read (Fixture *fx, gconstpointer data)
{
  g_autofree gchar *want = g_strdup_printf ("the guest remapped its memory on each of %u reads: ",
                                            VMCE_VM_LAYOUT_READS);
  pid_t pid = fx->child->pid;

  if (!test_ptrace_allowed ()) {
    g_test_skip ("ptrace is not allowed here (not root, or yama ptrace_scope)");
    return;
  }
  fake_qemu_script_attach_remapped (fx->fake, fx->child, VMCE_VM_LAYOUT_READS);
  attach (fx);
  g_assert_null (fx->vm);
  g_assert_nonnull (fx->error);
  g_assert_nonnull (strstr (fx->error->message, want));
  g_assert_nonnull (strstr (fx->error->message, "cannot learn where RAM block pc.ram is mapped"));
  g_assert_cmpuint (vmce_daemon_get_vms (fx->daemon)->len, ==, 0);
  g_assert_cmpint (test_proc_status_int (pid, pid, "TracerPid"), ==, 0);
  g_assert_true (test_child_command (fx->child, 'p'));
}

/* query-ram-layout answers nonsense: one clear error, the process let go */
static void
test_vm_layout_qmp_bad (Fixture *fx, gconstpointer data)
{
  pid_t pid = fx->child->pid;

  if (!test_ptrace_allowed ()) {
    g_test_skip ("ptrace is not allowed here (not root, or yama ptrace_scope)");
    return;
  }
  script_attach (fx, "{\"pc.ram\": 1}");
  attach (fx);
  g_assert_null (fx->vm);
  g_assert_nonnull (fx->error);
  g_assert_nonnull (strstr (fx->error->message, "query-ram-layout did not return a list"));
  g_assert_cmpuint (vmce_daemon_get_vms (fx->daemon)->len, ==, 0);
  g_assert_cmpint (test_proc_status_int (pid, pid, "TracerPid"), ==, 0);
  g_assert_true (test_child_command (fx->child, 'p'));
}

/* A monitor that answers garbage while vmced attaches: one clear error,
 * journaled once, and the process is left as it was */
static void
test_vm_monitor_garbage (Fixture *fx, gconstpointer data)
{
  g_autofree gchar *journal = NULL;

  fake_qmp_expect (fx->fake, "query-name", "raw:<html>not a monitor</html>");
  attach (fx);
  g_assert_null (fx->vm);
  g_assert_nonnull (fx->error);
  g_assert_nonnull (strstr (fx->error->message, "invalid JSON"));
  g_assert_nonnull (strstr (fx->error->message, fx->qmp_path));
  g_assert_cmpuint (vmce_daemon_get_vms (fx->daemon)->len, ==, 0);
  /* never traced: the monitor is asked before the threads are seized */
  g_assert_cmpint (test_proc_status_int (fx->child->pid, fx->child->pid, "TracerPid"), ==, 0);
  g_assert_true (test_child_command (fx->child, 'p'));
  /* one record of it, with the same line */
  journal = journal_text (fx, "\"type\":\"attach-failed\"");
  g_assert_nonnull (strstr (journal, "\"type\":\"attach-failed\""));
  g_assert_nonnull (strstr (journal, "invalid JSON"));
  g_assert_null (strstr (strstr (journal, "\n") + 1, "\"type\""));
}

/* The monitor goes away while attached: vmced lets the process go, puts
 * its SIGBUS mask back, and says so in the journal */
static void
test_vm_monitor_closes (Fixture *fx, gconstpointer data)
{
  g_autofree gchar *journal = NULL;
  pid_t pid = fx->child->pid;

  if (!test_ptrace_allowed ()) {
    g_test_skip ("ptrace is not allowed here (not root, or yama ptrace_scope)");
    return;
  }
  script_full_attach (fx);
  attach (fx);
  g_assert_no_error (fx->error);
  g_assert_nonnull (fx->vm);
  g_assert_cmpstr (vmce_vm_get_name (fx->vm), ==, "fake-qemu");
  g_assert_cmpint (vmce_vm_get_state (fx->vm), ==, VMCE_VM_READY);
  g_assert_true (vmce_vm_has_inject_mce (fx->vm));
  g_assert_cmpint (test_proc_status_int (pid, pid, "TracerPid"), ==, getpid ());
  g_assert_cmphex (test_proc_status_hex (pid, pid, "SigBlk") & SIGBUS_BIT, ==, 0);

  fake_qmp_hang_up (fx->fake);
  test_wait (vmce_vm_get_state (fx->vm) == VMCE_VM_GONE);
  g_assert_cmpint (vmce_vm_get_state (fx->vm), ==, VMCE_VM_GONE);
  g_assert_cmpuint (vmce_daemon_get_vms (fx->daemon)->len, ==, 0);
  g_assert_cmpint (test_proc_status_int (pid, pid, "TracerPid"), ==, 0);
  g_assert_cmphex (test_proc_status_hex (pid, pid, "SigBlk") & SIGBUS_BIT, ==, SIGBUS_BIT);
  g_assert_true (test_child_command (fx->child, 'p'));

  journal = journal_text (fx, "connection closed");
  g_assert_nonnull (strstr (journal, "\"type\":\"attach\""));
  g_assert_nonnull (strstr (journal, "\"type\":\"detach\""));
  g_assert_nonnull (strstr (journal, "connection closed"));
}

/* The process dies while attached */
static void
test_vm_process_exits (Fixture *fx, gconstpointer data)
{
  g_autofree gchar *journal = NULL;

  if (!test_ptrace_allowed ()) {
    g_test_skip ("ptrace is not allowed here (not root, or yama ptrace_scope)");
    return;
  }
  script_full_attach (fx);
  attach (fx);
  g_assert_nonnull (fx->vm);
  kill (fx->child->pid, SIGKILL);
  test_wait (vmce_vm_get_state (fx->vm) == VMCE_VM_GONE);
  g_assert_cmpint (vmce_vm_get_state (fx->vm), ==, VMCE_VM_GONE);
  fx->child->pid = 0; /* reaped by the watch */
  journal = journal_text (fx, "killed by signal 9");
  g_assert_nonnull (strstr (journal, "\"type\":\"vm-exit\""));
  g_assert_nonnull (strstr (journal, "killed by signal 9"));
}

static void
poison_cb (GObject *source, GAsyncResult *res, gpointer data)
{
  Fixture *fx = data;
  g_autoptr(JsonNode) ev = vmce_sim_poison_finish (fx->vm, res, &fx->error);

  g_assert_no_error (fx->error);
  g_assert_cmpstr (json_object_get_string_member (json_node_get_object (ev), "result"), ==,
                   "injected");
  fx->done = TRUE;
}

/* A guest reset with a poisoned page that cannot be replaced (a file the
 * process may only read): vmced says why, in the journal, and pauses the
 * VM rather than let it boot into the error; the process is let go */
static void
test_vm_reset_unreplaceable (Fixture *fx, gconstpointer data)
{
  g_autoptr(GError) error = NULL;
  g_autofree gchar *path = NULL;
  g_autofree gchar *journal = NULL;
  g_autofree gchar *layout = NULL;
  int fd;

  if (!test_ptrace_allowed ()) {
    g_test_skip ("ptrace is not allowed here (not root, or yama ptrace_scope)");
    return;
  }
  fd = g_file_open_tmp ("vmce-test-ram-XXXXXX", &path, &error);
  g_assert_no_error (error);
  g_assert_cmpint (write (fd, "x", 1), ==, 1);
  g_assert_no_errno (ftruncate (fd, 4096));
  close (fd);
  test_child_free (fx->child);
  fx->child = test_child_spawn_file (path);
  layout = fake_qemu_one_page_layout (fx->child, 0);
  script_attach (fx, layout);
  attach (fx);
  g_assert_no_error (fx->error);
  g_assert_nonnull (fx->vm);

  /* the page taken away, AO sent, the machine check through inject-mce */
  fake_qmp_expect (fx->fake, "inject-mce", "{}");
  fx->done = FALSE;
  vmce_sim_poison_async (fx->vm, 0, FALSE, VMCE_MCE_KIND_AO, VMCE_SIM_TRIGGER_NOW, -1, 12, 5000,
                         poison_cb, fx);
  test_wait (fx->done);
  g_assert_true (fx->done);
  g_assert_nonnull (vmce_poison_set_lookup (vmce_vm_get_poisoned (fx->vm), 0));

  fake_qmp_expect (fx->fake, "query-ram-layout", layout);
  fake_qmp_expect (fx->fake, "stop", "{}");
  /* what vmced says, in order (GLib fails on any other) */
  g_test_expect_message ("vmce-reset", G_LOG_LEVEL_MESSAGE, "*holding its vCPUs*");
  g_test_expect_message ("vmce-reset", G_LOG_LEVEL_WARNING,
                         "*cannot replace the poisoned page at GPA 0x0*Permission denied*");
  g_test_expect_message ("vmce-vm", G_LOG_LEVEL_WARNING,
                         "*pausing it: 1 poisoned page(s) cannot be replaced*");
  g_test_expect_message ("vmce-reset", G_LOG_LEVEL_MESSAGE, "*0 poisoned page(s) replaced*1 failed*");
  fake_qmp_send (fx->fake, "{\"event\": \"RESET\", \"data\": {\"guest\": false, \"reason\": "
                           "\"host-qmp-system-reset\"}, \"timestamp\": {\"seconds\": 1, "
                           "\"microseconds\": 0}}");
  journal = journal_text (fx, "\"type\":\"reset\"");
  g_assert_nonnull (strstr (journal, "\"result\":\"failed\""));
  g_assert_nonnull (strstr (journal, "Permission denied"));
  g_assert_nonnull (strstr (journal, "\"failed\":1"));
  g_assert_nonnull (strstr (journal, "\"vm_paused\":true"));
  test_wait (fake_qmp_script_done (fx->fake));
  g_assert_true (fake_qmp_script_done (fx->fake)); /* QMP stop was sent */
  /* and its answer read */
  for (gint64 until = g_get_monotonic_time () + 100000; g_get_monotonic_time () < until;)
    test_iterate ();
  g_test_assert_expected_messages ();
  /* still poisoned, and known to be */
  g_assert_nonnull (vmce_poison_set_lookup (vmce_vm_get_poisoned (fx->vm), 0));
  /* no thread held */
  g_assert_true (test_child_command (fx->child, 'p'));
  /* and when vmced lets it go, it cannot give that page back either */
  g_test_expect_message ("vmce-sim", G_LOG_LEVEL_WARNING, "*mprotect*Permission denied*");
  vmce_daemon_shutdown (fx->daemon);
  g_test_assert_expected_messages ();
  (void) g_unlink (path);
}

static void
poison_any_cb (GObject *source, GAsyncResult *res, gpointer data)
{
  Fixture *fx = data;
  g_autoptr(GError) error = NULL;
  g_autoptr(JsonNode) ev = vmce_sim_poison_finish (fx->vm, res, &error);

  g_assert_no_error (error);
  fx->event = json_node_ref (ev);
  fx->done = TRUE;
}

/* The monitor stops answering with a vCPU held for an AR machine check:
 * the vCPU is let go within the hold's bound (the guest is not frozen
 * waiting for QEMU), the request still gets its answer once the command
 * times out, and the journal holds the error with why it was not injected */
static void
test_vm_monitor_silent (Fixture *fx, gconstpointer data)
{
  g_autofree gchar *journal = NULL;
  JsonObject *ev;
  pid_t pid = fx->child->pid;
  gint64 start;

  if (!test_ptrace_allowed ()) {
    g_test_skip ("ptrace is not allowed here (not root, or yama ptrace_scope)");
    return;
  }
  attach_one_page (fx);

  /* QEMU takes the command and never answers */
  fake_qmp_expect (fx->fake, "inject-mce", NULL);
  vmce_qmp_client_set_timeout (vmce_vm_get_qmp (fx->vm), 1000);
  fx->done = FALSE;
  start = g_get_monotonic_time ();
  vmce_sim_poison_async (fx->vm, 0, FALSE, VMCE_MCE_KIND_AR, VMCE_SIM_TRIGGER_NOW, 0, 12, 5000,
                         poison_any_cb, fx);
  test_wait (fake_qmp_script_done (fx->fake));
  g_assert_true (fake_qmp_script_done (fx->fake));
  /* the vCPU runs again well before the monitor's timeout */
  g_assert_true (test_child_command (fx->child, 'p'));
  g_assert_cmpint (g_get_monotonic_time () - start, <, 900000);
  g_assert_false (fx->done);

  g_test_expect_message ("vmce-forward", G_LOG_LEVEL_WARNING, "*failed*no answer to inject-mce*");
  test_wait (fx->done);
  g_assert_true (fx->done);
  g_test_assert_expected_messages ();
  ev = json_node_get_object (fx->event);
  g_assert_cmpstr (json_object_get_string_member (ev, "result"), ==, "failed");
  g_assert_nonnull (strstr (json_object_get_string_member (ev, "detail"), "no answer to inject-mce"));
  /* held for at most the bound (100 ms), not for the monitor's 1 s */
  g_assert_cmpint (json_object_get_int_member (ev, "held_us"), <, 500000);
  journal = journal_text (fx, "\"type\":\"memory-error\"");
  g_assert_nonnull (strstr (journal, "\"result\":\"failed\""));
  /* nothing left stopped, and QEMU still watched */
  g_assert_true (test_child_command (fx->child, 'p'));
  g_assert_cmpint (test_proc_status_int (pid, pid, "TracerPid"), ==, getpid ());
}

/* The same AO twice on a page inside a ROM blob (the guest kernel's, whose
 * init pages the guest hands to its processes after boot), on QEMU's main
 * thread: the second is a repeat to forward, not QEMU rewriting its ROM at
 * a reset (only a touch says that). It was taken for one, the page
 * "replaced" and the request never answered (e2e-campaign's repeat case) */
static void
test_vm_repeat_in_rom (Fixture *fx, gconstpointer data)
{
  /* script_attach_tail's ROM blob: vmlinux at 0x1000000, 2 MiB */
  const guint64 gpa = 0x1010000;
  g_autofree gchar *layout = NULL;
  g_autofree gchar *journal = NULL;

  if (!test_ptrace_allowed ()) {
    g_test_skip ("ptrace is not allowed here (not root, or yama ptrace_scope)");
    return;
  }
  layout = fake_qemu_one_page_layout (fx->child, gpa);
  script_attach (fx, layout);
  attach (fx);
  g_assert_no_error (fx->error);
  g_assert_nonnull (fx->vm);

  for (guint i = 0; i < 2; i++) {
    JsonObject *ev;

    fake_qmp_expect (fx->fake, "inject-mce", "{}");
    fx->done = FALSE;
    g_clear_pointer (&fx->event, json_node_unref);
    vmce_sim_poison_async (fx->vm, gpa, FALSE, VMCE_MCE_KIND_AO, VMCE_SIM_TRIGGER_NOW, -1, 12, 3000,
                           poison_any_cb, fx);
    test_wait (fx->done);
    g_assert_true (fx->done);
    ev = json_node_get_object (fx->event);
    g_assert_cmpstr (json_object_get_string_member (ev, "result"), ==, "injected");
    g_assert_cmpstr (json_object_get_string_member (ev, "si_code"), ==, "BUS_MCEERR_AO");
    /* the time to the monitor, and of it the wait in the queue (the second
     * one's behind the gap after the first) */
    g_assert_cmpint (json_object_get_int_member (ev, "queued_us"), >=, 0);
    g_assert_cmpint (json_object_get_int_member (ev, "queued_us"), <=,
                     json_object_get_int_member (ev, "to_monitor_us"));
  }
  g_assert_true (fake_qmp_script_done (fx->fake));
  journal = journal_text (fx, "\"seq\":2");
  g_assert_null (strstr (journal, "\"type\":\"page-replaced\""));
  g_assert_true (test_child_command (fx->child, 'p'));
}

/* An SRAR right after another injection, with its vCPU held: it goes to
 * inject-mce at once instead of waiting for the injection gap, and its vCPU
 * stays held until QEMU's answer (let go for the gap, a TCG vCPU took a
 * pending timer interrupt before the machine check, and the guest panicked:
 * decision.c, vmce_decide_waits_gap()) */
static void
test_vm_ar_jumps_gap (Fixture *fx, gconstpointer data)
{
  JsonObject *ev;
  static const VmceMceKind kinds[] = { VMCE_MCE_KIND_AO, VMCE_MCE_KIND_AR };

  if (!test_ptrace_allowed ()) {
    g_test_skip ("ptrace is not allowed here (not root, or yama ptrace_scope)");
    return;
  }
  attach_one_page (fx);
  vmce_forward_set_gap (fx->vm, 1000); /* vmced's is 20 ms: well past the test's pace */

  for (guint i = 0; i < G_N_ELEMENTS (kinds); i++) {
    fake_qmp_expect (fx->fake, "inject-mce", "{}");
    fx->done = FALSE;
    g_clear_pointer (&fx->event, json_node_unref);
    vmce_sim_poison_async (fx->vm, 0, FALSE, kinds[i], VMCE_SIM_TRIGGER_NOW, 0, 12, 3000, poison_any_cb, fx);
    test_wait (fx->done);
    g_assert_true (fx->done);
  }
  g_assert_true (fake_qmp_script_done (fx->fake));
  ev = json_node_get_object (fx->event);
  g_assert_cmpstr (json_object_get_string_member (ev, "si_code"), ==, "BUS_MCEERR_AR");
  g_assert_cmpstr (json_object_get_string_member (ev, "result"), ==, "injected");
  /* not queued behind the gap the AO just opened */
  g_assert_cmpint (json_object_get_int_member (ev, "queued_us"), <, 500000);
  /* held past the command's sending, until the answer */
  g_assert_cmpint (json_object_get_int_member (ev, "held_us"), >=,
                   json_object_get_int_member (ev, "to_monitor_us"));
  g_assert_true (test_child_command (fx->child, 'p'));
}

/* inject-mce's refusal while a machine check is in progress (qemu-patches/
 * 0001) */
#define BUSY_REPLY "error:CPU 0: a machine check is still in progress (MCG_STATUS.MCIP); another one " \
                   "now would shut the guest down"

/* MEMORY_FAILURE as qemu-patches/ 0002 sends it, about GPA 0 */
static void
send_memory_failure (Fixture *fx, const gchar *action)
{
  g_autofree gchar *line = g_strdup_printf (
      "{\"event\": \"MEMORY_FAILURE\", \"data\": {\"recipient\": \"guest\", \"action\": \"%s\", "
      "\"flags\": {\"action-required\": false, \"recursive\": false}, \"gpa\": 0, \"cpu\": 0}, "
      "\"timestamp\": {\"seconds\": 1, \"microseconds\": 0}}",
      action);

  fake_qmp_send (fx->fake, line);
}

static JsonObject *
poison_ao (Fixture *fx)
{
  fx->done = FALSE;
  g_clear_pointer (&fx->event, json_node_unref);
  vmce_sim_poison_async (fx->vm, 0, FALSE, VMCE_MCE_KIND_AO, VMCE_SIM_TRIGGER_NOW, -1, 12, 5000, poison_any_cb, fx);
  test_wait (fx->done);
  g_assert_true (fx->done);
  return json_node_get_object (fx->event);
}

/* QEMU says "busy" twice: vmced asks again, with no fixed gap, and the
 * error is injected and journaled with how often it was refused; the next
 * error goes at once after it */
static void
test_vm_busy_then_injected (Fixture *fx, gconstpointer data)
{
  JsonObject *ev;
  g_autofree gchar *journal = NULL;

  if (!test_ptrace_allowed ()) {
    g_test_skip ("ptrace is not allowed here (not root, or yama ptrace_scope)");
    return;
  }
  attach_one_page (fx);
  vmce_forward_set_gap (fx->vm, 10000); /* HMP's: must not apply to inject-mce */

  fake_qmp_expect (fx->fake, "inject-mce", BUSY_REPLY);
  fake_qmp_expect (fx->fake, "inject-mce", BUSY_REPLY);
  fake_qmp_expect (fx->fake, "inject-mce", "{}");
  ev = poison_ao (fx);
  g_assert_cmpstr (json_object_get_string_member (ev, "result"), ==, "injected");
  g_assert_cmpint (json_object_get_int_member (ev, "busy"), ==, 2);
  g_assert_cmpint (json_object_get_int_member (ev, "dropped"), ==, 0);
  /* an x86 guest's record is as it was: a machine check, no Arm path */
  g_assert_false (json_object_has_member (ev, "path"));
  g_assert_false (json_object_has_member (ev, "cper"));
  g_assert_true (fake_qmp_script_done (fx->fake));

  fake_qmp_expect (fx->fake, "inject-mce", "{}");
  ev = poison_ao (fx);
  g_assert_cmpstr (json_object_get_string_member (ev, "result"), ==, "injected");
  g_assert_cmpint (json_object_get_int_member (ev, "busy"), ==, 0);
  /* not behind the 10 s gap */
  g_assert_cmpint (json_object_get_int_member (ev, "queued_us"), <, 1000000);
  journal = journal_text (fx, "\"seq\":2");
  g_assert_nonnull (strstr (journal, "\"busy\":2"));
  g_assert_true (test_child_command (fx->child, 'p'));
}

/* A QEMU that answers "busy" for ever: at the bound the error is journaled
 * as not injected, with why, and the queue goes on */
static void
test_vm_busy_forever (Fixture *fx, gconstpointer data)
{
  JsonObject *ev;
  const gchar *detail;

  if (!test_ptrace_allowed ()) {
    g_test_skip ("ptrace is not allowed here (not root, or yama ptrace_scope)");
    return;
  }
  attach_one_page (fx);
  vmce_forward_set_retry_bound (fx->vm, 40);
  /* 1 + 1 + 2 + 4 + 8 + 16 ms of pauses: the 40 ms are over by the 8th try,
   * sooner on a loaded machine where timers fire late */
  for (guint i = 0; i < 20; i++)
    fake_qmp_expect (fx->fake, "inject-mce", BUSY_REPLY);
  g_test_expect_message ("vmce-forward", G_LOG_LEVEL_WARNING, "*failed*not injected*busy*");
  ev = poison_ao (fx);
  g_test_assert_expected_messages ();
  g_assert_cmpstr (json_object_get_string_member (ev, "result"), ==, "failed");
  detail = json_object_get_string_member (ev, "detail");
  g_assert_nonnull (strstr (detail, "a machine check stayed in progress on vCPU 0"));
  g_assert_cmpint (json_object_get_int_member (ev, "busy"), >=, 2);
  g_assert_cmpint (json_object_get_int_member (ev, "busy"), <=, 8);
  g_assert_cmpuint (fake_qmp_get_n_requests (fx->fake), >=, 2);
  /* the next one is not stuck behind it */
  fake_qmp_clear_script (fx->fake);
  fake_qmp_expect (fx->fake, "inject-mce", "{}");
  ev = poison_ao (fx);
  g_assert_cmpstr (json_object_get_string_member (ev, "result"), ==, "injected");
  g_assert_true (test_child_command (fx->child, 'p'));
}

/* KVM: inject-mce answers before the vCPU takes the error, and QEMU's vCPU
 * drops it as too early (MEMORY_FAILURE "ignore"): it is sent again, and
 * journaled as injected only once MEMORY_FAILURE says "inject" */
static void
test_vm_dropped_sent_again (Fixture *fx, gconstpointer data)
{
  JsonObject *ev;
  guint n;

  if (!test_ptrace_allowed ()) {
    g_test_skip ("ptrace is not allowed here (not root, or yama ptrace_scope)");
    return;
  }
  fx->kvm = TRUE;
  attach_one_page (fx);
  g_assert_true (vmce_vm_is_kvm (fx->vm));
  n = fake_qmp_get_n_requests (fx->fake);
  fake_qmp_expect (fx->fake, "inject-mce", "{}");
  fake_qmp_expect (fx->fake, "inject-mce", "{}");
  fx->done = FALSE;
  vmce_sim_poison_async (fx->vm, 0, FALSE, VMCE_MCE_KIND_AO, VMCE_SIM_TRIGGER_NOW, -1, 12, 5000, poison_any_cb, fx);
  test_wait (fake_qmp_get_n_requests (fx->fake) == n + 1);
  /* answered, not yet taken: nothing journaled */
  for (gint64 until = g_get_monotonic_time () + 50000; g_get_monotonic_time () < until;)
    test_iterate ();
  g_assert_false (fx->done);
  send_memory_failure (fx, "ignore");
  test_wait (fake_qmp_get_n_requests (fx->fake) == n + 2);
  g_assert_false (fx->done);
  send_memory_failure (fx, "inject");
  test_wait (fx->done);
  g_assert_true (fx->done);
  ev = json_node_get_object (fx->event);
  g_assert_cmpstr (json_object_get_string_member (ev, "result"), ==, "injected");
  g_assert_cmpint (json_object_get_int_member (ev, "dropped"), ==, 1);
  g_assert_cmpstr (json_object_get_string_member (json_object_get_object_member (ev, "qemu_event"), "action"),
                   ==, "inject");
  g_assert_true (test_child_command (fx->child, 'p'));
}

/* KVM, and QEMU never sends the event: injected as far as vmced can tell,
 * and the journal says it is unconfirmed */
static void
test_vm_event_never_comes (Fixture *fx, gconstpointer data)
{
  JsonObject *ev;

  if (!test_ptrace_allowed ()) {
    g_test_skip ("ptrace is not allowed here (not root, or yama ptrace_scope)");
    return;
  }
  fx->kvm = TRUE;
  attach_one_page (fx);
  fake_qmp_expect (fx->fake, "inject-mce", "{}");
  ev = poison_ao (fx);
  g_assert_cmpstr (json_object_get_string_member (ev, "result"), ==, "injected");
  g_assert_nonnull (strstr (json_object_get_string_member (ev, "detail"), "unconfirmed"));
  g_assert_cmpint (json_object_get_int_member (ev, "latency_us"), <, 1000000);
  g_assert_true (test_child_command (fx->child, 'p'));
}

/* The monitor goes away while an error waits to be sent again: it is
 * journaled as not injected, nothing is held */
static void
test_vm_gone_while_busy (Fixture *fx, gconstpointer data)
{
  g_autofree gchar *journal = NULL;
  pid_t pid = fx->child->pid;

  if (!test_ptrace_allowed ()) {
    g_test_skip ("ptrace is not allowed here (not root, or yama ptrace_scope)");
    return;
  }
  attach_one_page (fx);
  vmce_forward_set_retry_bound (fx->vm, 60000);
  for (guint i = 0; i < 3; i++)
    fake_qmp_expect (fx->fake, "inject-mce", BUSY_REPLY);
  fx->done = FALSE;
  vmce_sim_poison_async (fx->vm, 0, FALSE, VMCE_MCE_KIND_AO, VMCE_SIM_TRIGGER_NOW, -1, 12, 5000, poison_any_cb, fx);
  test_wait (fake_qmp_script_done (fx->fake));
  g_assert_false (fx->done);
  fake_qmp_hang_up (fx->fake);
  test_wait (fx->done && vmce_vm_get_state (fx->vm) == VMCE_VM_GONE);
  g_assert_true (fx->done);
  g_assert_cmpstr (json_object_get_string_member (json_node_get_object (fx->event), "result"), ==, "failed");
  journal = journal_text (fx, "while it waited to be sent again");
  g_assert_nonnull (strstr (journal, "\"result\":\"failed\""));
  g_assert_cmpint (test_proc_status_int (pid, pid, "TracerPid"), ==, 0);
  g_assert_true (test_child_command (fx->child, 'p'));
}

/* --- Arm64 guests: told through GHES ------------------------------------ */

#define ARM_RAM 0x40000000 /* where the virt machine's RAM starts */
#define ARM_COMMANDS_10_2 "[{\"name\": \"query-ram-layout\"}, {\"name\": \"inject-ghes-v2-error\"}]"

static void
attach_arm_acpi (Fixture *fx, const gchar *commands, gboolean acpi)
{
  g_autofree gchar *layout = fake_qemu_one_page_layout (fx->child, ARM_RAM);

  fake_qemu_script_attach_arm (fx->fake, fx->child, layout, commands, TRUE, "virt-10.2-machine", acpi);
  attach (fx);
  g_assert_no_error (fx->error);
  g_assert_nonnull (fx->vm);
  g_assert_cmpint (vmce_vm_get_arch (fx->vm), ==, VMCE_ARCH_ARM64);
}

static void
attach_arm (Fixture *fx, const gchar *commands)
{
  attach_arm_acpi (fx, commands, TRUE);
}

static void
inject_cb (GObject *source, GAsyncResult *res, gpointer data)
{
  Fixture *fx = data;
  g_autoptr(JsonNode) ev = vmce_forward_inject_finish (fx->vm, res, &fx->error);

  fx->done = TRUE;
}

static JsonObject *
poison_ao_at (Fixture *fx, guint64 gpa)
{
  fx->done = FALSE;
  g_clear_pointer (&fx->event, json_node_unref);
  vmce_sim_poison_async (fx->vm, gpa, FALSE, VMCE_MCE_KIND_AO, VMCE_SIM_TRIGGER_NOW, -1, 12, 5000, poison_any_cb, fx);
  test_wait (fx->done);
  g_assert_true (fx->done);
  return json_node_get_object (fx->event);
}

/* QEMU 10.2 has inject-ghes-v2-error: an AO goes through it, as the CPER
 * record of that page, and the journal says which way it went. The guest
 * not acknowledging the record before yet is "busy": asked again */
static void
test_vm_arm_ghes (Fixture *fx, gconstpointer data)
{
  JsonObject *ev;
  g_autoptr(JsonParser) parser = json_parser_new ();
  g_autofree guchar *record = NULL;
  g_autofree gchar *journal = NULL;
  gsize len = 0;

  if (!test_ptrace_allowed ()) {
    g_test_skip ("ptrace is not allowed here (not root, or yama ptrace_scope)");
    return;
  }
  g_test_expect_message ("vmce-vm", G_LOG_LEVEL_MESSAGE, "*ARs will be refused*x-vmce-inject-sea*");
  attach_arm (fx, ARM_COMMANDS_10_2);
  g_test_assert_expected_messages ();

  fake_qmp_expect (fx->fake, "inject-ghes-v2-error",
                   "error:OSPM does not acknowledge previous error, so can not record CPER for current "
                   "error anymore");
  fake_qmp_expect (fx->fake, "inject-ghes-v2-error", "{}");
  ev = poison_ao_at (fx, ARM_RAM);
  g_assert_cmpstr (json_object_get_string_member (ev, "result"), ==, "injected");
  g_assert_cmpstr (json_object_get_string_member (ev, "path"), ==, "ghes-qmp");
  g_assert_cmpstr (json_object_get_string_member (ev, "via"), ==, "qmp");
  g_assert_cmpint (json_object_get_int_member (ev, "busy"), ==, 1);
  g_assert_true (json_object_get_null_member (ev, "mce"));
  g_assert_true (fake_qmp_script_done (fx->fake));

  /* what QEMU got: the journal's record, in base64, of that very page */
  g_assert_true (json_parser_load_from_data (parser, fake_qmp_get_last_arguments (fx->fake), -1, NULL));
  g_assert_cmpstr (json_object_get_string_member (json_node_get_object (json_parser_get_root (parser)), "cper"),
                   ==, json_object_get_string_member (ev, "cper"));
  record = g_base64_decode (json_object_get_string_member (ev, "cper"), &len);
  g_assert_cmpuint (len, ==, VMCE_CPER_GESB_SIZE + VMCE_CPER_GEDE_SIZE + VMCE_CPER_MEM_SIZE);
  g_assert_cmphex (record[20 + 72 + 16 + 3], ==, 0x40); /* PA 0x40000000, little-endian */
  journal = journal_text (fx, "\"path\":\"ghes-qmp\"");
  g_assert_nonnull (strstr (journal, "\"path\":\"ghes-qmp\""));
  /* the attach record says what this QEMU offers */
  g_assert_nonnull (strstr (journal, "\"arch\":\"aarch64\",\"inject\":\"qmp inject-ghes-v2-error\","
                                     "\"ghes\":{\"ras\":true,\"acpi\":true,\"machine\":\"virt-10.2-machine\","
                                     "\"inject_ghes\":true,\"inject_sea\":false}"));
  g_assert_true (test_child_command (fx->child, 'p'));
}

/* QEMU 10.0 has no such command: said once at attach; each AO refused in
 * one line naming what it would take, nothing sent to QEMU, its thread
 * let go */
static void
test_vm_arm_no_command (Fixture *fx, gconstpointer data)
{
  JsonObject *ev;
  const gchar *detail;
  guint requests;

  if (!test_ptrace_allowed ()) {
    g_test_skip ("ptrace is not allowed here (not root, or yama ptrace_scope)");
    return;
  }
  g_test_expect_message ("vmce-vm", G_LOG_LEVEL_MESSAGE,
                         "*AOs will be refused: this QEMU has no inject-ghes-v2-error*QEMU >= 10.2*");
  attach_arm (fx, "[{\"name\": \"query-ram-layout\"}]");
  g_test_assert_expected_messages ();
  requests = fake_qmp_get_n_requests (fx->fake);

  ev = poison_ao_at (fx, ARM_RAM);
  g_assert_cmpstr (json_object_get_string_member (ev, "result"), ==, "refused");
  g_assert_cmpstr (json_object_get_string_member (ev, "path"), ==, "refused");
  g_assert_true (json_object_get_null_member (ev, "cper"));
  detail = json_object_get_string_member (ev, "detail");
  g_assert_nonnull (strstr (detail, "refused: this QEMU has no inject-ghes-v2-error"));
  g_assert_nonnull (strstr (detail, "QEMU >= 10.2"));
  g_assert_null (strchr (detail, '\n'));
  g_assert_cmpuint (fake_qmp_get_n_requests (fx->fake), ==, requests);
  /* the thread runs again, the VM is not paused */
  g_assert_true (test_child_command (fx->child, 'p'));
  g_assert_true (vmce_vm_is_running (fx->vm));

  /* vmcectl inject: the same line, as the request's error */
  fx->done = FALSE;
  vmce_forward_inject_async (fx->vm, ARM_RAM, VMCE_MCE_KIND_AO, -1, inject_cb, fx);
  test_wait (fx->done);
  g_assert_error (fx->error, VMCE_ERROR, VMCE_ERROR_NOT_SUPPORTED);
  g_assert_nonnull (strstr (fx->error->message, "vm fake-arm: this QEMU has no inject-ghes-v2-error"));
  g_assert_cmpuint (fake_qmp_get_n_requests (fx->fake), ==, requests);
}

/* A guest booted without UEFI firmware has no ACPI device, so no GHES:
 * attach goes on and says so once, and an AO is refused, not sent to a
 * command that would answer success having written nothing */
static void
test_vm_arm_no_acpi (Fixture *fx, gconstpointer data)
{
  JsonObject *ev;
  guint requests;

  if (!test_ptrace_allowed ()) {
    g_test_skip ("ptrace is not allowed here (not root, or yama ptrace_scope)");
    return;
  }
  g_test_expect_message ("vmce-vm", G_LOG_LEVEL_MESSAGE,
                         "*memory errors will not be told: the guest has no ACPI, so no GHES*");
  attach_arm_acpi (fx, ARM_COMMANDS_10_2, FALSE);
  g_test_assert_expected_messages ();
  requests = fake_qmp_get_n_requests (fx->fake);
  ev = poison_ao_at (fx, ARM_RAM);
  g_assert_cmpstr (json_object_get_string_member (ev, "path"), ==, "refused");
  g_assert_nonnull (strstr (json_object_get_string_member (ev, "detail"), "direct -kernel boot"));
  g_assert_cmpuint (fake_qmp_get_n_requests (fx->fake), ==, requests);
  g_assert_true (test_child_command (fx->child, 'p'));
}

int
main (int argc, char **argv)
{
  test_block_sigchld ();
  g_test_init (&argc, &argv, NULL);
  g_test_add ("/vm/monitor-garbage", Fixture, NULL, fixture_setup, test_vm_monitor_garbage,
              fixture_teardown);
  g_test_add ("/vm/monitor-closes", Fixture, NULL, fixture_setup, test_vm_monitor_closes,
              fixture_teardown);
  g_test_add ("/vm/process-exits", Fixture, NULL, fixture_setup, test_vm_process_exits,
              fixture_teardown);
  g_test_add ("/vm/layout-qmp", Fixture, NULL, fixture_setup, test_vm_layout_qmp, fixture_teardown);
  g_test_add ("/vm/remapped-while-read", Fixture, NULL, fixture_setup, test_vm_remapped_while_read,
              fixture_teardown);
  g_test_add ("/vm/remapped-every-read", Fixture, NULL, fixture_setup, test_vm_remapped_every_read,
              fixture_teardown);
  g_test_add ("/vm/mtree-unknown", Fixture, NULL, fixture_setup, test_vm_mtree_unknown,
              fixture_teardown);
  g_test_add ("/vm/reset-unreplaceable", Fixture, NULL, fixture_setup,
              test_vm_reset_unreplaceable, fixture_teardown);
  g_test_add ("/vm/repeat-in-rom", Fixture, NULL, fixture_setup, test_vm_repeat_in_rom,
              fixture_teardown);
  g_test_add ("/vm/monitor-silent", Fixture, NULL, fixture_setup, test_vm_monitor_silent,
              fixture_teardown);
  g_test_add ("/vm/ar-jumps-gap", Fixture, NULL, fixture_setup, test_vm_ar_jumps_gap, fixture_teardown);
  g_test_add ("/vm/busy-then-injected", Fixture, NULL, fixture_setup, test_vm_busy_then_injected,
              fixture_teardown);
  g_test_add ("/vm/busy-forever", Fixture, NULL, fixture_setup, test_vm_busy_forever, fixture_teardown);
  g_test_add ("/vm/dropped-sent-again", Fixture, NULL, fixture_setup, test_vm_dropped_sent_again,
              fixture_teardown);
  g_test_add ("/vm/event-never-comes", Fixture, NULL, fixture_setup, test_vm_event_never_comes,
              fixture_teardown);
  g_test_add ("/vm/gone-while-busy", Fixture, NULL, fixture_setup, test_vm_gone_while_busy, fixture_teardown);
  g_test_add ("/vm/layout-qmp-bad", Fixture, NULL, fixture_setup, test_vm_layout_qmp_bad,
              fixture_teardown);
  g_test_add ("/vm/arm-ghes", Fixture, NULL, fixture_setup, test_vm_arm_ghes, fixture_teardown);
  g_test_add ("/vm/arm-no-command", Fixture, NULL, fixture_setup, test_vm_arm_no_command, fixture_teardown);
  g_test_add ("/vm/arm-no-acpi", Fixture, NULL, fixture_setup, test_vm_arm_no_acpi, fixture_teardown);
  return g_test_run ();
}
