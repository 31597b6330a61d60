/*
 * What vmced does with one memory-error signal: a pure function of what is
 * known when the thread stops, so that every rule is in one place and each
 * combination is tested as a table (tests/test-decision.c).
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <glib.h>

#include "mce-encode.h"
#include "policy.h"

typedef enum {
  VMCE_DECISION_PASS,     /* the signal goes on to QEMU, as without vmced */
  VMCE_DECISION_RELOOK,   /* read the RAM layout again (thread held), then decide again */
  /* (VMCE_DECISION_PASS with refresh set: decided with the layout there is,
   * and a new one read for the next error) */
  VMCE_DECISION_COALESCE, /* a repeat of an error whose machine check is on its way */
  VMCE_DECISION_IGNORE,   /* suppressed and journaled: the guest hears of it on consumption */
  VMCE_DECISION_STOP,     /* suppressed, the VM paused */
  VMCE_DECISION_REFUSE,   /* suppressed: the guest cannot recover from it */
  VMCE_DECISION_INJECT,   /* a machine check into the guest */
  VMCE_DECISION_RETRY,    /* suppressed, not injected: the vCPU tries its load again */
  VMCE_DECISION_PARK,     /* the vCPU's thread kept stopped by vmced, and the VM's other vCPUs */
} VmceDecisionAction;

/* Where the faulting HVA is, as the RAM layout says */
typedef enum {
  VMCE_WHERE_RAM,      /* guest RAM: the HVA has a GPA */
  VMCE_WHERE_BLOCK,    /* a RAM block that no GPA maps (an unplugged DIMM, a ROM's spare) */
  VMCE_WHERE_ELSEWHERE, /* QEMU's own memory, or no layout read yet */
} VmceWhere;

/* The guest's architecture (query-cpus-fast's "target"): x86 guests are
 * told with a machine check, Arm64 ones through ACPI GHES */
typedef enum {
  VMCE_ARCH_X86 = 0,
  VMCE_ARCH_ARM64,
} VmceArch;

/* The two commands an Arm64 QEMU can be told through: QEMU 10.2's, which
 * records a CPER in the guest's GHES and raises the GED's GPIO error
 * event; and vmce's QEMU patch's (qemu-patches/10.2/0010), which records
 * it in the SEA source and raises a synchronous external abort on one
 * vCPU, as QEMU does itself for a BUS_MCEERR_AR under KVM */
#define VMCE_QMP_INJECT_GHES "inject-ghes-v2-error"
#define VMCE_QMP_INJECT_SEA  "x-vmce-inject-sea"

/* What an Arm64 QEMU offers for telling its guest */
typedef struct {
  gboolean ras;          /* the virt machine's ras=on: HEST and GHES built */
  /* an ACPI device (query-acpi-ospm-status answers): the virt machine
   * makes its GED, which holds the GHES state, only when it boots UEFI
   * firmware with ACPI on (hw/arm/virt.c, machvirt_init()) */
  gboolean acpi;
  gboolean ghes_command; /* VMCE_QMP_INJECT_GHES */
  gboolean sea_command;  /* VMCE_QMP_INJECT_SEA */
  /* the QOM type of /machine ("virt-10.2-machine"); virt-10.1 and older
   * build HEST with the SEA source only, into whose error block QEMU then
   * writes the QMP record, and no guest reads it on a GPIO event */
  gchar *machine;
} VmceArmQemu;

/* How an Arm64 guest is told: the journal's "path" */
typedef enum {
  VMCE_ARM_PATH_NONE,     /* not an Arm64 guest, or not told at all (passed, ignored, ...) */
  VMCE_ARM_PATH_GHES_QMP, /* VMCE_QMP_INJECT_GHES */
  VMCE_ARM_PATH_SEA,      /* VMCE_QMP_INJECT_SEA */
  VMCE_ARM_PATH_REFUSED,  /* not told: this QEMU cannot */
} VmceArmPath;

/* What is known at the stop */
typedef struct {
  VmceMceKind kind;      /* from si_code */
  VmcePolicy policy;
  gboolean kvm;          /* else TCG */
  const VmceCpuModel *cpu_model; /* what the guest sees */
  VmceWhere where;
  const gchar *block;    /* VMCE_WHERE_BLOCK: its name and offset */
  guint64 block_offset;
  gboolean layout_fresh; /* the layout was read again for this stop */
  gboolean main_thread;  /* QEMU's main loop thread, which runs its monitor */
  gint vcpu_index;       /* the thread's vCPU, or -1: not a vCPU thread */
  gint first_vcpu_index; /* where an AO goes, or -1: vCPUs not known */
  gboolean simulated;    /* vmced took the page away itself (sim-poison) */
  gboolean same_page_on_its_way; /* an injection for this guest page is queued or in flight */
  gboolean known_poisoned; /* vmced knows the guest page as poisoned (told, or found at attach) */
  guint refaults;        /* ARs on it since, before this one */
  /* TCG: vmced tried to make the page readable again for the vCPU's load
   * and could not (@stuck_why says why), @stuck_faults times before this
   * one; @parked: vmced holds this VM's vCPUs for such a page already */
  gboolean stuck;
  const gchar *stuck_why;
  guint stuck_faults;
  gboolean parked;
  VmceArch arch;
  const VmceArmQemu *arm; /* VMCE_ARCH_ARM64 */
} VmceFacts;

typedef struct {
  VmceDecisionAction action;
  VmceMceKind kind;         /* what the guest is told (an AR QEMU consumed becomes AO) */
  VmceMceStyle style;       /* VMCE_DECISION_INJECT */
  guint cpu;                /* VMCE_DECISION_INJECT: QEMU's cpu-index */
  gboolean give_back_page;  /* the simulated page comes back first (QEMU must go on) */
  gboolean free_tcg_vcpu;   /* TCG: let the vCPU's load complete before anything else */
  gboolean hold;            /* keep the thread stopped until the injection is answered */
  gboolean pause;           /* pause the VM as well */
  gboolean count_refault;   /* one more AR on a page the guest was told about */
  gboolean refresh_layout;  /* read the RAM layout again once the thread is let go */
  gchar *detail;            /* why, for the journal; NULL when nothing needs saying */
  VmceArmPath path;         /* an Arm64 guest: how it is told, or refused */
} VmceDecision;

/* Three ARs on a page after its machine check: the guest is not handling
 * it. And three loads of a page vmced cannot give back: the vCPU will
 * never leave that load. */
#define VMCE_REFAULT_LIMIT 3

void vmce_decide (const VmceFacts *facts, VmceDecision *decision);
/* How an Arm64 guest is told of a @kind error (on @cpu for an AR), by what
 * @arm offers; VMCE_ARM_PATH_REFUSED and @why (one line, naming what it
 * would take) where it cannot be */
VmceArmPath vmce_decide_arm_path (const VmceArmQemu *arm, VmceMceKind kind, guint cpu, gchar **why);
/* NULL, or the one line an operator reads at attach about what this QEMU
 * cannot tell its guest */
gchar *vmce_decide_arm_said_at_attach (const VmceArmQemu *arm);
const gchar *vmce_arm_path_to_string (VmceArmPath path);
gboolean vmce_arm_machine_has_qmp_source (const gchar *machine);
void vmce_decision_clear (VmceDecision *decision);
gboolean vmce_decide_waits_gap (gboolean via_inject_mce);

/* What QEMU has said of one injection so far */
typedef enum {
  VMCE_ANSWER_TAKEN,   /* injected: HMP mce's empty answer, inject-mce's under TCG, or MEMORY_FAILURE "inject" */
  VMCE_ANSWER_QUEUED,  /* inject-mce answered under KVM: the vCPU has yet to take it */
  VMCE_ANSWER_BUSY,    /* inject-mce refused it: a machine check still in progress on the vCPU */
  VMCE_ANSWER_DROPPED, /* MEMORY_FAILURE "ignore": the vCPU dropped it as too early */
  VMCE_ANSWER_SILENT,  /* queued, and no MEMORY_FAILURE about it came */
  VMCE_ANSWER_ERROR,   /* any other failure */
} VmceAnswer;

/* What the forwarder does next with that injection */
typedef enum {
  VMCE_THEN_INJECTED,    /* journal it injected */
  VMCE_THEN_AWAIT_EVENT, /* keep it in flight until MEMORY_FAILURE says what became of it */
  VMCE_THEN_RETRY,       /* send it again after a pause */
  VMCE_THEN_FAILED,      /* journal it not injected, with why */
  VMCE_THEN_UNCONFIRMED, /* journal it injected, saying QEMU never confirmed it */
} VmceThen;

/* How long vmced goes on asking a QEMU that says "busy" or drops the error */
#define VMCE_RETRY_BOUND_MS 2000
/* How long it waits for the MEMORY_FAILURE of an error queued on a KVM vCPU */
#define VMCE_EVENT_WAIT_MS 1000

VmceThen vmce_decide_after_answer (VmceAnswer answer, gint64 retrying_for_ms, gint64 bound_ms);
guint vmce_decide_retry_pause_ms (guint tries);
const gchar *vmce_answer_to_string (VmceAnswer answer);

/* How a memory-error SIGBUS passed on to QEMU reaches it: as the kernel
 * would have sent it with no vmced there */
typedef enum {
  VMCE_PASS_AS_IS,   /* the thread takes it (QEMU's handler) */
  VMCE_PASS_PENDING, /* blocked again: it stays pending for QEMU's signalfd */
  VMCE_PASS_FORCED,  /* SIGBUS's action set to the default first: QEMU is killed */
} VmcePassHow;
VmcePassHow vmce_decide_pass_how (VmceMceKind kind, gboolean thread_blocks_sigbus);
const gchar *vmce_decision_action_to_string (VmceDecisionAction action);

G_DEFINE_AUTO_CLEANUP_CLEAR_FUNC (VmceDecision, vmce_decision_clear)
