/*
 * Every combination of what vmced knows at a memory-error stop, against a
 * table of what it must do.
 *
 * The table reads top down like a person would explain the rules: the
 * first row that matches a combination says the action; the invariants
 * below it hold for every combination whatever the action.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <glib.h>
#include <string.h>

#include "decision.h"

/* 0 is "any" in every match column */
typedef enum { K_ANY, K_AO, K_AR } KindM;
typedef enum { W_ANY, W_RAM, W_BLOCK, W_ELSEWHERE, W_NOT_RAM } WhereM;
/* T_QEMU matches any thread of QEMU's own (T_OTHER or T_MAIN, the main
 * loop thread, which runs the monitor); T_NOT_MAIN any but the main one */
typedef enum { T_ANY, T_VCPU, T_OTHER, T_MAIN, T_QEMU, T_NOT_MAIN } ThreadM;
typedef enum { B_ANY, B_YES, B_NO } BoolM;
typedef enum { R_ANY, R_NONE, R_ON_ITS_WAY, R_KNOWN, R_KNOWN_AT_LIMIT } RepeatM;
typedef enum { C_ANY, C_INTEL_SER_P, C_INTEL, C_AMD_SUCCOR, C_AMD, C_CANNOT_RECOVER } CpuM;
/* the page of a TCG vCPU's load: given back (or never tried), or not, and
 * how often before; S_STUCK_ANY matches every stuck one */
typedef enum { S_ANY, S_NO, S_STUCK, S_STUCK_AT_LIMIT, S_PARKED, S_STUCK_ANY } StuckM;
typedef enum { P_ANY = -1 } PolicyAny;

typedef struct {
  /* match */
  gint policy; /* a VmcePolicy or P_ANY */
  KindM kind;
  WhereM where;
  BoolM fresh;
  ThreadM thread;
  BoolM simulated;
  RepeatM repeat;
  CpuM cpu;
  BoolM tcg;
  StuckM stuck;
  /* expect */
  VmceDecisionAction action;
  KindM told;          /* kind the guest is told, K_ANY: not checked */
  VmceMceStyle style;  /* for INJECT */
  BoolM pause;
  const gchar *detail; /* a substring, or NULL: no detail */
} Row;

#define ANYP P_ANY
static const Row rules[] = {
  /* not the guest's business */
  { VMCE_POLICY_PASS, .action = VMCE_DECISION_PASS, .pause = B_NO, .detail = "policy pass" },
  { ANYP, .where = W_NOT_RAM, .fresh = B_NO, .thread = T_NOT_MAIN, .action = VMCE_DECISION_RELOOK,
    .pause = B_NO },
  { ANYP, .where = W_ELSEWHERE, .action = VMCE_DECISION_PASS, .pause = B_NO,
    .detail = "HVA is not guest RAM" },
  { ANYP, .where = W_BLOCK, .action = VMCE_DECISION_PASS, .pause = B_NO,
    .detail = "RAM block pc.ram-spare at offset 0x3000, which no guest physical address maps" },
  { ANYP, K_AR, .thread = T_QEMU, .simulated = B_NO, .action = VMCE_DECISION_PASS, .pause = B_NO,
    .detail = "QEMU itself consumed the poison" },
  /* a TCG vCPU in a load vmced cannot complete: nothing can reach it */
  { ANYP, K_AR, .thread = T_VCPU, .tcg = B_YES, .stuck = S_STUCK, .action = VMCE_DECISION_RETRY,
    .told = K_AR, .pause = B_NO, .detail = "it reads it again (1 of 3 before the VM is paused)" },
  { ANYP, K_AR, .thread = T_VCPU, .tcg = B_YES, .stuck = S_STUCK_ANY, .action = VMCE_DECISION_PARK,
    .told = K_AR, .pause = B_NO, .detail = "paused by vmced" },
  /* repeats of a consumed page */
  { ANYP, K_AR, .thread = T_VCPU, .repeat = R_ON_ITS_WAY, .action = VMCE_DECISION_COALESCE,
    .told = K_AR, .pause = B_NO },
  { ANYP, K_AR, .thread = T_VCPU, .repeat = R_KNOWN_AT_LIMIT, .action = VMCE_DECISION_STOP,
    .told = K_AR, .pause = B_YES, .detail = "keeps consuming this page" },
  /* the operator's policy; an AR that QEMU itself consumed is an AO to the guest */
  { VMCE_POLICY_IGNORE_AO, K_AO, .action = VMCE_DECISION_IGNORE, .told = K_AO, .pause = B_NO,
    .detail = "policy ignore-ao" },
  { VMCE_POLICY_IGNORE_AO, K_AR, .thread = T_QEMU, .action = VMCE_DECISION_IGNORE, .told = K_AO,
    .pause = B_NO, .detail = "policy ignore-ao" },
  { VMCE_POLICY_STOP, .action = VMCE_DECISION_STOP, .pause = B_YES, .detail = "policy stop" },
  /* a guest that cannot recover */
  { VMCE_POLICY_FORCE, .cpu = C_CANNOT_RECOVER, .action = VMCE_DECISION_INJECT,
    .style = VMCE_MCE_STYLE_INTEL, .pause = B_NO, .detail = "policy force: injected Intel-style" },
  { ANYP, K_AO, .cpu = C_CANNOT_RECOVER, .action = VMCE_DECISION_REFUSE, .told = K_AO,
    .pause = B_NO, .detail = "refused" },
  { ANYP, K_AR, .thread = T_QEMU, .cpu = C_CANNOT_RECOVER, .action = VMCE_DECISION_REFUSE,
    .told = K_AO, .pause = B_NO, .detail = "refused" },
  { ANYP, K_AR, .cpu = C_CANNOT_RECOVER, .action = VMCE_DECISION_REFUSE, .told = K_AR,
    .pause = B_YES, .detail = "VM paused, as the vCPU would fault" },
  /* and one that can */
  { ANYP, .cpu = C_INTEL_SER_P, .action = VMCE_DECISION_INJECT, .style = VMCE_MCE_STYLE_INTEL,
    .pause = B_NO },
  { ANYP, .cpu = C_AMD_SUCCOR, .action = VMCE_DECISION_INJECT, .style = VMCE_MCE_STYLE_AMD,
    .pause = B_NO },
};

static const VmceCpuModel cpu_models[] = {
  [C_INTEL_SER_P] = { "GenuineIntel", 6, 85, TRUE, FALSE },
  [C_INTEL] = { "GenuineIntel", 6, 85, FALSE, FALSE },
  [C_AMD_SUCCOR] = { "AuthenticAMD", 23, 1, FALSE, TRUE },
  [C_AMD] = { "AuthenticAMD", 23, 1, FALSE, FALSE },
};

typedef struct {
  VmcePolicy policy;
  KindM kind;
  gboolean kvm;
  CpuM cpu;
  WhereM where;
  gboolean fresh;
  ThreadM thread;
  gboolean simulated;
  RepeatM repeat;
  StuckM stuck;
} Combo;

#define VCPU_INDEX 3
#define FIRST_VCPU 0

static void
combo_facts (const Combo *c, VmceFacts *f)
{
  *f = (VmceFacts) {
    .kind = c->kind == K_AR ? VMCE_MCE_KIND_AR : VMCE_MCE_KIND_AO,
    .policy = c->policy,
    .kvm = c->kvm,
    .cpu_model = &cpu_models[c->cpu],
    .where = c->where == W_RAM ? VMCE_WHERE_RAM : c->where == W_BLOCK ? VMCE_WHERE_BLOCK
                                                                        : VMCE_WHERE_ELSEWHERE,
    .block = c->where == W_BLOCK ? "pc.ram-spare" : NULL,
    .block_offset = c->where == W_BLOCK ? 0x3000 : 0,
    .layout_fresh = c->fresh,
    .main_thread = c->thread == T_MAIN,
    .vcpu_index = c->thread == T_VCPU ? VCPU_INDEX : -1,
    .first_vcpu_index = FIRST_VCPU,
    .simulated = c->simulated,
    .same_page_on_its_way = c->repeat == R_ON_ITS_WAY,
    .known_poisoned = c->repeat == R_KNOWN || c->repeat == R_KNOWN_AT_LIMIT,
    .refaults = c->repeat == R_KNOWN_AT_LIMIT ? VMCE_REFAULT_LIMIT - 1 : 0,
    .stuck = c->stuck != S_NO,
    .stuck_why = c->stuck != S_NO ? "mprotect: Invalid argument" : NULL,
    .stuck_faults = c->stuck == S_STUCK_AT_LIMIT ? VMCE_REFAULT_LIMIT - 1 : 0,
    .parked = c->stuck == S_PARKED,
  };
}

static gboolean
bool_matches (BoolM m, gboolean v)
{
  return m == B_ANY || (m == B_YES) == !!v;
}

static gboolean
row_matches (const Row *r, const Combo *c)
{
  if (r->policy != P_ANY && (VmcePolicy) r->policy != c->policy)
    return FALSE;
  if (r->kind != K_ANY && r->kind != c->kind)
    return FALSE;
  if (r->where == W_NOT_RAM ? c->where == W_RAM : r->where != W_ANY && r->where != c->where)
    return FALSE;
  if (!bool_matches (r->fresh, c->fresh) || !bool_matches (r->simulated, c->simulated))
    return FALSE;
  if (r->thread == T_QEMU ? c->thread == T_VCPU
      : r->thread == T_NOT_MAIN ? c->thread == T_MAIN
      : r->thread != T_ANY && r->thread != c->thread)
    return FALSE;
  if (r->repeat != R_ANY && r->repeat != c->repeat)
    return FALSE;
  if (!bool_matches (r->tcg, !c->kvm))
    return FALSE;
  if (r->stuck == S_STUCK_ANY ? c->stuck == S_NO : r->stuck != S_ANY && r->stuck != c->stuck)
    return FALSE;
  if (r->cpu == C_CANNOT_RECOVER)
    return c->cpu == C_INTEL || c->cpu == C_AMD;
  return r->cpu == C_ANY || r->cpu == c->cpu;
}

static gchar *
combo_describe (const Combo *c)
{
  static const gchar *kinds[] = { "?", "AO", "AR" };
  static const gchar *wheres[] = { "?", "ram", "block", "elsewhere" };
  static const gchar *cpus[] = { "?", "intel+ser_p", "intel", "amd+succor", "amd" };
  static const gchar *repeats[] = { "?", "first", "on-its-way", "known", "known-at-limit" };
  static const gchar *stucks[] = { "?", "", " stuck", " stuck-at-limit", " parked" };

  return g_strdup_printf ("policy=%s %s %s cpu=%s %s%s %s%s %s%s",
                          vmce_policy_to_string (c->policy), kinds[c->kind],
                          c->kvm ? "kvm" : "tcg", cpus[c->cpu], wheres[c->where],
                          c->fresh ? "(fresh)" : "", c->thread == T_VCPU ? "vcpu" : c->thread == T_MAIN ? "main" : "qemu",
                          c->simulated ? " simulated" : "", repeats[c->repeat], stucks[c->stuck]);
}

static void
check_combo (const Combo *c, guint *row_hits)
{
  g_auto(VmceDecision) d = { 0 };
  g_autofree gchar *what = combo_describe (c);
  VmceFacts f;
  const Row *r = NULL;
  gboolean consumed_by_qemu;
  gboolean decided;
  gboolean stuck;

  combo_facts (c, &f);
  vmce_decide (&f, &d);
  for (guint i = 0; i < G_N_ELEMENTS (rules) && r == NULL; i++) {
    if (row_matches (&rules[i], c)) {
      r = &rules[i];
      row_hits[i]++;
    }
  }
  if (r == NULL)
    g_error ("%s: no row of the table covers it", what);

  if (d.action != r->action)
    g_error ("%s: %s, the table says %s (row %u)", what, vmce_decision_action_to_string (d.action),
             vmce_decision_action_to_string (r->action), (guint) (r - rules));
  if (r->told != K_ANY && d.kind != (r->told == K_AR ? VMCE_MCE_KIND_AR : VMCE_MCE_KIND_AO))
    g_error ("%s: tells the guest %s", what, vmce_mce_kind_to_string (d.kind));
  if (r->action == VMCE_DECISION_INJECT && d.style != r->style)
    g_error ("%s: style %s", what, vmce_mce_style_to_string (d.style));
  if (!bool_matches (r->pause, d.pause))
    g_error ("%s: pause %d", what, d.pause);
  if (r->detail == NULL && d.action != VMCE_DECISION_INJECT && d.action != VMCE_DECISION_COALESCE
      && d.detail != NULL)
    g_error ("%s: says \"%s\", nothing expected", what, d.detail);
  if (r->detail != NULL && (d.detail == NULL || strstr (d.detail, r->detail) == NULL))
    g_error ("%s: says \"%s\", not \"%s\"", what, d.detail, r->detail);

  /* whatever the action, once it is the guest's error */
  consumed_by_qemu = c->kind == K_AR && c->thread != T_VCPU;
  decided = d.action != VMCE_DECISION_PASS && d.action != VMCE_DECISION_RELOOK;
  /* a TCG vCPU that consumed it must finish its load, or nothing reaches it */
  if (d.free_tcg_vcpu != (decided && !c->kvm && c->kind == K_AR && c->thread == T_VCPU))
    g_error ("%s: free_tcg_vcpu %d", what, d.free_tcg_vcpu);
  stuck = d.free_tcg_vcpu && c->stuck != S_NO;
  if (d.free_tcg_vcpu && !stuck && strstr (d.detail, c->simulated ? "simulated page is given back"
                                                                  : "replaced by a zeroed one") == NULL)
    g_error ("%s: the detail does not say what happens to the page: %s", what, d.detail);
  /* and where it could not be, says why, and that nothing went to QEMU */
  if (stuck && (strstr (d.detail, "cannot give the page back (mprotect: Invalid argument)") == NULL
                || (d.action != VMCE_DECISION_RETRY && d.action != VMCE_DECISION_PARK)))
    g_error ("%s: stuck, but %s: %s", what, vmce_decision_action_to_string (d.action), d.detail);
  /* a simulated page QEMU itself read comes back, so QEMU can go on */
  if (d.give_back_page != (decided && consumed_by_qemu && c->simulated))
    g_error ("%s: give_back_page %d", what, d.give_back_page);
  if (d.give_back_page && strstr (d.detail, "consumed by QEMU itself") == NULL)
    g_error ("%s: the detail does not say QEMU consumed it: %s", what, d.detail);
  /* only an AR on a vCPU is held, and only while its injection is sent */
  if (d.hold != (d.action == VMCE_DECISION_INJECT && c->kind == K_AR && c->thread == T_VCPU))
    g_error ("%s: hold %d", what, d.hold);
  if (d.action == VMCE_DECISION_INJECT && d.cpu != (d.hold ? VCPU_INDEX : FIRST_VCPU))
    g_error ("%s: injected on cpu %u", what, d.cpu);
  /* the main thread is never held for a layout: it alone could answer */
  if (d.refresh_layout != (c->thread == T_MAIN && c->where != W_RAM && !c->fresh
                           && c->policy != VMCE_POLICY_PASS))
    g_error ("%s: refresh_layout %d", what, d.refresh_layout);
  /* a consumed page the guest was told about counts, however it ends */
  if (d.count_refault != (decided && d.action != VMCE_DECISION_COALESCE && !stuck && c->kind == K_AR
                          && c->thread == T_VCPU
                          && (c->repeat == R_KNOWN || c->repeat == R_KNOWN_AT_LIMIT)))
    g_error ("%s: count_refault %d", what, d.count_refault);
  /* an x86 guest takes a machine check: no Arm path, in the journal either */
  if (d.path != VMCE_ARM_PATH_NONE)
    g_error ("%s: Arm path %s", what, vmce_arm_path_to_string (d.path));
}

static void
test_decision_table (void)
{
  guint row_hits[G_N_ELEMENTS (rules)] = { 0 };
  guint combos = 0;

  for (gint policy = 0; policy < VMCE_POLICY_COUNT; policy++)
    for (KindM kind = K_AO; kind <= K_AR; kind++)
      for (gint kvm = 0; kvm <= 1; kvm++)
        for (CpuM cpu = C_INTEL_SER_P; cpu <= C_AMD; cpu++)
          for (WhereM where = W_RAM; where <= W_ELSEWHERE; where++)
            for (gint fresh = 0; fresh <= 1; fresh++)
              for (ThreadM thread = T_VCPU; thread <= T_MAIN; thread++)
                for (gint simulated = 0; simulated <= 1; simulated++)
                  for (RepeatM repeat = R_NONE; repeat <= R_KNOWN_AT_LIMIT; repeat++)
                    for (StuckM stuck = S_NO; stuck <= S_PARKED; stuck++) {
                      Combo c = { policy, kind, kvm, cpu, where, fresh, thread, simulated, repeat, stuck };

                      check_combo (&c, row_hits);
                      combos++;
                    }
  g_test_message ("%u combinations", combos);
  /* a row that matches nothing is a rule nobody tests */
  for (guint i = 0; i < G_N_ELEMENTS (rules); i++)
    g_assert_cmpuint (row_hits[i], >, 0);
}

/* Every reason that applied is in the journal, none lost or leaked
 * (a forced injection used to overwrite the TCG step's detail) */
static void
test_decision_detail_keeps_every_reason (void)
{
  g_auto(VmceDecision) d = { 0 };
  VmceFacts f = {
    .kind = VMCE_MCE_KIND_AR,
    .policy = VMCE_POLICY_FORCE,
    .kvm = FALSE,
    .cpu_model = &cpu_models[C_AMD],
    .where = VMCE_WHERE_RAM,
    .vcpu_index = 1,
    .first_vcpu_index = 0,
  };

  vmce_decide (&f, &d);
  g_assert_cmpint (d.action, ==, VMCE_DECISION_INJECT);
  g_assert_true (d.free_tcg_vcpu);
  g_assert_true (g_str_has_prefix (d.detail, "policy force: injected Intel-style although "
                                             "the guest has an AMD CPU without the SUCCOR bit"));
  g_assert_nonnull (strstr (d.detail, "; TCG: the poisoned host page is replaced"));
}

/* The RAM layout is read again only once per stop, and a real miss after
 * it is passed on whatever the policy */
static void
test_decision_relook_once (void)
{
  g_auto(VmceDecision) first = { 0 };
  g_auto(VmceDecision) second = { 0 };
  VmceFacts f = {
    .kind = VMCE_MCE_KIND_AO,
    .policy = VMCE_POLICY_STOP,
    .cpu_model = &cpu_models[C_INTEL_SER_P],
    .where = VMCE_WHERE_ELSEWHERE,
    .vcpu_index = -1,
  };

  vmce_decide (&f, &first);
  g_assert_cmpint (first.action, ==, VMCE_DECISION_RELOOK);
  g_assert_null (first.detail);
  f.layout_fresh = TRUE;
  vmce_decide (&f, &second);
  g_assert_cmpint (second.action, ==, VMCE_DECISION_PASS);
  g_assert_false (second.pause);
}

/* Within the injection gap, only a held SRAR through inject-mce goes at
 * once (every combination) */
/* a SIGBUS passed on reaches QEMU as the kernel would have sent it */
static void
test_decision_pass_how (void)
{
  const struct {
    VmceMceKind kind;
    gboolean blocks;
    VmcePassHow how;
  } rows[] = {
    { VMCE_MCE_KIND_AO, FALSE, VMCE_PASS_AS_IS },
    { VMCE_MCE_KIND_AO, TRUE, VMCE_PASS_PENDING }, /* QEMU's main thread: its signalfd */
    { VMCE_MCE_KIND_AR, FALSE, VMCE_PASS_AS_IS },  /* a KVM vCPU thread: QEMU's handler */
    { VMCE_MCE_KIND_AR, TRUE, VMCE_PASS_FORCED },  /* a TCG vCPU thread: QEMU is killed */
  };

  for (guint i = 0; i < G_N_ELEMENTS (rows); i++)
    g_assert_cmpint (vmce_decide_pass_how (rows[i].kind, rows[i].blocks), ==, rows[i].how);
}

static void
test_decision_waits_gap (void)
{
  g_assert_true (vmce_decide_waits_gap (FALSE));  /* HMP mce: a second error too early resets the guest */
  g_assert_false (vmce_decide_waits_gap (TRUE));  /* inject-mce says "busy" instead */
}

static void
test_decision_after_answer (void)
{
  static const struct {
    VmceAnswer answer;
    gint64 retrying_for_ms;
    VmceThen then;
  } rows[] = {
    { VMCE_ANSWER_TAKEN, 0, VMCE_THEN_INJECTED },
    { VMCE_ANSWER_TAKEN, 1500, VMCE_THEN_INJECTED },    /* in after some tries */
    { VMCE_ANSWER_QUEUED, 0, VMCE_THEN_AWAIT_EVENT },   /* KVM: MEMORY_FAILURE tells */
    { VMCE_ANSWER_BUSY, 0, VMCE_THEN_RETRY },
    { VMCE_ANSWER_BUSY, 1999, VMCE_THEN_RETRY },
    { VMCE_ANSWER_BUSY, 2000, VMCE_THEN_FAILED },       /* the bound */
    { VMCE_ANSWER_DROPPED, 0, VMCE_THEN_RETRY },        /* never journaled as injected */
    { VMCE_ANSWER_DROPPED, 5000, VMCE_THEN_FAILED },
    { VMCE_ANSWER_SILENT, 0, VMCE_THEN_UNCONFIRMED },   /* the guest may have masked the bank */
    { VMCE_ANSWER_ERROR, 0, VMCE_THEN_FAILED },         /* only "busy" is asked again */
  };

  for (guint i = 0; i < G_N_ELEMENTS (rows); i++) {
    g_test_message ("%s after %" G_GINT64_FORMAT " ms", vmce_answer_to_string (rows[i].answer),
                    rows[i].retrying_for_ms);
    g_assert_cmpint (vmce_decide_after_answer (rows[i].answer, rows[i].retrying_for_ms, VMCE_RETRY_BOUND_MS),
                     ==, rows[i].then);
  }
}

static void
test_decision_retry_pause (void)
{
  static const guint pauses[] = { 1, 1, 2, 4, 8, 16, 32, 32, 32 };

  for (guint tries = 0; tries < G_N_ELEMENTS (pauses); tries++)
    g_assert_cmpuint (vmce_decide_retry_pause_ms (tries), ==, pauses[tries]);
  g_assert_cmpuint (vmce_decide_retry_pause_ms (G_MAXUINT), ==, 32);
}

/* What an Arm64 QEMU offers, against the path vmced takes */
typedef struct {
  gboolean ras, acpi, ghes, sea;
  const gchar *machine;
  VmceMceKind kind;
  VmceArmPath path;
  const gchar *why; /* a substring of the refusal, NULL: none */
} ArmRow;

static const ArmRow arm_rows[] = {
  { TRUE, TRUE, TRUE, FALSE, "virt-10.2-machine", VMCE_MCE_KIND_AO, VMCE_ARM_PATH_GHES_QMP, NULL },
  { TRUE, TRUE, TRUE, FALSE, "virt-11.1-machine", VMCE_MCE_KIND_AO, VMCE_ARM_PATH_GHES_QMP, NULL },
  { TRUE, TRUE, FALSE, FALSE, "virt-10.0-machine", VMCE_MCE_KIND_AO, VMCE_ARM_PATH_REFUSED,
    "no inject-ghes-v2-error to record the error in the guest's GHES: it takes QEMU >= 10.2" },
  { TRUE, TRUE, TRUE, FALSE, "virt-10.1-machine", VMCE_MCE_KIND_AO, VMCE_ARM_PATH_REFUSED,
    "machine type virt-10.1-machine has no GHES source for inject-ghes-v2-error" },
  { TRUE, TRUE, TRUE, FALSE, "sbsa-ref-machine", VMCE_MCE_KIND_AO, VMCE_ARM_PATH_REFUSED, "virt-10.2 or newer" },
  { TRUE, TRUE, TRUE, FALSE, NULL, VMCE_MCE_KIND_AO, VMCE_ARM_PATH_REFUSED, "machine type (unknown)" },
  { FALSE, TRUE, TRUE, TRUE, "virt-10.2-machine", VMCE_MCE_KIND_AO, VMCE_ARM_PATH_REFUSED, "virt,ras=on" },
  { FALSE, TRUE, TRUE, TRUE, "virt-10.2-machine", VMCE_MCE_KIND_AR, VMCE_ARM_PATH_REFUSED,
    "<features><ras state='on'/>" },
  { TRUE, TRUE, TRUE, FALSE, "virt-10.2-machine", VMCE_MCE_KIND_AR, VMCE_ARM_PATH_REFUSED,
    "synchronous external abort on vCPU 3 with its GHES record, and this QEMU has no command for it "
    "(x-vmce-inject-sea, vmce's QEMU patch: vmce-10.2-arm64, make qemu-10.2-arm64)" },
  { TRUE, FALSE, TRUE, TRUE, "virt-10.2-machine", VMCE_MCE_KIND_AO, VMCE_ARM_PATH_REFUSED,
    "the guest has no ACPI, so no GHES" },
  { TRUE, FALSE, TRUE, TRUE, "virt-10.2-machine", VMCE_MCE_KIND_AR, VMCE_ARM_PATH_REFUSED,
    "a direct -kernel boot has none" },
  /* the SEA source is in every machine type's HEST */
  { TRUE, TRUE, FALSE, TRUE, "virt-9.2-machine", VMCE_MCE_KIND_AR, VMCE_ARM_PATH_SEA, NULL },
};

static void
test_decision_arm_path (void)
{
  for (guint i = 0; i < G_N_ELEMENTS (arm_rows); i++) {
    const ArmRow *r = &arm_rows[i];
    VmceArmQemu arm = { r->ras, r->acpi, r->ghes, r->sea, (gchar *) r->machine };
    g_autofree gchar *why = NULL;

    g_test_message ("row %u", i);
    g_assert_cmpint (vmce_decide_arm_path (&arm, r->kind, VCPU_INDEX, &why), ==, r->path);
    if (r->why == NULL)
      g_assert_null (why);
    else
      g_assert_nonnull (strstr (why, r->why));
    /* one line */
    g_assert_true (why == NULL || strchr (why, '\n') == NULL);
  }
}

static void
arm_decide_on (const VmceArmQemu *arm, VmceMceKind kind, gboolean kvm, VmceDecision *d)
{
  VmceFacts f = {
    .kind = kind,
    .policy = VMCE_POLICY_FORWARD,
    .kvm = kvm,
    .cpu_model = &cpu_models[C_ANY], /* an Arm CPU: no vendor, no MCA */
    .where = VMCE_WHERE_RAM,
    .vcpu_index = kind == VMCE_MCE_KIND_AR ? VCPU_INDEX : -1,
    .first_vcpu_index = FIRST_VCPU,
    .arch = VMCE_ARCH_ARM64,
    .arm = arm,
  };

  vmce_decide (&f, d);
}

static void
arm_decide (const VmceArmQemu *arm, VmceMceKind kind, VmceDecision *d)
{
  arm_decide_on (arm, kind, TRUE, d);
}

/* The whole decision for an Arm64 guest: told through GHES where the
 * QEMU can, refused in one line where not; a refused AR pauses the VM as
 * on x86, a refused AO does not */
static void
test_decision_arm (void)
{
  VmceArmQemu qemu_10_2 = { TRUE, TRUE, TRUE, FALSE, (gchar *) "virt-10.2-machine" };
  VmceArmQemu qemu_10_0 = { TRUE, TRUE, FALSE, FALSE, (gchar *) "virt-10.0-machine" };
  VmceArmQemu patched = { TRUE, TRUE, TRUE, TRUE, (gchar *) "virt-10.2-machine" };

  {
    g_auto(VmceDecision) d = { 0 };
    arm_decide (&qemu_10_2, VMCE_MCE_KIND_AO, &d);
    g_assert_cmpint (d.action, ==, VMCE_DECISION_INJECT);
    g_assert_cmpint (d.path, ==, VMCE_ARM_PATH_GHES_QMP);
    g_assert_false (d.hold);
    g_assert_false (d.pause);
  }
  {
    g_auto(VmceDecision) d = { 0 };
    arm_decide (&qemu_10_0, VMCE_MCE_KIND_AO, &d);
    g_assert_cmpint (d.action, ==, VMCE_DECISION_REFUSE);
    g_assert_cmpint (d.path, ==, VMCE_ARM_PATH_REFUSED);
    g_assert_false (d.pause);
    g_assert_nonnull (strstr (d.detail, "refused: this QEMU has no inject-ghes-v2-error"));
  }
  {
    g_auto(VmceDecision) d = { 0 };
    arm_decide (&qemu_10_2, VMCE_MCE_KIND_AR, &d);
    g_assert_cmpint (d.action, ==, VMCE_DECISION_REFUSE);
    g_assert_cmpint (d.path, ==, VMCE_ARM_PATH_REFUSED);
    g_assert_true (d.pause);
    g_assert_nonnull (strstr (d.detail, "x-vmce-inject-sea"));
  }
  {
    g_auto(VmceDecision) d = { 0 };
    arm_decide (&patched, VMCE_MCE_KIND_AR, &d);
    g_assert_cmpint (d.action, ==, VMCE_DECISION_INJECT);
    g_assert_cmpint (d.path, ==, VMCE_ARM_PATH_SEA);
    g_assert_true (d.hold);
    g_assert_cmpuint (d.cpu, ==, VCPU_INDEX);
    g_assert_false (d.free_tcg_vcpu);
  }
  {
    /* under TCG the vCPU takes an abort, not a machine check */
    g_auto(VmceDecision) d = { 0 };
    arm_decide_on (&patched, VMCE_MCE_KIND_AR, FALSE, &d);
    g_assert_cmpint (d.path, ==, VMCE_ARM_PATH_SEA);
    g_assert_true (d.free_tcg_vcpu);
    g_assert_nonnull (strstr (d.detail, "takes its synchronous external abort as it leaves"));
    g_assert_null (strstr (d.detail, "machine check"));
  }
}

/* What attach says once about what the QEMU cannot do, or nothing */
static void
test_decision_arm_said_at_attach (void)
{
  VmceArmQemu all = { TRUE, TRUE, TRUE, TRUE, (gchar *) "virt-10.2-machine" };
  VmceArmQemu qemu_10_2 = { TRUE, TRUE, TRUE, FALSE, (gchar *) "virt-10.2-machine" };
  VmceArmQemu no_ras = { FALSE, TRUE, TRUE, FALSE, (gchar *) "virt-10.2-machine" };
  VmceArmQemu qemu_10_0 = { TRUE, TRUE, FALSE, FALSE, (gchar *) "virt-10.0-machine" };
  g_autofree gchar *none = vmce_decide_arm_said_at_attach (&all);
  g_autofree gchar *ar = vmce_decide_arm_said_at_attach (&qemu_10_2);
  g_autofree gchar *ras = vmce_decide_arm_said_at_attach (&no_ras);
  g_autofree gchar *both = vmce_decide_arm_said_at_attach (&qemu_10_0);

  g_assert_null (none);
  g_assert_cmpstr (ar, ==, "Arm64 guest: ARs will be refused (and the VM paused): no x-vmce-inject-sea "
                           "(vmce's QEMU patch: vmce-10.2-arm64, make qemu-10.2-arm64)");
  g_assert_nonnull (strstr (ras, "will not be told: QEMU's machine has no GHES"));
  g_assert_nonnull (strstr (both, "AOs will be refused: this QEMU has no inject-ghes-v2-error"));
  g_assert_nonnull (strstr (both, "; ARs will be refused"));
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_test_add_func ("/decision/table", test_decision_table);
  g_test_add_func ("/decision/detail-keeps-every-reason", test_decision_detail_keeps_every_reason);
  g_test_add_func ("/decision/relook-once", test_decision_relook_once);
  g_test_add_func ("/decision/waits-gap", test_decision_waits_gap);
  g_test_add_func ("/decision/after-answer", test_decision_after_answer);
  g_test_add_func ("/decision/retry-pause", test_decision_retry_pause);
  g_test_add_func ("/decision/pass-how", test_decision_pass_how);
  g_test_add_func ("/decision/arm-path", test_decision_arm_path);
  g_test_add_func ("/decision/arm", test_decision_arm);
  g_test_add_func ("/decision/arm-said-at-attach", test_decision_arm_said_at_attach);
  return g_test_run ();
}
